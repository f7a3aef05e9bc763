//! The ZooKeeper session: [`Session`], [`SessionBuilder`], [`SessionEvent`].

mod builder;
mod connection;
mod credentials;
mod dialer;
mod nodelay;
mod probe;
#[cfg(feature = "tls")]
mod tls;

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Semaphore, SemaphorePermit};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};
use zookeeper_client::{Client, SessionState};

use dialer::Dialer;
use nodelay::Sockets;

pub use builder::SessionBuilder;
pub(crate) use connection::{
    connected_now, connection_lost, disconnected, reconnected, retry, terminal,
};
pub use credentials::parse_credentials;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::trust::{keep_confirming, Liveness};

/// How many queue entries (a create and its listing) one session has in flight at once.
///
/// A burst of acquisitions would otherwise send all its creates and listings together:
/// every listing holds the whole queue, and the client's buffers and the entering states
/// all grow with the burst and stay grown. Sixteen keep the server's pipeline full.
const ENTRIES_IN_FLIGHT: usize = 16;

/// What happened to the session, as published by [`Session::events`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// A session is established (the first one, or a new one after expiry).
    Connected,
    /// The connection is lost; the session may still be alive and the client is reconnecting.
    Suspended,
    /// The connection is back and the same session survived.
    Reconnected,
    /// The servers expired the session; a new session is being made.
    Expired,
    /// The session was closed with [`Session::close`]; nothing more will happen.
    Closed,
}

/// A ZooKeeper session that outlives expiry.
///
/// [`Session`] owns a `zookeeper-client` [`Client`] and watches its state. While the client
/// is disconnected the session is *suspended*: it may still be alive on the servers, and the
/// client reconnects by itself. When the servers declare the session expired, that client is
/// dead for good: `Session` then connects again with a fresh session, with bounded back-off,
/// and the recipes built on it follow (held locks are reported lost, candidates re-join).
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
#[derive(Clone, Debug)]
pub struct Session {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    builder: SessionBuilder,
    /// Makes the new session after expiry, with the same credentials and TLS settings.
    dialer: Dialer,
    current: watch::Sender<Current>,
    events: watch::Sender<SessionEvent>,
    keeper: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Turns to enter a queue: at most [`ENTRIES_IN_FLIGHT`] at once.
    entries: Semaphore,
    /// What the servers confirmed of the live session (see [`Liveness`]).
    liveness: std::sync::Mutex<Arc<Liveness>>,
    /// The runtime the session was made on, whose tasks run its client: removals of nodes
    /// run there, even when their owner is dropped outside any runtime.
    runtime: tokio::runtime::Handle,
}

