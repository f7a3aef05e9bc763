//! The ZooKeeper session: [`Session`], [`SessionBuilder`], [`SessionEvent`].

mod apart;
mod builder;
mod connection;
mod credentials;
mod deferrals;
mod dialer;
mod events;
mod hosts;
mod keeper;
mod liveness;
mod nodelay;
mod paths;
mod permits;
mod probe;
mod roots;
mod state;
#[cfg(feature = "tls")]
mod tls;
mod wait;

use std::future::Future;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify, SemaphorePermit};
use tokio::task::JoinHandle;
use tracing::{info_span, Instrument};
use zookeeper_client::Client;

use dialer::Dialer;
use keeper::{keep, Abandoned};
use nodelay::Servers;
use state::{Current, Inner};

pub(crate) use apart::Apart;
pub use builder::SessionBuilder;
pub(crate) use connection::{
    connected_now, connecting, connection_lost, disconnected, gone_after, reconnected, retry,
    terminal,
};
pub(crate) use deferrals::Due;
pub use events::{CloseReason, Closing, SessionEvent};
pub(crate) use roots::{root_hash, KnownRoots};
pub(crate) use wait::Wait;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::metrics;
pub(crate) use liveness::Liveness;

/// A ZooKeeper session that outlives expiry.
///
/// [`Session`] owns a `zookeeper-client` [`Client`] and watches its state. While the client
/// is disconnected the session is *suspended*: it may still be alive on the servers, and the
/// client reconnects by itself. When the servers declare the session expired, that client is
/// dead for good: `Session` then connects again with a fresh session, with bounded back-off,
/// and the recipes built on it follow (held locks are reported lost, candidates re-join).
/// A new session the servers refuse for good (credentials refused, see
/// [`CloseReason::Refused`]) ends the `Session` instead of being tried forever; servers
/// that cannot be reached, or that seem to refuse the TLS settings that made the first
/// session, are tried again until they answer.
///
/// Every change is published as a [`SessionEvent`] on a [`tokio::sync::watch`] channel, so
/// a receiver always sees the latest state; transitions faster than the receiver looks may
/// be folded into the last one.
///
/// Cloning a `Session` is cheap and shares the connection. The ZooKeeper session ends when
/// [`close`](Self::close) is called, or when the last clone and the last guard or candidate
/// of its recipes are gone.
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// use std::time::Duration;
/// use zk_recipes::{Session, SessionEvent};
///
/// let session = Session::builder()
///     .session_timeout(Duration::from_secs(10))
///     .connect("127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183")
///     .await?;
/// let mut events = session.events();
/// while events.changed().await.is_ok() {
///     if *events.borrow() == SessionEvent::Expired {
///         eprintln!("session expired; locks held on it are lost");
///     }
/// }
/// # Ok(()) }
/// ```
///
/// # Runtime
///
/// A session needs a tokio runtime (with time and I/O enabled) to connect, and its tasks
/// (the client's connection and the task that watches and renews the session) run on the
/// runtime it was connected on, for as long as the session lives. Keep that runtime
/// running while the session is used, from any runtime or thread. If it shuts down, the
/// session ends: [`SessionEvent::Closed`] is published, [`close_reason`](Self::close_reason)
/// is [`CloseReason::RuntimeGone`], and every recipe call fails with [`Error::Closed`].
/// A session shared by tests that each run their own runtime (`#[tokio::test]`) ends with
/// the first of them.
#[derive(Clone, Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

