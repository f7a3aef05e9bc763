//! A live view of a path's children: one children watch on the server per view, set again
//! with each listing, and the watches the view sets on the nodes it reads (a data watch on
//! each node whose data it shows: see [`NodeWatches`]); the view decides what it reads of
//! the children, and publishes only what changed.
//!
//! A watch that fires (children changed, a watched node written, made again or deleted, the
//! path made or deleted, the session ended) makes the view list again, on the live session,
//! and read again what that watch was about; a listing that fails is tried again once the
//! connection is back, with back-off, never by polling a healthy connection. While the
//! connection is down the watches stay registered: the servers fire them after the
//! reconnect if what they watch changed meanwhile (a node deleted and made again under the
//! same name included: its data watch fires).
//!
//! The servers tell a session nothing about a node it may not read (its ACL): they drop the
//! notification, and the watch with it. So a view sets no watch on such a node; the listing
//! the children watch causes is when it looks at it again (see [`stat_of`]).

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tracing::{debug, Instrument, Span};
use zookeeper_client::{Client, OneshotWatcher, Stat};

use crate::error::{Error, Result};
use crate::path;
use crate::session::{reconnected, Session};

/// The pause after a listing that failed; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What a view makes of a path's children.
#[async_trait]
pub(crate) trait View: Send + 'static {
    /// What the view publishes.
    type Value: PartialEq + Send + Sync + 'static;

    /// The value for `children` of `root` (none if it does not exist), reading on `client`
    /// only what it needs.
    async fn read(
        &mut self,
        client: &Client,
        root: &str,
        children: Vec<String>,
    ) -> Result<Self::Value>;

    /// Resolves once a watch the view set on a node (beside the children watch) fired; the
    /// view then notes what to read again. Never, for a view that sets none.
    async fn changed(&mut self) {
        std::future::pending::<()>().await;
    }
}

/// The watches a view sets on the nodes it reads, each named by its node's name: each fires
/// once (the node written, deleted, or the session ended), and [`fired`](Self::fired) tells
/// which did. One task per watch waits for it; dropping the set ends them.
#[derive(Default)]
pub(crate) struct NodeWatches {
    waiting: JoinSet<String>,
}

impl NodeWatches {
    /// Waits for `watcher` of the node `name`.
    pub(crate) fn add(&mut self, name: String, watcher: OneshotWatcher) {
        self.waiting.spawn(async move {
            let event = watcher.changed().await;
            debug!(name, ?event.event_type, ?event.session_state, "node watch fired");
            name
        });
    }

    /// The names of the nodes whose watches fired: at least one (waits for it; never if
    /// none is set), and every other that fired too.
    pub(crate) async fn fired(&mut self) -> BTreeSet<String> {
        let mut fired = BTreeSet::new();
        match self.waiting.join_next().await {
            Some(Ok(name)) => {
                fired.insert(name);
            }
            Some(Err(_)) => {}
            None => std::future::pending::<()>().await,
        }
        while let Some(joined) = self.waiting.try_join_next() {
            fired.extend(joined.ok());
        }
        fired
    }
}

/// What a view read of a node: its data (`None` if the session may not read it: its ACL)
/// and its stat.
pub(crate) type Read = (Option<Vec<u8>>, Stat);

/// A data read sent, with its data watch when one was asked for.
type Sent<'a> = Pin<Box<dyn Future<Output = ReadReply> + Send + 'a>>;
type ReadReply =
    std::result::Result<(Vec<u8>, Stat, Option<OneshotWatcher>), zookeeper_client::Error>;

/// Reads the nodes `names` under `root`, the requests sent back to back; each `None` if the
/// node does not exist. With `watches`, a data watch is set on each node and added there;
/// on a node the session may not read (an exists request needs no permission), its stat
/// is read instead, and no watch is set: the servers would never fire it for this session.
///
/// # Notable errors
/// As `get_data`, but for [`Error::NoAuth`] on a node.
pub(crate) async fn read_nodes(
    client: &Client,
    root: &str,
    names: Vec<String>,
    mut watches: Option<&mut NodeWatches>,
) -> Result<Vec<(String, Option<Read>)>> {
    let watching = watches.is_some();
    let sent: Vec<Sent<'_>> = names
        .iter()
        .map(|name| send_read(client, &path::join(root, name), watching))
        .collect();
    let mut read = Vec::with_capacity(names.len());
    for (name, sent) in names.into_iter().zip(sent) {
        let node = path::join(root, &name);
        let answer = answered(client, &node, sent.await).await?;
        let answer = answer.map(|(data, stat, watcher)| {
            if let (Some(watches), Some(watcher)) = (watches.as_deref_mut(), watcher) {
                watches.add(name.clone(), watcher);
            }
            (data, stat)
        });
        read.push((name, answer));
    }
    Ok(read)
}

/// Sends a read of `node`'s data, with a data watch if `watching`.
fn send_read<'a>(client: &'a Client, node: &str, watching: bool) -> Sent<'a> {
    match watching {
        true => {
            let read = client.get_and_watch_data(node);
            Box::pin(async move { read.await.map(|(d, s, w)| (d, s, Some(w))) })
        }
        false => {
            let read = client.get_data(node);
            Box::pin(async move { read.await.map(|(d, s)| (d, s, None)) })
        }
    }
}

