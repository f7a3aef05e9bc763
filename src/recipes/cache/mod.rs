//! A cache of a node and its subtree that is never silently wrong: [`Cache`].
//!
//! The semantics, limits and an example are stated on [`Cache`], the public face of this
//! module; `keeper` is the task that follows the servers on a session of the cache's own,
//! `walk` reads them, `snapshot` holds the nodes and decides, by stat, what a read changed,
//! `syncs` counts the syncs callers asked for.

mod change;
mod keeper;
mod snapshot;
mod snapshots;
mod state;
mod syncs;
mod walk;

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use tokio::sync::{broadcast, oneshot, watch};
use tracing::{debug, info_span, Instrument};

pub use change::Change;
pub use snapshot::Snapshot;
pub use snapshots::Snapshots;
pub use state::CacheState;

use crate::error::{Error, Result};
use crate::node::CachedNode;
use crate::path;
use crate::session::Session;
use syncs::Syncs;
use walk::Found;

/// How many changes [`Cache::changes`] keeps for a receiver that has not read them yet.
pub const CHANGES_KEPT: usize = 4096;

/// A cache of a node and its subtree, kept by one persistent watch, that says when it may
/// be stale.
///
/// # Semantics
///
/// * **What it holds.** Every node of the subtree at its path (the node itself included),
///   each as a [`CachedNode`]: path, data, stat. A path that does not exist is an empty
///   cache, which fills as nodes are made.
/// * **How it follows.** One persistent recursive watch on the path (ZooKeeper 3.6 or
///   later), not a watch per node: each notification names a node, which the cache reads
///   (the reads of many notifications sent together), and a read changes the cache only
///   if the node's stat says it is newer than what the cache holds. So every change is
///   reported once, in the order the servers made it, per node.
/// * **On a ZooKeeper session of its own.** The cache watches and reads through a session
///   it makes with its [`Session`]'s settings (hosts and chroot, credentials, TLS,
///   timeouts), used by nothing else: ZooKeeper before 3.9 keeps one watch mode per
///   session and path (ZOOKEEPER-4466), so a `getData`, `exists` or children watch that a
///   shared session set on the cache's path (a
///   [`SharedCounter::watch`](crate::SharedCounter::watch) of a counter kept in the root
///   node, a watch of your own through [`Session::client`]) would turn the cache's
///   persistent watch into a one-shot one, and the cache would stop hearing about its
///   subtree while it said it was synced. Its session reads what the [`Session`]'s
///   identity may read. It ends when the cache stops: its last handle dropped, or its
///   `Session` closed; after it expires the cache makes a new one (and reads everything
///   again, below). The `Session` and its other recipes are not touched by it: the
///   cache's session expiring, or the `Session`'s being renewed, does not concern the
///   other.
/// * **Read your writes: [`sync`](Cache::sync).** Its own session means the cache hears
///   of a write made through the `Session` (or anyone's) like of anyone else's: one
///   notification and one read later, so a read of the cache just after a write may still
///   give the old state. [`Cache::sync`] returns once the cache holds every write
///   acknowledged before the call, from any session (a ZooKeeper `sync` on the cache's
///   session, then every notification sent before its answer read): call it between a
///   write and a read that must see it.
/// * **When it reads everything again.** Whenever notifications may have been missed: the
///   connection was lost (also when a server restarted or the client moved to another),
///   or the session expired and a new one was made. ZooKeeper does not tell a persistent
///   watch what changed while it was not connected (ZOOKEEPER-4698), and zookeeper-client
///   0.11 does not even set it again: the cache sets its watch again, then walks the
///   subtree (each node's data and its children, a thousand requests in flight, after a
///   `sync`), and reports what the walk found changed, deletions included. A walk cut off
///   by another failure is simply walked again once the connection is back.
/// * **When it may be stale, it says so.** Its [`CacheState`] is
///   [`Synced`](CacheState::Synced) only while its session is connected, its watch set, and
///   its last walk done; from the moment its client sees the connection go down until the
///   walk after it is done, it is [`Stale`](CacheState::Stale), with the last moment it
///   was known to match the servers. Reads answer all along, from what it holds.
/// * **Reads never wait on the network.** [`get`](Cache::get),
///   [`children`](Cache::children) and [`snapshot`](Cache::snapshot) answer from memory.
/// * **Decisions that commit only if what they read is unchanged.** Each [`CachedNode`]
///   keeps the data version it was read at: under a hold,
///   [`Fenced::unchanged`](crate::Fenced::unchanged) adds a check of that version to a
///   fenced transaction, which then commits only while the hold is intact *and* the nodes
///   read are unchanged; without a hold, add `add_check_version(node.path(),
///   node.version())` to a multi of your own.
///
/// # Limits
///
/// * **It trails the servers.** ZooKeeper reads are sequentially consistent, not
///   linearizable: while connected, the cache holds what one server had applied when it
///   last read, behind the quorum by at most what that server has yet to apply, and it
///   learns of a change one notification and one read later, also of a change the caller
///   just made (see [`sync`](Cache::sync)). Commit decisions through a version check
///   (above), never on the cache alone.
/// * **A silent connection is stale before it is known to be.** The client learns that a
///   connection is gone when its pings go unanswered (two thirds of the session timeout at
///   most); until then the cache says it is synced, though it hears nothing. Its watch
///   stays meaningful only as long as the servers answer.
/// * **States between two reads are not reported.** Two writes between two reads are one
///   [`Change::Updated`]; a node made and deleted between two reads (or while the cache was
///   cut off) is nothing. Every state the cache held is reported, in order, once.
/// * **One more ZooKeeper session per cache.** Each cache holds a session (and a
///   connection) of its own on the servers, for as long as it runs, besides its
///   `Session`'s: count them against the servers' `maxClientCnxns` and session load
///   (the `zk_recipes_sessions` metric counts `Session`s only).
///   Starting a cache costs a session's connect (within the `Session`'s connection
///   timeout) before its first walk. Apache Curator's `CuratorCache` shares its client's
///   session instead, and on ZooKeeper 3.8 goes deaf the same way when another watch of
///   that session lands on its path.
/// * **Nodes the session may not read.** Their stat is cached without data
///   ([`CachedNode::data`] is `None`), and their children are not cached. ZooKeeper 3.8.4
///   and later send no notification about a node the session may not read: such a node is
///   seen again at the next walk only.
/// * **Memory.** Each node costs its path and data, its stat, and a few dozen bytes of
///   bookkeeping (see `benches/README.md`). A [`Snapshot`] kept while the cache changes
///   costs one copy of the map (not of the nodes).
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::{Cache, Mutex};
///
/// let cache = Cache::start(&session, "/config/orders").await?;
/// let Some(limit) = cache.get("/config/orders/limit") else {
///     return Ok(()); // not configured (yet): nothing to decide
/// };
/// println!("limit: {:?}", limit.data());
///
/// // A decision made from the cache, committed only if the limit is still the one read.
/// let guard = Mutex::new(&session, "/locks/orders")?.lock().await?;
/// guard
///     .fenced()
///     .unchanged(&limit)
///     .set_data("/state/orders/admitted", b"17", None)
///     .commit()
///     .await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// Cloning a `Cache` is cheap and shares it. It follows the servers until the last clone
/// is dropped or its `Session` is closed; then its own ZooKeeper session is closed too
/// (once the requests in flight on it are answered). It keeps its `Session` open
/// meanwhile.
#[derive(Clone)]
pub struct Cache {
    shared: Arc<Shared>,
    /// Dropped with the last clone: the keeper then stops.
    _alive: watch::Receiver<()>,
}

