//! The task that keeps a [`Cache`](super::Cache) on a ZooKeeper session of its own: one
//! persistent recursive watch, a walk of the subtree each time events may have been missed,
//! the reads the watch's notifications ask for, and the syncs callers ask for
//! ([`Cache::sync`](super::Cache::sync)).
//!
//! The session is the cache's alone (made apart from the caller's session, with its
//! settings): ZooKeeper before 3.9 keeps one watch mode per session and path
//! (ZOOKEEPER-4466), so a one-shot watch that another user of a shared session set on the
//! cache's root would turn the cache's persistent watch one-shot. The keeper owns the only
//! client of that session: when the keeper ends (the cache dropped, the caller's session
//! closed), the client is dropped and the ZooKeeper session closed with it. After that
//! session expired, the keeper makes a new one.
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
use crate::session::{reconnected, Apart, Session};

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

/// Makes the cache's own session with `session`'s settings and loads the cache on it (tells
/// `first` how that went), then keeps it until the last handle is gone (`alive` closed),
/// `session` is closed, or the servers refuse the cache a new session for good. Keeps
/// `session` open meanwhile.
pub(super) async fn keep(
    shared: Arc<Shared>,
    session: Session,
    first: oneshot::Sender<Result<()>>,
    alive: watch::Sender<()>,
) {
    let closer = Closer(shared.clone());
    tokio::select! {
        () = run(&shared, session.apart(), first) => {}
        () = alive.closed() => debug!("cache dropped"),
        () = session.closing() => debug!("session closed"),
    }
    drop(closer);
}

/// Dials the cache's session and loads the cache on it (tells `first` how that went), then
/// follows the servers.
async fn run(shared: &Shared, apart: Apart, first: oneshot::Sender<Result<()>>) {
    let loaded = async {
        let client = apart.dial().await?;
        let watcher = load(shared, &client, None).await?;
        Ok::<_, Error>((client, watcher))
    };
    let (client, watcher) = match loaded.await {
        Ok(loaded) => loaded,
        Err(err) => return drop(first.send(Err(err))),
    };
    if first.send(Ok(())).is_err() {
        return;
    }
    follow(shared, &apart, client, watcher).await;
}

/// Sets the watch on `client` (then drops `previous`, the watch of an earlier connection),
/// syncs the cache's server with the quorum, walks the subtree and takes in what changed;
/// the cache is synced once this returns, and the syncs asked for before the walk are done.
///
/// # Notable errors
/// As [`walk::walk`], and as `addWatch` and `sync`.
async fn load(
    shared: &Shared,
    client: &Client,
    previous: Option<PersistentWatcher>,
) -> Result<PersistentWatcher> {
    let root = &shared.root;
    let asked = shared.syncs.last();
    let watcher = client
        .watch(root, AddWatchMode::PersistentRecursive)
        .await
        .map_err(|err| Error::at(root, err))?;
    drop(previous);
    // The walk reads the cache's server, which may not have applied yet what the quorum
    // acknowledged to others (a follower lags): after the `sync` it has, so the walk holds
    // every write acknowledged before the syncs it answers were asked for.
    walk::sync(client, root).await?;
    let started = Instant::now();
    let seen = walk::walk(client, root, |found| shared.take(found))
        .instrument(debug_span!("zk.cache.resync"))
        .await?;
    shared.forget_unseen(&seen);
    shared.synced();
    shared.syncs.done(asked);
    debug!(session = %client.session_id(), nodes = seen.len(), took = ?started.elapsed(), "cache synced");
    Ok(watcher)
}

/// Follows the watch's notifications on `client`; whenever some may have been missed,
/// marks the cache stale and resyncs, on a new session of its own after expiry.
async fn follow(
    shared: &Shared,
    apart: &Apart,
    mut client: Client,
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
        let Some(resynced) = resync(shared, apart, client, previous).await else {
            return;
        };
        (client, watcher) = resynced;
    }
}