/// What a read of `node` answered, its stat read instead (no watch) if the session may not
/// read it; `None` if the node does not exist.
///
/// # Notable errors
/// As `get_data`, but for [`Error::NoAuth`].
async fn answered(
    client: &Client,
    node: &str,
    reply: ReadReply,
) -> Result<Option<(Option<Vec<u8>>, Stat, Option<OneshotWatcher>)>> {
    match reply {
        Ok((data, stat, watcher)) => Ok(Some((Some(data), stat, watcher))),
        Err(zookeeper_client::Error::NoNode) => Ok(None),
        Err(zookeeper_client::Error::NoAuth) => {
            debug!(node, "may not read the node: its stat only");
            let stat = stat_of(client, node).await?;
            Ok(stat.map(|stat| (None, stat, None)))
        }
        Err(err) => Err(Error::at(node, err)),
    }
}

/// The stat of `node` (an exists request needs no permission), with no watch: ZooKeeper
/// 3.8 servers consume a watch on a node the session may not read without notifying it,
/// so one would never fire. `None` if it does not exist.
///
/// # Notable errors
/// As `exists`.
async fn stat_of(client: &Client, node: &str) -> Result<Option<Stat>> {
    client
        .check_stat(node)
        .await
        .map_err(|err| Error::at(node, err))
}

/// Lists `root` on the session's connected client, and follows it in the background (under
/// `span`) while a receiver is left.
///
/// # Notable errors
/// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down.
/// * [`Error::NoAuth`] if `root` cannot be read.
pub(crate) async fn start<V: View>(
    session: &Session,
    root: Arc<str>,
    mut view: V,
    span: Span,
) -> Result<watch::Receiver<V::Value>> {
    let client = session.connected()?;
    // The first listing runs in the view's task, on the session's runtime, where the watch
    // tasks the view starts must run.
    let (first, looked) = oneshot::channel();
    let following = session.clone();
    session.spawn(
        async move {
            let looked = look(&client, &root, &mut view).await;
            drop(client);
            match looked {
                Ok((value, watcher)) => {
                    let (published, receiver) = watch::channel(value);
                    if first.send(Ok(receiver)).is_ok() {
                        follow(following, root, view, published, watcher).await;
                    }
                }
                Err(err) => drop(first.send(Err(err))),
            }
        }
        .instrument(span),
    );
    looked.await.unwrap_or(Err(Error::Closed))
}

/// Lists `root` with a children watch (an exists watch while it does not exist), and reads
/// what the view needs.
async fn look<V: View>(
    client: &Client,
    root: &str,
    view: &mut V,
) -> Result<(V::Value, OneshotWatcher)> {
    loop {
        let (children, watcher) = match client.list_and_watch_children(root).await {
            Ok(listed) => listed,
            Err(zookeeper_client::Error::NoNode) => match client.check_and_watch_stat(root).await {
                Ok((None, watcher)) => (Vec::new(), watcher),
                // Made meanwhile: list it.
                Ok((Some(_), _)) => continue,
                Err(err) => return Err(Error::at(root, err)),
            },
            Err(err) => return Err(Error::at(root, err)),
        };
        debug!(children = children.len(), "listed");
        return Ok((view.read(client, root, children).await?, watcher));
    }
}

/// Lists again each time the watch fires, until no receiver is left or the session closes.
async fn follow<V: View>(
    session: Session,
    root: Arc<str>,
    mut view: V,
    published: watch::Sender<V::Value>,
    mut watcher: OneshotWatcher,
) {
    loop {
        tokio::select! {
            biased;
            () = published.closed() => return,
            () = session.closed() => return,
            event = watcher.changed() => {
                debug!(?event.event_type, ?event.session_state, "children watch fired");
            }
            () = view.changed() => {}
        };
        let looked = tokio::select! {
            biased;
            () = published.closed() => return,
            () = session.closed() => return,
            looked = look_until_done(&session, &root, &mut view) => looked,
        };
        let Some((value, next)) = looked else { return };
        watcher = next;
        // Compared under the read lock: a value that did not change takes no write lock.
        let changed = *published.borrow() != value;
        if changed {
            published.send_replace(value);
        }
    }
}

/// Lists on the live session until a listing works; `None` once the session is closed.
async fn look_until_done<V: View>(
    session: &Session,
    root: &str,
    view: &mut V,
) -> Option<(V::Value, OneshotWatcher)> {
    let mut pause = FIRST_PAUSE;
    loop {
        let client = session.live().await.ok()?;
        match look(&client, root, view).await {
            Ok(looked) => return Some(looked),
            Err(Error::Closed) => return None,
            Err(Error::ConnectionLoss) => {
                debug!("listing cut off; again once connected");
                // Fails when the session ended: the live session is then another one.
                let _ = reconnected(&client).await;
            }
            Err(err) => {
                debug!(%err, ?pause, "cannot list; again after a pause");
                drop(client);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}