/// What the cache and its keeper share.
struct Shared {
    root: Arc<str>,
    nodes: RwLock<Snapshot>,
    state: watch::Sender<CacheState>,
    /// Counts the changes of the nodes held, for [`Snapshots`].
    generation: watch::Sender<u64>,
    changes: broadcast::Sender<Change>,
    syncs: Syncs,
}

impl Cache {
    /// Starts a cache of `path` and its subtree: makes the cache's own ZooKeeper session
    /// with `session`'s settings, sets the watch and reads the whole subtree (an empty
    /// cache if `path` does not exist), and returns once that is done: the cache is then
    /// [`Synced`](CacheState::Synced). It then follows the servers in the background, on
    /// the session's runtime. Never waits for `session`'s connection; its own connect
    /// lasts at most `session`'s connection timeout.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed (as a recipe path); nothing is sent.
    /// * [`Error::Disconnected`] (or [`Error::Renewing`], [`Error::Closed`]) at once if
    ///   `session` has no connection now.
    /// * [`Error::Unreachable`] if the cache's session was not made within the connection
    ///   timeout; [`Error::AuthFailed`] or [`Error::Tls`] if the servers refused it.
    /// * [`Error::ConnectionLoss`] if the connection broke during the first read: start
    ///   again once it is back.
    /// * [`Error::NoAuth`] if the session's identity may not list `path`'s children.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped start leaves no session, no watch and no task behind.
    pub async fn start(session: &Session, path: &str) -> Result<Cache> {
        let root: Arc<str> = Arc::from(path::validate_root(path)?);
        session.connected()?;
        let shared = Arc::new(Shared {
            nodes: RwLock::new(Snapshot::default()),
            state: watch::channel(CacheState::Stale {
                since: Instant::now(),
            })
            .0,
            generation: watch::channel(0).0,
            changes: broadcast::channel(CHANGES_KEPT).0,
            syncs: Syncs::default(),
            root: root.clone(),
        });
        let (alive, _alive) = watch::channel(());
        let (first, loaded) = oneshot::channel();
        let keeper = keeper::keep(shared.clone(), session.clone(), first, alive);
        session.spawn(keeper.instrument(info_span!("zk.cache", path = %root)));
        loaded.await.unwrap_or(Err(Error::Closed))?;
        Ok(Cache { shared, _alive })
    }