impl Session {
    /// Connects with default settings; see [`SessionBuilder::connect`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidConnectString`] if `hosts` cannot be parsed.
    /// * [`Error::Unreachable`] if no server answered within the connection timeout (10 s).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn connect(hosts: &str) -> Result<Session> {
        Session::builder().connect(hosts).await
    }

    /// A builder for a session with non-default settings.
    pub fn builder() -> SessionBuilder {
        SessionBuilder::default()
    }

    fn start(
        builder: SessionBuilder,
        dialer: Dialer,
        target: String,
        (client, dialed): (Client, Instant),
        servers: Servers,
    ) -> Session {
        let liveness = Liveness::of(&client, dialed);
        let client = Arc::new(client);
        let (current, _) = watch::channel(Current::Live(client.clone()));
        let (events, _) = watch::channel(SessionEvent::Connected);
        metrics::session_moved(None, SessionEvent::Connected.state());
        let inner = Arc::new(Inner {
            builder,
            apart: Apart::new(dialer.clone(), &target, servers.clone()),
            dialer,
            current,
            events,
            keeper: std::sync::Mutex::new(None),
            entries: permits::EntryPermits::new(),
            roots: KnownRoots::of(&target),
            close_reason: OnceLock::new(),
            liveness: std::sync::Mutex::new(liveness.clone()),
            runtime: tokio::runtime::Handle::current(),
            deferrals: Arc::default(),
            closes: Notify::new(),
        });
        let abandoned = Abandoned {
            session: Arc::downgrade(&inner),
            armed: true,
        };
        let keeper = tokio::spawn(keep(
            abandoned,
            target,
            (Arc::downgrade(&client), liveness),
            servers,
        ));
        if let Ok(mut slot) = inner.keeper.lock() {
            *slot = Some(keeper);
        }
        Session { inner }
    }

    /// The session's state changes; the receiver starts at the current state.
    pub fn events(&self) -> watch::Receiver<SessionEvent> {
        self.inner.events.subscribe()
    }

    /// The `zookeeper-client` client of the live session, for operations the recipes do not
    /// cover; `None` while a new session is being made or after [`close`](Self::close).
    ///
    /// A clone you keep keeps the ZooKeeper session open after [`close`](Self::close)
    /// (its nodes stay until the clone is dropped): drop it when done.
    pub fn client(&self) -> Option<Client> {
        match &*self.inner.current.borrow() {
            Current::Live(client) => Some(Client::clone(client)),
            Current::Renewing | Current::Closed => None,
        }
    }

    /// The session timeout that was asked for (the servers may have negotiated another; see
    /// [`Client::session_timeout`]).
    pub fn session_timeout(&self) -> Duration {
        self.inner.builder.session_timeout
    }

    /// The ACL of the nodes this session's recipes create unless a recipe overrides it
    /// ([`SessionBuilder::node_acl`]).
    pub fn node_acl(&self) -> NodeAcl {
        self.inner.builder.node_acl
    }

    /// Makes `path` and each missing parent: persistent, empty, with the session's
    /// [`node_acl`](Self::node_acl); nothing if `path` exists (whatever it holds). For the
    /// nodes a service keeps its own state in (`/sched/assign`); to create such a node with
    /// its parents only while a hold is intact, use
    /// [`Fenced::create_with_parents`](crate::Fenced::create_with_parents).
    ///
    /// Persistent, not container: a container goes once its last child does, and a path
    /// made here is meant to stay until someone removes it. Only missing nodes are created
    /// (a node that exists, made by whoever, counts as made), so several processes may make
    /// one path at once. A chroot in the connect string must exist. Never waits for the
    /// connection.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed (as a recipe path); nothing is sent.
    /// * [`Error::NoAuth`] naming the node the servers refused to create (its parent's ACL
    ///   denies it); parents made before stay.
    /// * [`Error::InvalidAcl`] if the session's ACL is creator-only and it has no identity.
    /// * [`Error::EphemeralParent`] naming the node whose parent is ephemeral.
    /// * [`Error::Disconnected`] (or [`Error::Renewing`], [`Error::Closed`]) at once if
    ///   there is no connection now; [`Error::ConnectionLoss`] if it broke three times
    ///   with a request in flight.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call may have made some of the nodes; calling again makes
    /// the rest.
    pub async fn ensure_path(&self, path: &str) -> Result<()> {
        let path = crate::path::validate_root(path)?;
        let client = self.connected()?;
        paths::make_path(&client, path, self.node_acl())
            .instrument(info_span!("zk.session.ensure_path", path))
            .await
    }

    /// Closes the session: publishes [`SessionEvent::Closed`] (with
    /// [`CloseReason::Requested`]), stops renewing, and ends the
    /// ZooKeeper session, so that its nodes go. Waiting acquisitions and joins fail with
    /// [`Error::Closed`], held locks and leaderships are lost with
    /// [`Loss::Closed`](crate::Loss::Closed), and recipes of this session fail with
    /// [`Error::Closed`] from then on.
    ///
    /// All that takes effect at the call. The ZooKeeper session ends as soon as requests
    /// in flight are answered (at once while connected; while the connection is down, when
    /// the servers expire it), unless a [`Client`] taken with [`client`](Self::client) is
    /// still kept. Await the returned [`Closing`] to wait for that: it resolves once the
    /// servers have closed the session (its ephemeral nodes, the nodes of holds and
    /// candidates dropped just before included, are gone), or at the latest after 1.5
    /// session timeouts, when servers that could not be told have expired it. Bound the
    /// wait yourself with [`tokio::time::timeout`]. A process that returns from `main`
    /// right after a `close()` it did not await may leave its nodes for a session timeout.
    /// The sessions of its [`Cache`](crate::Cache)s are closed at the call too; [`Closing`]
    /// does not wait for them.
    ///
    /// ```no_run
    /// # async fn demo(session: zk_recipes::Session) {
    /// use std::time::Duration;
    ///
    /// // Nothing of ours is left once this returns (or after 3 s at most).
    /// let _ = tokio::time::timeout(Duration::from_secs(3), session.close()).await;
    /// # }
    /// ```
    ///
    /// # Notable errors
    /// None: a session that ended already, for whatever reason, is closed at once.
    ///
    /// # Cancel safety
    /// Cancel safe: the close takes effect at the call, whether [`Closing`] is awaited,
    /// dropped or cancelled; awaiting only waits for the servers to confirm it.
    pub fn close(&self) -> Closing {
        let states = match &*self.inner.current.borrow() {
            Current::Live(client) => Some((client.state_watcher(), client.session_timeout())),
            Current::Renewing | Current::Closed => None,
        };
        let _ = self.inner.close_reason.set(CloseReason::Requested);
        if let Ok(mut keeper) = self.inner.keeper.lock() {
            if let Some(keeper) = keeper.take() {
                keeper.abort();
            }
        }
        self.inner.end(CloseReason::Requested);
        Closing { states }
    }

    /// Why the session ended for good ([`SessionEvent::Closed`]); `None` while it has not.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.inner.close_reason.get().cloned()
    }

    /// Resolves once the session is closed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn closed(&self) {
        // A `Notify` registered before the look, rather than a subscription to `current`:
        // every entry and removal waits on this, and it costs no allocation.
        let notified = self.inner.closes.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.is_closed() {
            notified.await;
        }
    }

    /// Whether the session was closed: what [`closed`](Self::closed) would resolve on now.
    pub(crate) fn is_closed(&self) -> bool {
        matches!(*self.inner.current.borrow(), Current::Closed)
    }

    /// Resolves once the session is closed, or once every handle to it is gone; unlike
    /// [`closed`](Self::closed), it keeps no handle meanwhile: a task that waits on it does
    /// not keep the session open.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) fn closing(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut current = self.inner.current.subscribe();
        async move {
            while !matches!(*current.borrow_and_update(), Current::Closed) {
                if current.changed().await.is_err() {
                    return;
                }
            }
        }
    }

    /// The error for a client of this session that is gone: [`Error::Closed`] after
    /// [`close`](Self::close), else [`Error::SessionExpired`] (it was replaced).
    pub(crate) fn ended(&self) -> Error {
        match &*self.inner.current.borrow() {
            Current::Closed => Error::Closed,
            Current::Live(_) | Current::Renewing => Error::SessionExpired,
        }
    }

    /// How long a suspended connection of `client` is tolerated before what it holds counts
    /// as lost; `None`: not at all (see [`SessionBuilder::tolerate_suspension`]).
    pub(crate) fn tolerated(&self, client: &Client) -> Option<Duration> {
        self.inner.builder.tolerated(client.session_timeout())
    }

    /// What the servers confirmed of the session of `client`; `None` if that session is not
    /// the live one any more (it ended).
    pub(crate) fn liveness(&self, client: &Client) -> Option<Arc<Liveness>> {
        let liveness = self.inner.liveness.lock().ok()?.clone();
        liveness.is_of(client).then_some(liveness)
    }

    /// Records that the servers answered a request of `client`'s session sent at `sent` (or
    /// later): a hold made after it is trusted from then on (see [`Liveness`]).
    pub(crate) fn confirm(&self, client: &Client, sent: Instant) {
        if let Some(liveness) = self.liveness(client) {
            liveness.confirm(sent);
        }
    }

    /// What makes ZooKeeper sessions of their own with this session's settings, for a
    /// recipe whose watches must not share this one (see [`apart`]).
    pub(crate) fn apart(&self) -> Apart {
        self.inner.apart.clone()
    }

    /// Runs `task` on the runtime the session was made on, from any thread.
    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.inner.runtime.spawn(task)
    }

    /// Does `entry`'s work after [`deferrals::DELAY`] (at most twice as long), on the session's
    /// runtime, unless `entry` is gone by then (see [`deferrals`]).
    pub(crate) fn defer(&self, entry: Weak<dyn Due>) {
        self.inner.deferrals.push(&self.inner.runtime, entry);
    }

    /// Makes the runtime the session was made on the current one until the guard is
    /// dropped: timers and tasks made meanwhile belong to it, whichever thread polls, in a
    /// runtime or not. `None` on a thread that is exiting (its thread-locals are gone),
    /// where no runtime can be entered.
    pub(crate) fn enter(&self) -> Option<tokio::runtime::EnterGuard<'_>> {
        match tokio::runtime::Handle::try_current() {
            Err(err) if err.is_thread_local_destroyed() => None,
            _ => Some(self.inner.runtime.enter()),
        }
    }

    /// A permit to enter the queue under the root of hash `root` ([`root_hash`]; waited for
    /// while a bounded number of entries on that root are under way, see [`permits`]) and
    /// the client of the live session once it is connected (waiting while a new session is
    /// being made and while the connection is down), within `wait`; `None` if its deadline
    /// passed first. With [`Wait::Never`] nothing waits for a connection: the client must be
    /// connected now, and the permit is waited for only while it stays so (creates sent on
    /// a cut connection keep their permits until it is back). The entry gives the permit
    /// back once its create and listing are answered.
    ///
    /// The entry's one step on the session: the permit, the live session and its
    /// connection are waited for here, in one body.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed.
    /// * [`Error::SessionExpired`] if the live session ended as it connected.
    /// * With [`Wait::Never`]: [`Error::Disconnected`] if the connection is down, or goes
    ///   down meanwhile; [`Error::Renewing`] while a new session is being made.
    ///
    /// # Cancel safety
    /// Cancel safe: permits are handed out in order, and a dropped wait takes none.
    pub(crate) async fn ready(
        &self,
        root: u64,
        wait: Wait,
    ) -> Result<Option<(SemaphorePermit<'_>, Arc<Client>)>> {
        let permits = self.inner.entries.stripe(root);
        if wait.is_never() {
            let client = self.connected()?;
            return tokio::select! {
                permit = permits.acquire() => Ok(Some((permit.map_err(|_| Error::Closed)?, client))),
                () = disconnected(&client) => Err(Error::Disconnected),
            };
        }
        let ready = async {
            let permit = permits.acquire().await.map_err(|_| Error::Closed)?;
            let mut current = self.inner.current.subscribe();
            let live = current.wait_for(Current::settled).await;
            let client = live.map_err(|_| Error::Closed)?.client()?;
            let mut states = client.state_watcher();
            let mut state = states.state();
            while connecting(state)? {
                state = states.changed().await;
            }
            Ok((permit, client))
        };
        tokio::select! {
            biased;
            ready = ready => ready.map(Some),
            () = wait.passed() => Ok(None),
        }
    }

    /// The recipe roots this session, or another of this process to the same servers,
    /// entered a queue under lately (see [`roots`]).
    pub(crate) fn known_roots(&self) -> &KnownRoots {
        &self.inner.roots
    }

    /// The client of the live session if it is connected now; never waits.
    ///
    /// # Notable errors
    /// * [`Error::Disconnected`] if the connection is down (the session may be alive).
    /// * [`Error::Renewing`] while a new session is being made.
    /// * [`Error::Closed`] after [`close`](Self::close).
    pub(crate) fn connected(&self) -> Result<Arc<Client>> {
        match &*self.inner.current.borrow() {
            Current::Live(client) => connected_now(client).map(|()| client.clone()),
            Current::Renewing => Err(Error::Renewing),
            Current::Closed => Err(Error::Closed),
        }
    }

    /// The client of the live session, waiting while a new session is being made.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] after [`close`](Self::close).
    ///
    /// # Cancel safety
    /// Cancel safe; wrap it in the caller's own bound.
    pub(crate) async fn live(&self) -> Result<Arc<Client>> {
        let mut current = self.inner.current.subscribe();
        let live = current.wait_for(Current::settled).await;
        match live {
            Ok(live) => live.client(),
            Err(_) => Err(Error::Closed),
        }
    }
}
