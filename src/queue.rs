//! The contender queue both recipes are built on (crate-private).
//!
//! A contender is an EPHEMERAL_SEQUENTIAL child `ROOT/_c_<uuid>-<name><seq>` of the recipe
//! root (Apache Curator's "protected" naming; `name` is `lock-` or `latch-`). Contenders are
//! ordered by the sequence suffix of *every* child, whatever its prefix, so foreign clients
//! on the same root (Curator, kazoo) take part in the same order. The lowest contender is
//! first; every other one watches only its immediate predecessor, with a data watch.
//!
//! * Entering costs one round trip: the create and the child listing are sent back to back
//!   on one session, so the listing already holds the new node.
//! * A contender keeps only its predecessor's name, until the watch on it is set, and
//!   whether that predecessor was first when it last looked (no buffer that grows with the
//!   queue). Sessions also enter a bounded number at a time (see [`Session::entry_turn`]),
//!   so a burst of waiters does not hold a burst of listings. Sequence numbers only grow,
//!   so no node can appear below it, and a node that was first stays first until it goes.
//!   The contender is first, with no request after the notification, when its predecessor
//!   goes and either was first when it last looked, or marked its node on the way out: a
//!   contender that entered behind others and became first deletes its node in one
//!   transaction with a data change (mutex queues only; see [`Queue::new`]), so its
//!   successor's data watch fires with `NodeDataChanged`. Hand-off cost is then the same
//!   at any queue length. Only when a predecessor goes unmarked while not known to be
//!   first (it gave up, its session died, or it is a foreign client) does the contender
//!   list the root once to find its new predecessor. No recipe writes to a contender node
//!   otherwise; clients that do break the hand-off.
//! * A [`Contender`] owns its node: dropping it deletes the node in the background. A create
//!   whose reply was lost is found again by its uuid, so no outcome but "in the queue"
//!   leaves a node behind.

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::SemaphorePermit;
use tracing::{debug, debug_span, warn, Instrument};
use uuid::Uuid;
use zookeeper_client::{
    Acls, Client, CreateMode, CreateOptions, EventType, OneshotWatcher, SessionState, Stat,
};

use crate::error::{outcome_unknown, Error, Result};
use crate::path;
#[cfg(doc)]
use crate::session::Session;

const SEQUENCE_DIGITS: usize = 10;

const CONTENDER: CreateOptions<'static> =
    CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());

/// The data a first contender's node is given in the same transaction that deletes it: its
/// successor's data watch then fires with `NodeDataChanged` instead of `NodeDeleted`, which
/// tells it that the node went while first (see [`Contender::leave`]).
const RELEASED: &[u8] = b"released";

/// A recipe root and the contender name used under it.
#[derive(Clone, Debug)]
pub(crate) struct Queue {
    root: Arc<str>,
    name: &'static str,
    /// Whether a first contender marks its node when it leaves (see [`remove`]).
    marks: bool,
}

impl Queue {
    /// A queue of `name` contenders (`"lock-"`, `"latch-"`) under `root`. With `marks`, a
    /// first contender marks its node as it leaves, so that its successor takes over with
    /// no request; only for names whose foreign contenders look again on any event on
    /// their predecessor (Curator's `InterProcessMutex` does, its `LeaderLatch` only
    /// on a deletion).
    pub(crate) fn new(root: &str, name: &'static str, marks: bool) -> Result<Queue> {
        Ok(Queue {
            root: Arc::from(path::validate_root(root)?),
            name,
            marks,
        })
    }

    pub(crate) fn root(&self) -> &str {
        &self.root
    }

