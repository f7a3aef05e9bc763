//! The queue of one recipe root ([`Queue`]): acquiring in it (enter, then wait to be first:
//! [`contender`](super::contender)), listing it, and entering it.
//!
//! Entering the queue: create ‖ list in one round trip, and a create whose reply was lost
//! found again by its uuid. A root the session (or another of the process to the same
//! servers) does not know to exist (see
//! [`KnownRoots`](crate::session::KnownRoots)) is made in the same round trip, before the
//! create: one round trip still, two if its parent is missing too. A known root found
//! missing is made in the round trip of the next create: two round trips.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Instant;

use tokio::sync::SemaphorePermit;
use tracing::{debug, debug_span, field, warn, Instrument, Span};
use zookeeper_client::Error::NoNode;
use zookeeper_client::{Client, CreateMode};

use super::creating::{children, Creating};
use super::decide::{sort_contenders, Place};
use super::{Blockers, Listed, Ticket, Turn, Wait};
use crate::acl::NodeAcl;
use crate::error::{outcome_unknown, Error, Result};
use crate::metrics::{self, NodeKind, Outcome};
use crate::path;
use crate::session::{retry, root_hash, Session};

/// A recipe root, the contender name used under it, who blocks such a contender, and
/// the ACL of the nodes it creates.
#[derive(Clone, Debug)]
pub(crate) struct Queue {
    root: Arc<str>,
    /// The root's hash ([`root_hash`]), computed once: the session's entry permits and
    /// known roots look the root up by it.
    root_hash: u64,
    name: &'static str,
    blockers: Blockers,
    acl: NodeAcl,
    /// The data of the nodes it creates: the contender's id.
    id: Arc<[u8]>,
    /// Whether a ticket whose session expired while it waited enters again on the new one.
    rejoin: bool,
}

