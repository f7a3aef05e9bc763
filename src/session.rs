//! The ZooKeeper session: [`Session`], [`SessionBuilder`], [`SessionEvent`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore, SemaphorePermit};
use tokio::task::JoinHandle;
use tracing::{debug, info, info_span, warn, Instrument};
use zookeeper_client::{Client, SessionState};

use crate::error::{Error, Result};
use crate::path;

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

/// Configures and connects a [`Session`]; made by [`Session::builder`].
#[derive(Clone, Debug)]
pub struct SessionBuilder {
    session_timeout: Duration,
    connection_timeout: Duration,
    chroot: Option<String>,
    tolerate_suspension: bool,
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            session_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(10),
            chroot: None,
            tolerate_suspension: false,
        }
    }
}

impl SessionBuilder {
    /// The session timeout to ask the servers for (they clamp it to their own bounds).
    /// Default: 10 s.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`connect`](Self::connect) may try before it gives up with
    /// [`Error::Unreachable`]. Default: 10 s.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Runs every path of this session under `chroot` (which must exist on the servers).
    pub fn chroot(mut self, chroot: impl Into<String>) -> Self {
        self.chroot = Some(chroot.into());
        self
    }

    /// Whether a suspended connection (disconnected, session maybe alive) leaves held locks
    /// and leaderships trusted for a while.
    ///
    /// Default `false`: suspension counts as loss at once, the only choice that is safe when
    /// the network, not a server, failed. With `true`, loss is declared only if the
    /// connection is not back within a third of the negotiated session timeout: the client
    /// notices a silent connection after about two fifths of it, and the servers may expire
    /// the session once the whole timeout has passed since they last heard from it.
    pub fn tolerate_suspension(mut self, tolerate: bool) -> Self {
        self.tolerate_suspension = tolerate;
        self
    }

    /// Connects to `hosts` (`"host:port,host:port"`).
    ///
    /// # Notable errors
    /// * [`Error::InvalidConnectString`] if `hosts` cannot be parsed.
    /// * [`Error::InvalidPath`] if the chroot is malformed.
    /// * [`Error::Unreachable`] if no session was established within the connection timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future abandons the attempt and leaves no session behind.
    pub async fn connect(self, hosts: &str) -> Result<Session> {
        let target = self.target(hosts)?;
        let span = info_span!("zk.connect", hosts = %target);
        async move {
            let client = self.connect_once(&target).await?;
            info!(session = %client.session_id(), timeout = ?client.session_timeout(), "session established");
            Ok(Session::start(self, target, client))
        }
        .instrument(span)
        .await
    }

    /// The connect string with the chroot appended.
    fn target(&self, hosts: &str) -> Result<String> {
        if hosts.trim().is_empty() {
            return Err(invalid_hosts(hosts, "empty connect string"));
        }
        if hosts.contains('/') && self.chroot.is_some() {
            return Err(invalid_hosts(hosts, "chroot given twice"));
        }
        match &self.chroot {
            Some(chroot) => Ok(format!("{hosts}{}", path::validate_root(chroot)?)),
            None => Ok(hosts.to_owned()),
        }
    }

    async fn connect_once(&self, target: &str) -> Result<Client> {
        let connecting = Client::connector()
            .with_session_timeout(self.session_timeout)
            .connect(target);
        match tokio::time::timeout(self.connection_timeout, connecting).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(zookeeper_client::Error::BadArguments(reason))) => {
                Err(invalid_hosts(target, reason))
            }
            Ok(Err(err)) => Err(unreachable(target, err.to_string())),
            Err(_) => Err(unreachable(
                target,
                format!("no session within {:?}", self.connection_timeout),
            )),
        }
    }
}

fn invalid_hosts(hosts: &str, reason: &str) -> Error {
    Error::InvalidConnectString {
        hosts: hosts.to_owned(),
        reason: reason.to_owned(),
    }
}

fn unreachable(hosts: &str, reason: String) -> Error {
    Error::Unreachable {
        hosts: hosts.to_owned(),
        reason,
    }
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
/// A session sends at most sixteen queue entries (a create and its listing) at a time;
/// further acquisitions and joins wait for a turn, so that a burst of thousands does not
/// hold thousands of listings at once.
///
/// Cloning a `Session` is cheap and shares the connection. When the last clone is dropped
/// (and no guard or candidate of its recipes is left) the ZooKeeper session is closed.
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
    current: watch::Sender<Current>,
    events: watch::Sender<SessionEvent>,
    keeper: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Turns to enter a queue: at most [`ENTRIES_IN_FLIGHT`] at once.
    entries: Semaphore,
}

/// The client of the live session, if there is one.
#[derive(Clone, Debug)]
pub(crate) enum Current {
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

    fn start(builder: SessionBuilder, target: String, client: Client) -> Session {
        // Shared, not cloned: a `Client` clone is 112 bytes and a heap allocation, and every
        // waiting contender keeps one.
        let client = Arc::new(client);
        let (current, _) = watch::channel(Current::Live(client.clone()));
        let (events, _) = watch::channel(SessionEvent::Connected);
        let inner = Arc::new(Inner {
            builder,
            current,
            events,
            keeper: std::sync::Mutex::new(None),
            entries: Semaphore::new(ENTRIES_IN_FLIGHT),
        });
        let keeper = tokio::spawn(keep(Arc::downgrade(&inner), target, client));
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

    pub(crate) fn tolerates_suspension(&self) -> bool {
        self.inner.builder.tolerate_suspension
    }

    /// Closes the session: publishes [`SessionEvent::Closed`], stops renewing, and lets the
    /// ZooKeeper session end once the guards and candidates still holding it are gone.
    /// Recipes of this session fail with [`Error::Closed`] from then on.
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

    /// The client of the live session, without waiting for one.
    pub(crate) fn live_now(&self) -> Result<Arc<Client>> {
        match &*self.inner.current.borrow() {
            Current::Live(client) if !client.state().is_terminated() => Ok(client.clone()),
            Current::Live(_) | Current::Renewing => Err(Error::SessionExpired),
            Current::Closed => Err(Error::Closed),
        }
    }

    /// The client of the live session, waiting while a new session is being made.
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
/// session is closed or every `Session` clone is gone.
async fn keep(inner: std::sync::Weak<Inner>, target: String, mut client: Arc<Client>) {
    loop {
        let ended = follow(&inner, &client).await;
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
        let builder = session.builder.clone();
        drop(session);
        client = Arc::new(renew(&builder, &target).await);
        let Some(session) = inner.upgrade() else {
            return;
        };
        session.current.send_replace(Current::Live(client.clone()));
        session.events.send_replace(SessionEvent::Connected);
    }
}

/// Publishes Suspended / Reconnected until the client reaches a terminal state; returns it.
async fn follow(inner: &std::sync::Weak<Inner>, client: &Client) -> SessionState {
    let mut states = client.state_watcher();
    let session_id = client.session_id();
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

/// Connects a fresh session, backing off between failed attempts (100 ms doubling to 5 s).
async fn renew(builder: &SessionBuilder, target: &str) -> Client {
    let mut backoff = Duration::from_millis(100);
    loop {
        match builder.connect_once(target).await {
            Ok(client) => {
                info!(session = %client.session_id(), "new session after expiry");
                return client;
            }
            Err(err) => {
                debug!(%err, ?backoff, "renewing the session failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