    /// Creates a contender node holding `data`, creating missing parents of the root as
    /// container nodes. `turn` (see [`Session::entry_turn`]) is given back as soon as the
    /// create and the listing are answered.
    ///
    /// # Cancel safety
    /// Cancel safe: a node whose create was sent is deleted in the background, found by its
    /// uuid if the reply never came.
    pub(crate) async fn enter(
        &self,
        client: &Arc<Client>,
        data: &[u8],
        turn: SemaphorePermit<'_>,
    ) -> Result<Contender> {
        let mut turn = Some(turn);
        let mut creating = Creating::new(client, &self.root, self.marks);
        let mut node = creating.prefix(self.name);
        let mut made_root = false;
        loop {
            // Sent back to back: the listing already holds the new node.
            let create = client.create(&node, data, &CONTENDER);
            let list = client.list_children(&self.root);
            let created = create.await.map(|(stat, sequence)| (stat.czxid, sequence));
            let listed = list.await;
            drop(turn.take());
            match created {
                Ok((czxid, sequence)) => {
                    // No allocation: the prefix left room for the sequence number.
                    let _ = write!(node, "{sequence}");
                    let children = match listed {
                        Ok(children) => children,
                        Err(_) => Box::pin(self.list(client)).await?,
                    };
                    return Ok(creating.contender(node, czxid, &children));
                }
                Err(zookeeper_client::Error::NoNode) if !made_root => {
                    made_root = true;
                    Box::pin(self.make_root(client)).await?;
                }
                Err(err) if outcome_unknown(&err) => {
                    if let Some(contender) = Box::pin(creating.recover(self)).await? {
                        return Ok(contender);
                    }
                }
                Err(err) => return Err(Error::at(&self.root, err)),
            }
        }
    }

    /// Creates the root and its missing parents as container nodes.
    async fn make_root(&self, client: &Client) -> Result<()> {
        const OPTIONS: CreateOptions<'static> = CreateMode::Container.with_acls(Acls::anyone_all());
        debug!(root = %self.root, "creating the recipe root");
        retry(client, || client.mkdir(&self.root, &OPTIONS))
            .await
            .map_err(|err| match err {
                Error::ZooKeeper(zookeeper_client::Error::NoNode) => Error::InvalidPath {
                    path: self.root.to_string(),
                    reason: "the session's chroot does not exist",
                },
                err => err.at_root(&self.root),
            })
    }

    /// The children of the root, retried across connection loss.
    pub(crate) async fn list(&self, client: &Client) -> Result<Vec<String>> {
        match retry(client, || client.list_children(&self.root)).await {
            Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => Ok(Vec::new()),
            other => other.map_err(|err| err.at_root(&self.root)),
        }
    }

    /// The contenders under the root, first first, as `(name, data)`; for observers.
    pub(crate) async fn contenders(&self, client: &Client) -> Result<Vec<(String, Vec<u8>)>> {
        let mut names = self.list(client).await?;
        sort_contenders(&mut names);
        let reads: Vec<_> = names
            .iter()
            .map(|name| client.get_data(&path::join(&self.root, name)))
            .collect();
        let mut contenders = Vec::with_capacity(names.len());
        for (name, read) in names.into_iter().zip(reads) {
            match read.await {
                Ok((data, _)) => contenders.push((name, data)),
                Err(zookeeper_client::Error::NoNode) => {}
                Err(err) => return Err(Error::at(&self.root, err)),
            }
        }
        Ok(contenders)
    }
}

impl Error {
    /// Names the recipe root in errors about it.
    fn at_root(self, root: &str) -> Error {
        match self {
            Error::ZooKeeper(err) => Error::at(root, err),
            other => other,
        }
    }
}

/// A create in flight: deletes whatever it may have created unless it became a contender.
struct Creating {
    client: Arc<Client>,
    root: Arc<str>,
    uuid: Uuid,
    marks: bool,
    armed: bool,
}

impl Creating {
    fn new(client: &Arc<Client>, root: &Arc<str>, marks: bool) -> Creating {
        Creating {
            client: client.clone(),
            root: root.clone(),
            uuid: Uuid::new_v4(),
            marks,
            armed: true,
        }
    }

    /// `ROOT/_c_<uuid>-<name>`, with room for the sequence number the server appends: the
    /// node's path, allocated once and before the wait.
    fn prefix(&self, name: &str) -> String {
        let mut prefix =
            String::with_capacity(self.root.len() + 41 + name.len() + SEQUENCE_DIGITS + 1);
        let _ = write!(prefix, "{}/_c_{}-{name}", self.root, self.uuid);
        prefix
    }

    /// The contender the create made; it owns the node from now on (this disarms).
    fn contender(&mut self, node: String, czxid: i64, children: &[String]) -> Contender {
        self.armed = false;
        let sequence = sequence(&node).unwrap_or_default();
        let ahead = Ahead::of(children, sequence);
        debug!(%node, position = ahead.count, "entered the queue");
        Contender {
            client: self.client.clone(),
            node,
            czxid,
            sequence,
            predecessor: Predecessor::of(ahead.predecessor),
            predecessor_first: ahead.count == 1,
            ahead: ahead.count,
            // A contender that entered first is seen as first by every successor already.
            marks: self.marks && ahead.count > 0,
            armed: true,
        }
    }