impl Queue {
    /// Waits, within `wait`, until a ticket holds: the one in `seat` (one entered before,
    /// or one that held until its connection was suspended: first checked to be still
    /// there) or a new one entered with the queue's id. `seat` keeps the ticket while it
    /// waits, so that a caller that stops waiting can leave the queue itself; it is empty
    /// once this returns. A ticket whose node is lost while it waits (deleted by someone, or
    /// gone with its expired session) enters again, at the end of the queue, unless the
    /// session expired and the queue does not [`rejoin`](Self::rejoin). `None`, with the node
    /// deleted, if the deadline passed first (with [`Wait::Never`]: if it did not hold at
    /// once).
    ///
    /// Not an `async fn`: a waiting acquisition is stored by the task that awaits it, so it
    /// keeps nothing but what it needs.
    ///
    /// # Notable errors
    /// As [`enter`](Self::enter) and [`Ticket::wait_first`], and
    /// [`Error::SessionExpired`] if the session expired and the queue does not rejoin.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquisition deletes its node in the background, even if the
    /// reply to its create was lost.
    pub(crate) fn acquire<'a>(
        &'a self,
        session: &'a Session,
        seat: &'a mut Option<Ticket>,
        wait: Wait,
    ) -> impl Future<Output = Result<Option<Ticket>>> + Send + 'a {
        let span = debug_span!(
            "zk.queue.acquire",
            root = %self.root,
            kind = self.name,
            acl = ?self.acl,
            node = field::Empty
        );
        async move {
            // Records how the acquisition ended, also when it is dropped (cancelled).
            let mut record = metrics::Acquisition::start(self.kind());
            loop {
                let fresh = seat.is_none();
                if fresh {
                    // Boxed: a waiting acquisition need not keep room for entering (the
                    // `lock()` future: 648 bytes, 2,608 unboxed; `benches/README.md`).
                    let entered = Box::pin(self.enter(session, wait)).await;
                    let Some(entered) = record.check(entered)? else {
                        return Ok(None);
                    };
                    Span::current().record("node", entered.node());
                    *seat = Some(entered);
                }
                let Some(ticket) = seat.as_mut() else {
                    continue;
                };
                let turn = match (wait, fresh, ticket.is_first()) {
                    // First at its entry, as most are: held without a wait (a closed
                    // session is the wait's to report).
                    (_, true, true) if !session.is_closed() => Ok(Turn::First),
                    // Boxed: only a ticket entered before takes this way (`lock()`: 648
                    // bytes, 840 unboxed).
                    (_, false, true) => Box::pin(ticket.still_first()).await,
                    (Wait::Never, _, false) => Ok(Turn::Late),
                    _ => ticket.wait_first(wait).await,
                };
                let turn = record.check(turn)?;
                match (turn, seat.take()) {
                    (Turn::First, Some(ticket)) => {
                        debug!(node = %ticket.node(), token = ticket.token(), waited = ?record.waited(), "acquired");
                        record.ended(Outcome::Acquired);
                        return Ok(Some(ticket));
                    }
                    (Turn::Late, ticket) => {
                        debug!(root = %self.root, "not acquired in time");
                    record.ended(Outcome::NotAcquired);
                        if let Some(ticket) = ticket {
                            // Boxed: leaving takes no room in a waiting acquisition
                            // (`lock()`: 648 bytes, 952 unboxed).
                            Box::pin(ticket.give_up()).await;
                        }
                        return Ok(None);
                    }
                    (Turn::Expired, _) if !self.rejoin => return record.check(Err(Error::SessionExpired)),
                    (turn, _) => warn!(root = %self.root, ?turn, "out of the queue; entering again"),
                }
            }
        }
        .instrument(span)
    }

    /// What this queue's nodes are, for metrics.
    pub(crate) fn kind(&self) -> NodeKind {
        NodeKind::of(self.name)
    }

    /// Enters the queue with a node holding the queue's id, in the session's turn and on
    /// its live session, creating the root (and its missing parents, as container nodes)
    /// on first use; `None` if `wait`'s deadline passed first. The deadline bounds waiting
    /// (for an entry permit, a session, a connection), never the create and listing of one
    /// attempt while the connection is up: a deadline that has passed already still tries
    /// once.
    ///
    /// A session that expires meanwhile is waited out: the ticket enters on the new one.
    /// With [`Wait::Never`] nothing waits for a connection or a new session: it fails with
    /// [`Error::Disconnected`] or [`Error::Renewing`] at once instead (and with
    /// [`Error::ConnectionLoss`] or [`Error::SessionExpired`] if they break while it tries).
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the root's ACL (or a parent's) denies creating nodes; nothing
    ///   was created.
    /// * [`Error::InvalidAcl`] if the servers refuse the queue's ACL (a creator-only
    ///   ACL on a session without identity).
    /// * [`Error::EphemeralParent`] if the root lies under an ephemeral node.
    /// * [`Error::ZooKeeper`] (`NoNode`) if the root was deleted again and again as it
    ///   entered (see [`ROOT_REMAKES`]).
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: a node whose create was sent is deleted in the background, found by its
    /// uuid if the reply never came.
    pub(crate) async fn enter(&self, session: &Session, wait: Wait) -> Result<Option<Ticket>> {
        loop {
            let entering = async {
                let Some((permit, client)) = session.ready(self.root_hash, wait).await? else {
                    return Ok(None);
                };
                let connection = client.clone();
                // The deadline never cuts short a create the servers are answering.
                tokio::select! {
                    biased;
                    created = self.create(session, client, permit, wait) => created.map(Some),
                    () = wait.cut_off(&connection) => Ok(None),
                }
            };
            // Closing the session ends the entry at once, even one that waits for a
            // connection that is down.
            let entered = tokio::select! {
                biased;
                () = session.closed() => Err(Error::Closed),
                entered = entering => entered,
            };
            match entered {
                Err(Error::SessionExpired) if !wait.is_never() => {
                    debug!(root = %self.root, "session expired while entering; entering on the new one");
                }
                entered => return entered,
            }
        }
    }

    /// Creates the node and lists the root back to back, until the node is made, and
    /// places it by that listing (made after the create): the ticket owns the node from
    /// then on. The root is created first in the same round trip unless the session knows
    /// it exists; a root whose parent is missing too is made with its parents first.
    async fn create(
        &self,
        session: &Session,
        client: Arc<Client>,
        permit: SemaphorePermit<'_>,
        wait: Wait,
    ) -> Result<Ticket> {
        let mut permit = Some(permit);
        let data: &[u8] = &self.id;
        let mut creating = Creating::new(session, client.clone(), self.root.clone());
        let known = session.known_roots();
        let mut root = match known.knows(&self.root, self.root_hash) {
            true => Root::Known,
            false => Root::Unsure,
        };
        let options = CreateMode::EphemeralSequential.with_acls(self.acl.acls());
        let mut remakes = 0;
        loop {
            let mut node = creating.prefix(self.name);
            // Sent back to back: the root (if missing) comes first, the listing already
            // holds the new node.
            let sent = Instant::now();
            let make_root = root.to_make().then(|| self.make_root_alone(&client));
            let create = client.create(&node, data, &options);
            let list = client.list_children(&self.root);
            if let Some(made) = make_root {
                root = self.root_made(&client, root, made.await).await?;
            }
            let created = create.await;
            let listed = list.await;
            drop(permit.take());
            // The node made (or found again), its token, and a listing made after it.
            let made = match created {
                Ok((stat, seq)) => {
                    // The answer confirms the session: a hold made on it now is trusted.
                    session.confirm(&client, sent);
                    if !matches!(root, Root::Known) {
                        known.remember(&self.root, self.root_hash);
                    }
                    // No allocation: the prefix left room for the sequence number.
                    let _ = write!(node, "{seq}");
                    let children = match listed {
                        Ok(children) => children,
                        Err(_) => children(&client, &self.root).await?,
                    };
                    Some((node, stat.czxid, children))
                }
                Err(zookeeper_client::Error::NoNode) => {
                    known.forget(&self.root, self.root_hash);
                    root = match root {
                        Root::Known | Root::Unsure => Root::Missing,
                        // Made with its parents after this create was sent: again.
                        Root::MadeLater => Root::Made,
                        // Deleted between its create and ours (an operator, the servers'
                        // reaper of an empty container that was there): made again, a
                        // bounded number of times.
                        Root::Missing | Root::Made if remakes < ROOT_REMAKES => {
                            remakes += 1;
                            debug!(root = %self.root, remakes, "the root went as we entered");
                            Root::Missing
                        }
                        Root::Missing | Root::Made => return Err(Error::at(&self.root, NoNode)),
                    };
                    None
                }
                Err(err) if outcome_unknown(&err) && !wait.is_never() => creating.recover().await?,
                Err(err) => return Err(Error::at(&self.root, err)),
            };
            let Some((node, czxid, children)) = made else {
                continue;
            };
            let own = node.rsplit_once('/').map_or("", |(_, own)| own);
            // Not listed: gone already (deleted by someone); another one is made.
            let Some(place) = Place::of(&self.root, own, &children, self.blockers) else {
                debug!(%node, "our new node is gone already; creating another");
                continue;
            };
            creating.armed = false;
            debug!(%node, children = children.len(), "entered the queue");
            return Ok(Ticket {
                session: session.clone(),
                client: Arc::downgrade(&client),
                place,
                blockers: self.blockers,
                kind: self.kind(),
                armed: true,
                handoff: None,
                asked: None,
                node: node.into(),
                czxid,
            });
        }
    }

    /// Creates the root alone, as a container node with the queue's ACL; its parent must
    /// exist. The request is sent on the first poll.
    fn make_root_alone<'a>(
        &'a self,
        client: &'a Client,
    ) -> impl std::future::Future<Output = std::result::Result<(), zookeeper_client::Error>> + 'a
    {
        let options = CreateMode::Container.with_acls(self.acl.acls());
        debug!(root = %self.root, acl = ?self.acl, "creating the recipe root");
        let made = client.create(&self.root, &[], &options);
        async move {
            match made.await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
                Err(err) => Err(err),
            }
        }
    }

    /// What the root is after [`make_root_alone`](Self::make_root_alone) answered `made`:
    /// made (or there already), or made now with its missing parents. A create that was
    /// only a guess (`was` [`Root::Unsure`]) and failed otherwise says nothing: the node's
    /// create, sent after it, tells whether the root is there.
    async fn root_made(
        &self,
        client: &Client,
        was: Root,
        made: std::result::Result<(), zookeeper_client::Error>,
    ) -> Result<Root> {
        match made {
            Ok(()) => Ok(Root::Made),
            Err(zookeeper_client::Error::NoNode) => {
                self.make_root(client).await?;
                Ok(Root::MadeLater)
            }
            Err(err) if outcome_unknown(&err) || matches!(was, Root::Unsure) => {
                debug!(root = %self.root, %err, "could not create the root; it may be there");
                Ok(Root::Unsure)
            }
            Err(err) => Err(Error::at(&self.root, err)),
        }
    }

    /// Creates the root and its missing parents as container nodes, with the queue's ACL.
    async fn make_root(&self, client: &Client) -> Result<()> {
        let options = CreateMode::Container.with_acls(self.acl.acls());
        debug!(root = %self.root, acl = ?self.acl, "creating the recipe root");
        retry(client, || client.mkdir(&self.root, &options))
            .await
            .map_err(|err| match err {
                Error::ZooKeeper(zookeeper_client::Error::NoNode) => Error::InvalidPath {
                    path: self.root.to_string(),
                    reason: "the session's chroot does not exist",
                },
                err => err.at_root(&self.root),
            })
    }

    /// A queue of `name` contenders (`"lock-"`, `"latch-"`) under `root`, each kept from
    /// holding by `blockers`, whose nodes get `acl`.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `root` is malformed or too long.
    pub(crate) fn new(
        root: &str,
        name: &'static str,
        blockers: Blockers,
        acl: NodeAcl,
    ) -> Result<Queue> {
        let root = path::validate_root(root)?;
        Ok(Queue {
            root: Arc::from(root),
            root_hash: root_hash(root),
            name,
            blockers,
            acl,
            id: default_id(),
            rejoin: true,
        })
    }

    /// The same queue; a ticket whose session expired while it waited enters again on the
    /// new session if `rejoin`, else its acquisition fails with [`Error::SessionExpired`].
    pub(crate) fn rejoin(self, rejoin: bool) -> Queue {
        Queue { rejoin, ..self }
    }

    /// The same queue, holding with nodes whose data is `id`.
    pub(crate) fn with_id(self, id: Arc<[u8]>) -> Queue {
        Queue { id, ..self }
    }

    /// The same queue, creating its nodes with `acl`.
    pub(crate) fn with_acl(self, acl: NodeAcl) -> Queue {
        Queue { acl, ..self }
    }

    pub(crate) fn acl(&self) -> NodeAcl {
        self.acl
    }

    pub(crate) fn root(&self) -> &str {
        &self.root
    }

    /// The root's hash ([`root_hash`]): what the session's entry permits are picked by.
    pub(crate) fn root_hash(&self) -> u64 {
        self.root_hash
    }

    /// The contenders under the root, first first, with their tokens; for observers. A node
    /// the session may not read (its ACL) is listed without data, its token read from its
    /// stat (an exists request needs no permission).
    ///
    /// # Notable errors
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down
    ///   (or a new session is being made): it does not wait.
    /// * [`Error::ConnectionLoss`] if the connection broke while it read.
    /// * [`Error::NoAuth`] if the root cannot be read.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn listed(&self, session: &Session) -> Result<Vec<Listed>> {
        let client = session.connected()?;
        let mut names = children(&client, &self.root).await?;
        sort_contenders(&mut names);
        // Sent back to back; a contender that left meanwhile is skipped.
        let reads: Vec<_> = names
            .iter()
            .map(|name| client.get_data(&path::join(&self.root, name)))
            .collect();
        let mut contenders = Vec::with_capacity(names.len());
        for (name, read) in names.into_iter().zip(reads) {
            let node = path::join(&self.root, &name);
            let (data, stat) = match read.await {
                Ok((data, stat)) => (Some(data), stat),
                Err(zookeeper_client::Error::NoAuth) => match client.check_stat(&node).await {
                    Ok(Some(stat)) => (None, stat),
                    Ok(None) => continue,
                    Err(err) => return Err(Error::at(&node, err)),
                },
                Err(zookeeper_client::Error::NoNode) => continue,
                Err(err) => return Err(Error::at(&node, err)),
            };
            let token = u64::try_from(stat.czxid).unwrap_or_default();
            contenders.push(Listed { name, data, token });
        }
        Ok(contenders)
    }
}

