//! The task that keeps a [`Cache`](super::Cache): one persistent recursive watch, a walk
//! of the subtree each time events may have been missed, and the reads the watch's
//! notifications ask for.
//!
//! zookeeper-client 0.11.2 does not set a persistent watch again on a new connection (its
//! `resend_watches` sends the one-shot watches only), and the servers would not tell what
//! changed meanwhile anyway (ZOOKEEPER-4698): after every reconnection the keeper sets the
//! watch again, then walks.

use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};
use tracing::{debug, debug_span, warn, Instrument};
use zookeeper_client::{
    AddWatchMode, Client, EventType, PersistentWatcher, SessionState, WatchedEvent,
};

use super::walk;
use super::Shared;
use crate::error::{Error, Result};
use crate::session::Session;

/// How many notifications are read together at most.
const BATCH: usize = 1024;

/// The pause after a resync that failed for another reason than the connection; it doubles
/// up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Marks the cache closed when the keeper ends, however it ends (its session closed, the
/// last handle dropped, the runtime shut down, a panic).
struct Closer(Arc<Shared>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Loads the cache on `client` (tells `first` how that went), then keeps it until the
/// last handle is gone (`alive` closed) or the session closes.
pub(super) async fn keep(
    shared: Arc<Shared>,
    session: Session,
    client: Arc<Client>,
    first: oneshot::Sender<Result<()>>,
    alive: watch::Sender<()>,
) {
    let closer = Closer(shared.clone());
    let closing = session.closing();
    let watcher = match load(&shared, &client, None).await {
        Ok(watcher) => watcher,
        Err(err) => return drop(first.send(Err(err))),
    };
    if first.send(Ok(())).is_err() {
        return;
    }
    tokio::select! {
        () = follow(&shared, &session, client, watcher) => {}
        () = alive.closed() => debug!("cache dropped"),
        () = closing => debug!("session closed"),
    }
    drop(closer);
}

/// Sets the watch on `client` (then drops `previous`, the watch of an earlier connection),
/// walks the subtree and takes in what changed; the cache is synced once this returns.
///
/// # Notable errors
/// As [`walk::walk`], and as `addWatch`.
async fn load(
    shared: &Shared,
    client: &Client,
    previous: Option<PersistentWatcher>,
) -> Result<PersistentWatcher> {
    let root = &shared.root;
    let watcher = client
        .watch(root, AddWatchMode::PersistentRecursive)
        .await
        .map_err(|err| Error::at(root, err))?;
    drop(previous);
    let started = Instant::now();
    let seen = walk::walk(client, root, |found| shared.take(found))
        .instrument(debug_span!("zk.cache.resync"))
        .await?;
    shared.forget_unseen(&seen);
    shared.synced();
    debug!(nodes = seen.len(), took = ?started.elapsed(), "cache synced");
    Ok(watcher)
}

/// Follows the watch's notifications on `client`; whenever some may have been missed,
/// marks the cache stale and resyncs, on the live session, until the session is closed.
async fn follow(
    shared: &Shared,
    session: &Session,
    mut client: Arc<Client>,
    mut watcher: PersistentWatcher,
) {
    loop {
        let previous = match notifications(shared, &client, &mut watcher).await {
            // A watcher told that its session ended must not be asked again.
            Ok(state) if state.is_terminated() => {
                debug!(%state, "session ended: resync on the next");
                None
            }
            Ok(state) => {
                debug!(%state, "notifications may have been missed: resync");
                Some(watcher)
            }
            Err(err) => {
                debug!(%err, "a read was cut off: resync");
                Some(watcher)
            }
        };
        shared.stale();
        drop(client);
        let Some(resynced) = resync(shared, session, previous).await else {
            return;
        };
        (client, watcher) = resynced;
    }
}

/// Sets the watch again and walks, once connected (on a new session after expiry), until
/// that works; drops `previous` once a new watch is set. `None` once the session is closed.
async fn resync(
    shared: &Shared,
    session: &Session,
    mut previous: Option<PersistentWatcher>,
) -> Option<(Arc<Client>, PersistentWatcher)> {
    let mut pause = FIRST_PAUSE;
    loop {
        let client = match session.live_connected().await {
            Ok(client) => client,
            Err(Error::Closed) => return None,
            // That session ended as it connected: the next one.
            Err(_) => continue,
        };
        match load(shared, &client, previous.take()).await {
            Ok(watcher) => return Some((client, watcher)),
            Err(err) => pause = wait_after(&err, pause).await,
        }
    }
}

/// How long to wait after `err` before trying again: nothing for a broken connection (the
/// next try waits for it), else `pause`. Returns the next pause.
async fn wait_after(err: &Error, pause: Duration) -> Duration {
    match err {
        Error::ConnectionLoss
        | Error::Disconnected
        | Error::SessionExpired
        | Error::Renewing
        | Error::Closed => {
            debug!(%err, "resync cut off; again once connected");
            FIRST_PAUSE
        }
        other => {
            warn!(err = %other, ?pause, "cannot read the cached subtree; again after a pause");
            tokio::time::sleep(pause).await;
            (pause * 2).min(MAX_PAUSE)
        }
    }
}

/// Reads the nodes the watch's notifications name, in batches, until a notification says
/// that the connection was lost or the session ended: returns that state.
///
/// # Notable errors
/// As [`walk::read`]: a read cut off.
async fn notifications(
    shared: &Shared,
    client: &Client,
    watcher: &mut PersistentWatcher,
) -> Result<SessionState> {
    loop {
        let first = watcher.changed().await;
        let mut batch = Batch::default();
        let mut ended = batch.add(first);
        while ended.is_none() && batch.paths.len() < BATCH {
            match now(watcher.changed()) {
                Some(event) => ended = batch.add(event),
                None => break,
            }
        }
        if !batch.paths.is_empty() {
            let read = walk::read(client, batch.paths)
                .instrument(debug_span!("zk.cache.read"))
                .await;
            match (read, ended) {
                (Ok(found), _) => shared.take(found),
                (Err(_), Some(state)) => return Ok(state),
                (Err(err), None) => return Err(err),
            }
        }
        if let Some(state) = ended {
            return Ok(state);
        }
    }
}

/// The paths notifications named, each once, in the order first named.
#[derive(Default)]
struct Batch {
    paths: Vec<Arc<str>>,
    named: HashSet<Arc<str>>,
}

impl Batch {
    /// Adds the path `event` names; returns the session's state if it is a session event
    /// after which notifications may have been missed.
    fn add(&mut self, event: WatchedEvent) -> Option<SessionState> {
        match event.event_type {
            EventType::Session => match event.session_state {
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => None,
                lost => Some(lost),
            },
            _ => {
                debug!(path = event.path, kind = %event.event_type, "notified");
                let path: Arc<str> = Arc::from(event.path);
                if self.named.insert(path.clone()) {
                    self.paths.push(path);
                }
                None
            }
        }
    }
}

/// `future`'s output if it is ready at once.
fn now<F: Future>(future: F) -> Option<F::Output> {
    let future = pin!(future);
    match future.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}