    /// The path of the cached subtree.
    pub fn path(&self) -> &str {
        &self.shared.root
    }

    /// The node at `path`, as the cache holds it; never waits on the network.
    pub fn get(&self, path: &str) -> Option<CachedNode> {
        self.shared.read(|nodes| nodes.get(path).cloned())
    }

    /// The children of `path` the cache holds, in the order of their names; never waits on
    /// the network.
    pub fn children(&self, path: &str) -> Vec<CachedNode> {
        self.shared
            .read(|nodes| nodes.children(path).cloned().collect())
    }

    /// Every node the cache holds now, as an immutable [`Snapshot`]; never waits on the
    /// network, and costs one reference count.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.read(Snapshot::clone)
    }

    /// A receiver of snapshots, as a [`watch::Receiver`] of them: it tells when the nodes
    /// held changed, and lends the latest.
    pub fn snapshots(&self) -> Snapshots {
        Snapshots::new(self.clone(), self.shared.generation.subscribe())
    }

    /// The changes of the nodes from now on, each once and in order per node (see
    /// [`Change`]). A receiver that falls more than [`CHANGES_KEPT`] changes behind gets
    /// [`RecvError::Lagged`](broadcast::error::RecvError::Lagged): it missed changes, and
    /// should take a [`snapshot`](Self::snapshot) and go on from there.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.shared.changes.subscribe()
    }

    /// Whether the cache matches the servers now, and if not, since when it may not.
    pub fn state(&self) -> CacheState {
        *self.shared.state.borrow()
    }

    /// The cache's states from now on; the receiver starts at the current one.
    pub fn states(&self) -> watch::Receiver<CacheState> {
        self.shared.state.subscribe()
    }

    /// Waits until the cache is [`Synced`](CacheState::Synced) (at once if it is): after
    /// the connection is back, it has read the servers again.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] once the cache stopped for good (its session was closed).
    ///
    /// # Cancel safety
    /// Cancel safe; bound it with [`tokio::time::timeout`].
    pub async fn synced(&self) -> Result<()> {
        let mut states = self.states();
        let state = states
            .wait_for(|state| !matches!(state, CacheState::Stale { .. }))
            .await
            .map_err(|_| Error::Closed)?;
        match *state {
            CacheState::Synced => Ok(()),
            _ => Err(Error::Closed),
        }
    }

    /// Waits until the cache holds every write the servers acknowledged before the call
    /// (through any session: the caller's own writes included), and what they changed was
    /// reported: read your writes. It asks the servers for a `sync` on the cache's
    /// session, then reads every notification sent before its answer; syncs asked for
    /// together share one. While the cache is stale, it waits for the next walk. The
    /// cache may hold later writes too.
    ///
    /// ```no_run
    /// # async fn demo(session: zk_recipes::Session, cache: zk_recipes::Cache) -> Result<(), zk_recipes::Error> {
    /// use std::time::Duration;
    ///
    /// let Some(client) = session.client() else { return Ok(()) };
    /// client.set_data("/config/orders/limit", b"20", None).await?;
    /// match tokio::time::timeout(Duration::from_secs(5), cache.sync()).await {
    ///     // 20, or what was written after it.
    ///     Ok(Ok(())) => println!("{:?}", cache.get("/config/orders/limit")),
    ///     Ok(Err(err)) => return Err(err),
    ///     Err(_) => println!("the cache is cut off from the servers"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Notable errors
    /// * [`Error::Closed`] once the cache stopped for good (its session was closed).
    ///
    /// # Cancel safety
    /// Cancel safe; bound it with [`tokio::time::timeout`] (it waits as long as the cache
    /// is cut off from the servers).
    pub async fn sync(&self) -> Result<()> {
        let ticket = self.shared.syncs.take();
        let mut states = self.states();
        tokio::select! {
            biased;
            reached = self.shared.syncs.reached(ticket) => reached,
            _ = states.wait_for(|state| matches!(state, CacheState::Closed { .. })) => {
                Err(Error::Closed)
            }
        }
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("path", &self.path())
            .field("state", &self.state())
            .field("nodes", &self.shared.read(Snapshot::len))
            .finish()
    }
}