/// The client of the live session, if there is one. This is the only lasting strong
/// reference to a client inside the crate (recipes keep `Weak` ones), so replacing it
/// ends the ZooKeeper session once requests in flight are answered.
#[derive(Clone, Debug)]
enum Current {
    Live(Arc<Client>),
    Renewing,
    Closed,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(keeper) = self.keeper.get_mut().ok().and_then(Option::take) {
            keeper.abort();
        }
    }
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
        sockets: Sockets,
    ) -> Session {
        let liveness = Liveness::of(&client, dialed);
        let client = Arc::new(client);
        let (current, _) = watch::channel(Current::Live(client.clone()));
        let (events, _) = watch::channel(SessionEvent::Connected);
        let inner = Arc::new(Inner {
            builder,
            dialer,
            current,
            events,
            keeper: std::sync::Mutex::new(None),
            entries: Semaphore::new(ENTRIES_IN_FLIGHT),
            liveness: std::sync::Mutex::new(liveness.clone()),
            runtime: tokio::runtime::Handle::current(),
        });
        let keeper = tokio::spawn(keep(
            Arc::downgrade(&inner),
            target,
            (Arc::downgrade(&client), liveness),
            sockets,
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

    /// Closes the session: publishes [`SessionEvent::Closed`], stops renewing, and ends the
    /// ZooKeeper session, so that its nodes go. Waiting acquisitions and joins fail with
    /// [`Error::Closed`], held locks and leaderships are lost with
    /// [`Loss::Closed`](crate::Loss::Closed), and recipes of this session fail with
    /// [`Error::Closed`] from then on.
    ///
    /// The ZooKeeper session ends as soon as requests in flight are answered (at once while
    /// connected; while the connection is down, when the servers expire it), unless a
    /// [`Client`] taken with [`client`](Self::client) is still kept.
    ///
    /// # Cancel safety
    /// Not async; takes effect at once.
    pub fn close(&self) {
        if let Ok(mut keeper) = self.inner.keeper.lock() {
            if let Some(keeper) = keeper.take() {
                keeper.abort();
            }
        }
        self.inner.current.send_replace(Current::Closed);
        self.inner.events.send_replace(SessionEvent::Closed);
        self.inner.entries.close();
    }

    /// Resolves once the session is closed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn closed(&self) {
        let mut current = self.inner.current.subscribe();
        while !matches!(*current.borrow_and_update(), Current::Closed) {
            if current.changed().await.is_err() {
                return;
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

    /// Runs `task` on the runtime the session was made on, from any thread.
    pub(crate) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.inner.runtime.spawn(task));
    }

    /// A turn to enter a queue on this session, waited for while [`ENTRIES_IN_FLIGHT`]
    /// entries are under way; the entry gives it back once its create and listing are
    /// answered.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: turns are handed out in order, and a dropped wait takes none.
    pub(crate) async fn entry_turn(&self) -> Result<SemaphorePermit<'_>> {
        self.inner
            .entries
            .acquire()
            .await
            .map_err(|_| Error::Closed)
    }

    /// The client of the live session if it is connected now; never waits.
    ///
    /// # Notable errors
    /// * [`Error::ConnectionLoss`] if the connection is down (the session may be alive).
    /// * [`Error::SessionExpired`] while a new session is being made.
    /// * [`Error::Closed`] after [`close`](Self::close).
    pub(crate) fn connected(&self) -> Result<Arc<Client>> {
        match &*self.inner.current.borrow() {
            Current::Live(client) => connected_now(client).map(|()| client.clone()),
            Current::Renewing => Err(Error::SessionExpired),
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
        let state = current
            .wait_for(|state| match state {
                // A client that has just ended is replaced as soon as the keeper sees it.
                Current::Live(client) => !client.state().is_terminated(),
                Current::Renewing => false,
                Current::Closed => true,
            })
            .await
            .map_err(|_| Error::Closed)?;
        match &*state {
            Current::Live(client) => Ok(client.clone()),
            Current::Renewing | Current::Closed => Err(Error::Closed),
        }
    }
}

/// Publishes the client's state changes and renews the session after expiry, until the
/// session is closed or every `Session` clone is gone; sets `TCP_NODELAY` on every new
/// connection; confirms the session to the servers (see [`Liveness`]). Keeps only weak
/// references, so that replacing [`Current`] is what ends a session.
async fn keep(
    inner: Weak<Inner>,
    target: String,
    (mut client, mut liveness): (Weak<Client>, Arc<Liveness>),
    mut sockets: Sockets,
) {
    loop {
        let Some(states) = client
            .upgrade()
            .map(|client| (client.state_watcher(), client.session_id()))
        else {
            return;
        };
        let ended = tokio::select! {
            ended = follow(&inner, states, &mut sockets) => ended,
            () = keep_confirming(liveness, client.clone()) => return,
        };
        let Some(session) = inner.upgrade() else {
            return;
        };
        if ended == SessionState::Closed {
            session.current.send_replace(Current::Closed);
            session.events.send_replace(SessionEvent::Closed);
            return;
        }
        session.current.send_replace(Current::Renewing);
        session.events.send_replace(SessionEvent::Expired);
        let dialer = session.dialer.clone();
        drop(session);
        let (renewed, dialed) = renew(&dialer, &target).await;
        let renewed = Arc::new(renewed);
        sockets.set_nodelay_on_new();
        let Some(session) = inner.upgrade() else {
            return;
        };
        liveness = Liveness::of(&renewed, dialed);
        if let Ok(mut current) = session.liveness.lock() {
            *current = liveness.clone();
        }
        client = Arc::downgrade(&renewed);
        session.current.send_replace(Current::Live(renewed));
        session.events.send_replace(SessionEvent::Connected);
    }
}

/// Publishes Suspended / Reconnected until the client reaches a terminal state; returns it.
async fn follow(
    inner: &Weak<Inner>,
    (mut states, session_id): (zookeeper_client::StateWatcher, zookeeper_client::SessionId),
    sockets: &mut Sockets,
) -> SessionState {
    // The client may have left the connected state before this task first ran (a loaded
    // machine): start from the state it is in, not from its next change.
    let mut state = states.state();
    if matches!(
        state,
        SessionState::SyncConnected | SessionState::ConnectedReadOnly
    ) {
        state = states.changed().await;
    }
    loop {
        let event = match state {
            SessionState::Disconnected => SessionEvent::Suspended,
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                sockets.set_nodelay_on_new();
                SessionEvent::Reconnected
            }
            SessionState::Expired | SessionState::AuthFailed => {
                warn!(session = %session_id, ?state, "session ended");
                return SessionState::Expired;
            }
            SessionState::Closed => return SessionState::Closed,
        };
        debug!(session = %session_id, ?event, "session state");
        match inner.upgrade() {
            Some(session) => session.events.send_replace(event),
            None => return SessionState::Closed,
        };
        state = states.changed().await;
    }
}

/// Connects a fresh session with the credentials and TLS settings of the first one, backing
/// off between failed attempts (100 ms doubling to 5 s); with the instant its connect
/// began.
async fn renew(dialer: &Dialer, target: &str) -> (Client, Instant) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let dialed = Instant::now();
        match dialer.dial(target).await {
            Ok(client) => {
                info!(session = %client.session_id(), "new session after expiry");
                return (client, dialed);
            }
            Err(err) => {
                match err {
                    Error::Unreachable { .. } => {
                        debug!(%err, ?backoff, "renewing failed; retrying")
                    }
                    // Credentials or TLS refused: worth a warning, nothing else to tell.
                    _ => warn!(%err, ?backoff, "renewing the session was refused; retrying"),
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