    /// After a create whose outcome is unknown: the node if it was made.
    async fn recover(&mut self, queue: &Queue) -> Result<Option<Contender>> {
        let client = &self.client;
        reconnected(client).await?;
        retry(client, || client.sync(&self.root)).await?;
        let children = queue.list(client).await?;
        let Some(name) = find_own(&children, &self.uuid.to_string()) else {
            debug!(uuid = %self.uuid, "lost create did not happen; creating again");
            return Ok(None);
        };
        let node = path::join(&self.root, name);
        match retry(client, || client.get_data(&node)).await {
            Ok((_, stat)) => {
                debug!(%node, "found the node of a create whose reply was lost");
                Ok(Some(self.contender(node, stat.czxid, &children)))
            }
            Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => Ok(None),
            Err(err) => Err(err),
        }
    }
}

impl Drop for Creating {
    fn drop(&mut self) {
        if self.armed {
            spawn_removal(
                self.client.clone(),
                Removal::ByUuid {
                    root: self.root.clone(),
                    uuid: self.uuid,
                },
            );
        }
    }
}

/// Our node in the queue. Dropping it deletes the node in the background.
#[derive(Debug)]
pub(crate) struct Contender {
    client: Arc<Client>,
    /// Full path of the node; the root is its parent.
    node: String,
    czxid: i64,
    sequence: i32,
    /// Who is immediately ahead.
    predecessor: Predecessor,
    /// Whether that predecessor was first when last looked: then its going makes us first.
    predecessor_first: bool,
    /// How many contenders were ahead when last looked.
    ahead: usize,
    /// Whether to mark the node when it leaves while first: it entered behind others, so a
    /// successor may not know that it became first.
    marks: bool,
    armed: bool,
}

impl Contender {
    /// Full path of the node.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// The zxid that created the node: a fencing token, increasing with every new node.
    pub(crate) fn czxid(&self) -> i64 {
        self.czxid
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Whether no lower contender is known to exist.
    pub(crate) fn is_first(&self) -> bool {
        matches!(self.predecessor, Predecessor::None)
    }

    /// How many contenders were ahead when last looked.
    pub(crate) fn ahead(&self) -> usize {
        self.ahead
    }

    /// Waits until this contender is first, or `deadline` passes (`Ok(false)`).
    ///
    /// # Notable errors
    /// * [`Error::LockLost`] if the contender's own node is gone (deleted by someone).
    /// * [`Error::SessionExpired`] if the session expired.
    ///
    /// # Cancel safety
    /// Cancel safe: the contender keeps its place; the predecessor watch is removed, and a
    /// wait resumed later lists the root once to learn its predecessor again (a waiting
    /// contender keeps no name).
    pub(crate) async fn wait_first(&mut self, deadline: Option<Instant>) -> Result<bool> {
        let waiting = self.wait_until_first();
        match deadline {
            None => waiting.await.map(|()| true),
            Some(deadline) => {
                match Box::pin(tokio::time::timeout_at(deadline.into(), waiting)).await {
                    Ok(waited) => waited.map(|()| true),
                    Err(_) => Ok(false),
                }
            }
        }
    }

    async fn wait_until_first(&mut self) -> Result<()> {
        loop {
            // `Watched` from here until the predecessor is known to be gone.
            let name = match std::mem::replace(&mut self.predecessor, Predecessor::Watched) {
                Predecessor::None => {
                    self.predecessor = Predecessor::None;
                    return Ok(());
                }
                // A wait given up while watching: the predecessor may be there still.
                Predecessor::Watched => {
                    Box::pin(self.look_again()).await?;
                    continue;
                }
                Predecessor::Named(name) => name,
            };
            let gone = self.predecessor_gone(name).await?;
            if gone == Gone::WhileFirst || self.predecessor_first {
                debug!(node = %self.node, ?gone, "predecessor went while first: handed off");
                self.predecessor = Predecessor::None;
                self.ahead = 0;
            } else {
                Box::pin(self.look_again()).await?;
            }
        }
    }

    /// The recipe root (the node's parent) and the node's own name.
    fn root_and_name(&self) -> (&str, &str) {
        self.node.rsplit_once('/').unwrap_or_default()
    }

    /// Lists the root to learn the predecessor anew, after one that was waiting went.
    async fn look_again(&mut self) -> Result<()> {
        let client = &self.client;
        let (root, own) = self.root_and_name();
        let children = retry(client, || client.list_children(root)).await?;
        if !children.iter().any(|name| name == own) {
            return Err(Error::LockLost {
                node: self.node.clone(),
            });
        }
        let ahead = Ahead::of(&children, self.sequence);
        debug!(node = %self.node, ahead = ahead.count, "predecessor left the queue; looked again");
        self.predecessor = Predecessor::of(ahead.predecessor);
        self.predecessor_first = ahead.count == 1;
        self.ahead = ahead.count;
        Ok(())
    }

    /// Resolves once the predecessor `name` is deleted, saying whether it is known to have
    /// been first. The name is let go once the watch is set.
    fn predecessor_gone(&self, name: Box<str>) -> impl Future<Output = Result<Gone>> + '_ {
        // Boxed, here and below, so that a waiting future holds only what waiting needs;
        // made here, so that the name goes into it and is not kept beside it.
        let watching = Box::pin(self.watch(name));
        async move {
            let watcher = match watching.await {
                Ok((_, _, watcher)) => watcher,
                Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => return Ok(Gone::Unknown),
                Err(err) => return Err(err),
            };
            let event = watcher.changed().await;
            match event.event_type {
                EventType::NodeDataChanged => Ok(Gone::WhileFirst),
                EventType::Session => Err(terminal(event.session_state)),
                _ => Ok(Gone::Unknown),
            }
        }
    }