impl Shared {
    /// `read` of the nodes held.
    fn read<T>(&self, read: impl FnOnce(&Snapshot) -> T) -> T {
        match self.nodes.read() {
            Ok(nodes) => read(&nodes),
            Err(poisoned) => read(&poisoned.into_inner()),
        }
    }

    /// Changes the nodes held with `change`, then publishes what changed.
    fn write(&self, change: impl FnOnce(&mut Snapshot, &mut Vec<Change>) -> bool) {
        let mut changes = Vec::new();
        let changed = match self.nodes.write() {
            Ok(mut nodes) => change(&mut nodes, &mut changes),
            Err(poisoned) => change(&mut poisoned.into_inner(), &mut changes),
        };
        if changed {
            self.generation.send_modify(|generation| *generation += 1);
        }
        for change in changes {
            debug!(path = change.path(), ?change, "changed");
            let _ = self.changes.send(change);
        }
    }

    /// Takes in what reads found.
    fn take(&self, found: Found) {
        self.write(|nodes, changes| {
            found.into_iter().fold(false, |changed, (path, read)| {
                nodes.apply(path, read, changes) | changed
            })
        });
    }

    /// Deletes every node a walk did not find.
    fn forget_unseen(&self, seen: &HashSet<Arc<str>>) {
        self.write(|nodes, changes| {
            nodes.retain(seen, changes);
            !changes.is_empty()
        });
    }

    /// The cache matches the servers.
    fn synced(&self) {
        self.state.send_if_modified(|state| match state {
            CacheState::Stale { .. } => {
                *state = CacheState::Synced;
                true
            }
            CacheState::Synced | CacheState::Closed { .. } => false,
        });
    }

    /// The cache may be stale from now on (unless it was already).
    fn stale(&self) {
        self.state.send_if_modified(|state| match state {
            CacheState::Synced => {
                debug!("cache may be stale");
                *state = CacheState::Stale {
                    since: Instant::now(),
                };
                true
            }
            CacheState::Stale { .. } | CacheState::Closed { .. } => false,
        });
    }

    /// The cache stopped following the servers.
    fn close(&self) {
        self.state.send_if_modified(|state| {
            let since = match *state {
                CacheState::Synced => Instant::now(),
                CacheState::Stale { since } => since,
                CacheState::Closed { .. } => return false,
            };
            *state = CacheState::Closed { since };
            true
        });
    }
}