/// Sets the watch again and walks once `client` is connected again (on a new session, made
/// apart, if its session ended), until that works; drops `previous` once a new watch is
/// set. `None` if the servers refuse a new session for good.
async fn resync(
    shared: &Shared,
    apart: &Apart,
    mut client: Client,
    mut previous: Option<PersistentWatcher>,
) -> Option<(Client, PersistentWatcher)> {
    let mut pause = FIRST_PAUSE;
    loop {
        if let Err(err) = reconnected(&client).await {
            debug!(%err, session = %client.session_id(), "the cache's session ended: a new one");
            drop(previous.take());
            client = match apart.renew().await {
                Ok(client) => client,
                Err(err) => {
                    warn!(%err, "the servers refuse the cache a new session: it stops following");
                    return None;
                }
            };
        }
        apart.nodelay().await;
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

/// Reads the nodes the watch's notifications name, in batches, and does the syncs asked
/// for, until a notification says that the connection was lost or the session ended:
/// returns that state.
///
/// # Notable errors
/// As [`walk::read`]: a read or a sync cut off.
async fn notifications(
    shared: &Shared,
    client: &Client,
    watcher: &mut PersistentWatcher,
) -> Result<SessionState> {
    loop {
        let mut batch = Batch::default();
        let asked = tokio::select! {
            event = watcher.changed() => {
                batch.add(event);
                None
            }
            asked = shared.syncs.wanted() => Some(asked),
        };
        if asked.is_some() {
            walk::sync(client, &shared.root).await?;
        }
        // Once a sync is answered, every notification the servers sent before the answer
        // is queued: all of them are read before the sync is done.
        loop {
            let more = batch.fill(watcher);
            if let Some(state) = read_batch(shared, client, std::mem::take(&mut batch)).await? {
                return Ok(state);
            }
            if !more || asked.is_none() {
                break;
            }
        }
        if let Some(asked) = asked {
            shared.syncs.done(asked);
        }
    }
}

/// Reads the nodes `batch` names and takes in what changed; the session's state that ended
/// the batch, if one did.
///
/// # Notable errors
/// As [`walk::read`], unless the batch ended with the connection: then that state.
async fn read_batch(
    shared: &Shared,
    client: &Client,
    batch: Batch,
) -> Result<Option<SessionState>> {
    if !batch.paths.is_empty() {
        let read = walk::read(client, batch.paths)
            .instrument(debug_span!("zk.cache.read"))
            .await;
        match (read, batch.ended) {
            (Ok(found), _) => shared.take(found),
            (Err(_), Some(state)) => return Ok(Some(state)),
            (Err(err), None) => return Err(err),
        }
    }
    Ok(batch.ended)
}

/// The paths notifications named, each once, in the order first named, and the session
/// event after which notifications may have been missed, if one came.
#[derive(Default)]
struct Batch {
    paths: Vec<Arc<str>>,
    named: HashSet<Arc<str>>,
    ended: Option<SessionState>,
}

impl Batch {
    /// Adds the path `event` names, or the session's state if it is a session event after
    /// which notifications may have been missed.
    fn add(&mut self, event: WatchedEvent) {
        match event.event_type {
            EventType::Session => match event.session_state {
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => {}
                lost => self.ended = Some(lost),
            },
            _ => {
                debug!(path = event.path, kind = %event.event_type, "notified");
                let path: Arc<str> = Arc::from(event.path);
                if self.named.insert(path.clone()) {
                    self.paths.push(path);
                }
            }
        }
    }

    /// Adds the events `watcher` has ready now, until [`BATCH`] paths or a session event
    /// that ends the batch; whether it stopped full (more may be ready).
    fn fill(&mut self, watcher: &mut PersistentWatcher) -> bool {
        while self.ended.is_none() {
            if self.paths.len() >= BATCH {
                return true;
            }
            match now(watcher.changed()) {
                Some(event) => self.add(event),
                None => return false,
            }
        }
        false
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