    /// Sets a data watch on the sibling node `name` (dropped once the watch is set).
    async fn watch(&self, name: Box<str>) -> Result<(Vec<u8>, Stat, OneshotWatcher)> {
        let client = &self.client;
        let (root, _) = self.root_and_name();
        let path = path::join(root, &name);
        let watched = retry(client, || client.get_and_watch_data(&path)).await;
        if watched.is_ok() {
            debug!(node = %self.node, predecessor = %name, "watching the predecessor");
        }
        watched
    }

    /// Deletes the node and waits for the server to confirm.
    ///
    /// A first contender of a marking queue marks its node in the transaction that deletes
    /// it (see [`remove`]), so that its successor takes over without asking the servers
    /// again.
    /// Returns `Ok(false)` if the node was already gone (deleted by someone, or its session
    /// expired). On a lost connection the delete is finished in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished delete is finished in the background.
    pub(crate) async fn leave(mut self) -> Result<bool> {
        let mark = self.marks && self.is_first();
        let span = debug_span!("zk.queue.leave", node = %self.node, mark);
        let deleted = remove(&self.client, &self.node, mark)
            .instrument(span)
            .await;
        match deleted {
            Ok(()) => {
                self.armed = false;
                Ok(true)
            }
            Err(zookeeper_client::Error::NoNode | zookeeper_client::Error::SessionExpired) => {
                self.armed = false;
                debug!(node = %self.node, "node was already gone");
                Ok(false)
            }
            Err(err) => Err(Error::from(err)),
        }
    }

    /// A handle that watches for the loss of this node.
    pub(crate) fn probe(&self) -> Probe {
        Probe {
            client: self.client.clone(),
            node: self.node.clone(),
        }
    }

    /// Forgets the node without deleting it: it is already gone with its session.
    pub(crate) fn disown(mut self) {
        self.armed = false;
    }
}

/// Watches one node of ours for the moment it can no longer be trusted.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    client: Arc<Client>,
    node: String,
}

impl Probe {
    /// Resolves when this node can no longer be trusted to hold its place: the session
    /// ended, the node was deleted, or the connection was suspended (at once, or after a
    /// third of the session timeout when `tolerate_suspension`).
    ///
    /// # Cancel safety
    /// Cancel safe; the node watch is removed.
    /// The node itself is watched once `watch_node_from` resolves: a holder that releases
    /// quickly then never pays for a watch it would not need.
    pub(crate) async fn lost(
        &self,
        tolerate_suspension: bool,
        watch_node_from: impl std::future::Future<Output = ()>,
    ) -> Loss {
        let node_lost = async {
            watch_node_from.await;
            self.node_lost().await
        };
        tokio::select! {
            loss = node_lost => loss,
            loss = connection_lost(&self.client, tolerate_suspension) => loss,
        }
    }