/// How many times an entry makes again a root deleted between its create and the
/// node's, before it fails with `NoNode`.
const ROOT_REMAKES: u32 = 3;

/// What an entry knows of the root.
#[derive(Clone, Copy)]
enum Root {
    /// The session saw it exist lately: it is there, as a rule.
    Known,
    /// Nothing: the next create makes it first, in case it is missing; a failure to make it
    /// is no error (it may be there, and creating it not allowed).
    Unsure,
    /// A create found it missing: the next one makes it first.
    Missing,
    /// It was made (or found there) by this entry.
    Made,
    /// It was made with its missing parents, after the create sent with it.
    MadeLater,
}

impl Root {
    /// Whether the next create is to make the root first, in the same round trip.
    fn to_make(self) -> bool {
        matches!(self, Root::Unsure | Root::Missing)
    }
}

/// The default id: `<host name>/<process id>`.
fn default_id() -> Arc<[u8]> {
    static ID: OnceLock<Arc<[u8]>> = OnceLock::new();
    ID.get_or_init(|| {
        format!("{}/{}", host_name(), std::process::id())
            .into_bytes()
            .into()
    })
    .clone()
}

/// This host's name (`localhost` if it has none that can be read).
fn host_name() -> String {
    let mut name = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `name.len()` bytes into the buffer it is given.
    let read = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    match (read, std::str::from_utf8(&name[..end])) {
        (0, Ok(host)) if !host.is_empty() => host.to_owned(),
        _ => "localhost".to_owned(),
    }
}