    async fn node_lost(&self) -> Loss {
        let client = &self.client;
        loop {
            let watcher = match retry(client, || client.get_and_watch_data(&self.node)).await {
                Ok((_, _, watcher)) => watcher,
                Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => return Loss::NodeDeleted,
                Err(err) => return Loss::from(err),
            };
            let event = watcher.changed().await;
            match event.event_type {
                // A data change is the mark of a delete: no recipe writes to a contender.
                EventType::NodeDeleted | EventType::NodeDataChanged => return Loss::NodeDeleted,
                EventType::Session => return Loss::from(terminal(event.session_state)),
                _ => continue,
            }
        }
    }
}

/// Why a held lock or leadership can no longer be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// The ZooKeeper session expired (or the client gave up on it).
    SessionExpired,
    /// The connection was suspended: the session may be alive, but another contender may
    /// be let in before this one hears of it.
    Suspended,
    /// The node was deleted by someone else.
    NodeDeleted,
    /// The session was closed.
    Closed,
}

impl From<Error> for Loss {
    fn from(err: Error) -> Loss {
        match err {
            Error::Closed => Loss::Closed,
            _ => Loss::SessionExpired,
        }
    }
}

/// Resolves when the client's connection can no longer be trusted.
async fn connection_lost(client: &Client, tolerate_suspension: bool) -> Loss {
    let grace = client.session_timeout() / 3;
    let mut states = client.state_watcher();
    let mut state = states.state();
    loop {
        match state {
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                state = states.changed().await
            }
            SessionState::Disconnected if !tolerate_suspension => return Loss::Suspended,
            SessionState::Disconnected => {
                match tokio::time::timeout(grace, states.changed()).await {
                    Ok(next) => state = next,
                    Err(_) => return Loss::Suspended,
                }
            }
            SessionState::Closed => return Loss::Closed,
            _ => return Loss::SessionExpired,
        }
    }
}

impl Drop for Contender {
    fn drop(&mut self) {
        if self.armed {
            let mark = self.marks && self.is_first();
            spawn_removal(
                self.client.clone(),
                Removal::Node(std::mem::take(&mut self.node), mark),
            );
        }
    }
}

/// Who is immediately ahead of a contender.
#[derive(Debug)]
enum Predecessor {
    /// No one: the contender is first.
    None,
    /// The contender of this name.
    Named(Box<str>),
    /// One that is being watched. A waiting contender keeps no name; if its wait is given
    /// up before the predecessor goes, the next wait lists the root to learn it again.
    Watched,
}

impl Predecessor {
    fn of(name: Option<&str>) -> Predecessor {
        name.map_or(Predecessor::None, |name| Predecessor::Named(name.into()))
    }
}

/// How a predecessor went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gone {
    /// Deleted with the mark of a first contender: its successor is first now.
    WhileFirst,
    /// Deleted; whether it was first is unknown (it gave up, its session ended, it was
    /// deleted by someone else or by a client that does not mark, or it was already gone).
    Unknown,
}

/// Deletes `node`; with `mark` (only for a first node: no lower contender can exist any
/// more, as sequence numbers only grow) in one transaction with a data change. Its
/// successor's data watch then fires with `NodeDataChanged`, not `NodeDeleted`, and the
/// successor knows it is first without listing the root. Foreign contenders that look
/// again on any event on their predecessor (Curator's `InterProcessMutex`, kazoo) are
/// unaffected.
async fn remove(
    client: &Client,
    node: &str,
    mark: bool,
) -> std::result::Result<(), zookeeper_client::Error> {
    if !mark {
        return client.delete(node, None).await;
    }
    let mut transaction = client.new_multi_writer();
    transaction.add_set_data(node, RELEASED, None)?;
    transaction.add_delete(node, None)?;
    transaction.commit().await?;
    Ok(())
}

/// What a background removal deletes.
enum Removal {
    /// A node of ours, and whether to mark it (see [`remove`]).
    Node(String, bool),
    ByUuid {
        root: Arc<str>,
        uuid: Uuid,
    },
}

/// Deletes a node of ours after its owner went away, retrying across connection loss, until
/// it is gone or the session that owns it is.
fn spawn_removal(client: Arc<Client>, removal: Removal) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        warn!("no tokio runtime to delete a node; it goes when the session ends");
        return;
    };
    runtime.spawn(async move {
        let (node, mark) = match removal {
            Removal::Node(node, mark) => (node, mark),
            Removal::ByUuid { root, uuid } => match find_by_uuid(&client, &root, &uuid).await {
                Some(node) => (node, false),
                None => return,
            },
        };
        let span = debug_span!("zk.queue.remove", %node, mark);
        async move {
            match retry(&client, || remove(&client, &node, mark)).await {
                Ok(()) => debug!("deleted in the background"),
                Err(Error::ZooKeeper(zookeeper_client::Error::NoNode))
                | Err(Error::SessionExpired | Error::Closed) => {}
                Err(err) => warn!(%err, "could not delete; it goes when the session ends"),
            }
        }
        .instrument(span)
        .await
    });
}

async fn find_by_uuid(client: &Client, root: &str, uuid: &Uuid) -> Option<String> {
    reconnected(client).await.ok()?;
    retry(client, || client.sync(root)).await.ok()?;
    let children = retry(client, || client.list_children(root)).await.ok()?;
    find_own(&children, &uuid.to_string()).map(|name| path::join(root, name))
}

fn find_own<'a>(children: &'a [String], uuid: &str) -> Option<&'a str> {
    children.iter().map(String::as_str).find(|name| {
        name.strip_prefix("_c_")
            .is_some_and(|rest| rest.starts_with(uuid))
    })
}

/// Runs `op` again after each connection loss, once the connection is back; fails when the
/// session ends. Bounded by the session: a lost session fails with `SessionExpired`.
pub(crate) async fn retry<T, F, Fut>(client: &Client, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, zookeeper_client::Error>>,
{
    loop {
        match op().await {
            Err(err) if outcome_unknown(&err) => reconnected(client).await?,
            other => return other.map_err(Error::from),
        }
    }
}

/// Waits until `client` is connected; fails if its session ended.
pub(crate) async fn reconnected(client: &Client) -> Result<()> {
    let mut states = client.state_watcher();
    let mut state = states.state();
    loop {
        match state {
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => return Ok(()),
            SessionState::Disconnected => state = states.changed().await,
            terminal => return Err(self::terminal(terminal)),
        }
    }
}

/// The error for a session that ended in `state`.
pub(crate) fn terminal(state: SessionState) -> Error {
    match state {
        SessionState::Closed => Error::Closed,
        _ => Error::SessionExpired,
    }
}

/// The sequence number of a contender name: ZooKeeper appends `%010d` of a signed 32-bit
/// counter, so the suffix is 10 digits, `-` and 9 digits once the counter wrapped, or `-`
/// and 10 digits (told from a positive number by the separator before the sign).
pub(crate) fn sequence(name: &str) -> Option<i32> {
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let tail = |n: usize| name.len().checked_sub(n).and_then(|i| name.get(i..));
    let before_sign = name
        .len()
        .checked_sub(SEQUENCE_DIGITS + 2)
        .and_then(|i| name.get(i..=i));
    if let (Some(long), Some("-" | "_")) = (tail(SEQUENCE_DIGITS + 1), before_sign) {
        if long.strip_prefix('-').is_some_and(all_digits) {
            return long.parse().ok();
        }
    }
    let short = tail(SEQUENCE_DIGITS)?;
    all_digits(short.strip_prefix('-').unwrap_or(short))
        .then(|| short.parse().ok())
        .flatten()
}

/// Queue order of two sequence numbers, read as serial numbers: correct across the 32-bit
/// wrap as long as live contenders span less than 2^31 creations.
fn serial_order(a: i32, b: i32) -> Ordering {
    a.wrapping_sub(b).cmp(&0)
}

/// Sorts contender names into queue order, dropping children without a sequence suffix.
pub(crate) fn sort_contenders(names: &mut Vec<String>) {
    names.retain(|name| sequence(name).is_some());
    let Some(reference) = names.first().and_then(|name| sequence(name)) else {
        return;
    };
    names.sort_by_cached_key(|name| sequence(name).map(|s| s.wrapping_sub(reference)));
}

/// What a listing says about the contenders ahead of one sequence number.
#[derive(Debug, PartialEq, Eq)]
struct Ahead<'a> {
    /// The closest one ahead.
    predecessor: Option<&'a str>,
    /// How many are ahead.
    count: usize,
}

impl<'a> Ahead<'a> {
    fn of(children: &'a [String], own: i32) -> Ahead<'a> {
        let mut ahead = Ahead {
            predecessor: None,
            count: 0,
        };
        let mut closest = None;
        for name in children {
            let Some(seq) = sequence(name) else { continue };
            if serial_order(seq, own) != Ordering::Less {
                continue;
            }
            ahead.count += 1;
            let closer = closest.map_or(true, |closest| serial_order(seq, closest).is_gt());
            if closer {
                closest = Some(seq);
                ahead.predecessor = Some(name);
            }
        }
        ahead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_sequence_suffixes() {
        assert_eq!(sequence("_c_1b2c-lock-0000000007"), Some(7));
        assert_eq!(sequence("_c_1b2c-latch-2147483647"), Some(i32::MAX));
        assert_eq!(sequence("_c_1b2c-lock--000000001"), Some(-1));
        assert_eq!(sequence("_c_1b2c-lock--2147483648"), Some(i32::MIN));
        assert_eq!(sequence("_c_1b2c-lock--2147483647"), Some(-2147483647));
        assert_eq!(sequence("_c_1b2c-lock--1000000000"), Some(-1000000000));
        assert_eq!(sequence("_c_1b2c-lock-2147483647"), Some(i32::MAX));
        assert_eq!(sequence("b7__lock__-2147483647"), Some(-2147483647));
        assert_eq!(sequence("b7__lock__-000000005"), Some(-5));
        assert_eq!(sequence("a3f9e0__lock__0000000042"), Some(42));
        assert_eq!(sequence("lock-0000000003"), Some(3));
        assert_eq!(sequence("lock-+000000003"), None);
        assert_eq!(sequence("lock-00000003"), None);
        assert_eq!(sequence("config"), None);
        assert_eq!(sequence(""), None);
        assert_eq!(sequence("lock-2147483648"), None);
    }

    #[test]
    fn orders_numerically_not_as_strings() {
        let mut list = names(&[
            "_c_b-lock-0000000010",
            "_c_a-lock-0000000009",
            "_c_c-lock-0000000100",
        ]);
        sort_contenders(&mut list);
        assert_eq!(
            list,
            names(&[
                "_c_a-lock-0000000009",
                "_c_b-lock-0000000010",
                "_c_c-lock-0000000100"
            ])
        );
    }

    #[test]
    fn orders_across_the_32_bit_wrap() {
        let mut list = names(&[
            "_c_x-lock--2147483647",
            "_c_y-lock-2147483646",
            "_c_z-lock--2147483648",
            "_c_w-lock-2147483647",
        ]);
        sort_contenders(&mut list);
        assert_eq!(
            list,
            names(&[
                "_c_y-lock-2147483646",
                "_c_w-lock-2147483647",
                "_c_z-lock--2147483648",
                "_c_x-lock--2147483647",
            ])
        );
        assert_eq!(
            Ahead::of(&list, i32::MIN + 1),
            Ahead {
                predecessor: Some("_c_z-lock--2147483648"),
                count: 3
            }
        );
        assert_eq!(
            Ahead::of(&list, 2147483646),
            Ahead {
                predecessor: None,
                count: 0
            }
        );
    }

    #[test]
    fn foreign_prefixes_take_part_and_other_children_do_not() {
        let mut list = names(&[
            "_c_ours-lock-0000000008",
            "9f1c2d__lock__0000000007",
            "_c_java-latch-0000000009",
            "readme",
        ]);
        sort_contenders(&mut list);
        assert_eq!(
            list,
            names(&[
                "9f1c2d__lock__0000000007",
                "_c_ours-lock-0000000008",
                "_c_java-latch-0000000009"
            ])
        );
        assert_eq!(
            Ahead::of(&list, 9),
            Ahead {
                predecessor: Some("_c_ours-lock-0000000008"),
                count: 2
            }
        );
        assert_eq!(
            Ahead::of(&list, 8),
            Ahead {
                predecessor: Some("9f1c2d__lock__0000000007"),
                count: 1
            }
        );
    }

    #[test]
    fn finds_own_node_by_uuid() {
        let list = names(&["_c_aaa-lock-0000000001", "_c_bbb-lock-0000000002"]);
        assert_eq!(find_own(&list, "bbb"), Some("_c_bbb-lock-0000000002"));
        assert_eq!(find_own(&list, "ccc"), None);
    }
}
