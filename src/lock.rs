//! The distributed mutex: [`Mutex`], [`MutexGuard`] and the [`DistributedLock`] trait.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{watch, Notify, SemaphorePermit};
use tokio::task::JoinHandle;
use tracing::{debug, info, info_span, warn, Instrument, Span};
use zookeeper_client::SessionState;

use crate::error::{Error, Result};
use crate::queue::{Contender, Loss, Queue};
use crate::session::Session;

/// How long a waiter that gives up may spend deleting its node before leaving that to the
/// background.
const LEAVE_GRACE: Duration = Duration::from_secs(1);

/// How long after acquisition a holder starts watching its own node for deletion by someone
/// else (at once when [`MutexGuard::lost`] is awaited). Short critical sections then cost no
/// watch request; session expiry and suspension are noticed from the start regardless.
const NODE_WATCH_DELAY: Duration = Duration::from_millis(10);

/// A distributed lock, as a trait object: lets a service hold `Arc<dyn DistributedLock>` and
/// swap [`Mutex`] for another lock or an in-memory fake in its own tests.
///
/// # Cancel safety
/// Implementations must be cancel safe: a dropped acquisition leaves nothing held. [`Mutex`]
/// is.
#[async_trait]
pub trait DistributedLock: Send + Sync {
    /// Waits as long as it takes to hold the lock; see [`Mutex::lock`].
    async fn lock(&self) -> Result<Box<dyn LockGuard>>;
    /// Takes the lock if nobody holds it or waits for it; never waits on a holder; see
    /// [`Mutex::try_lock`].
    async fn try_lock(&self) -> Result<Option<Box<dyn LockGuard>>>;
    /// Waits at most `timeout` to hold the lock; see [`Mutex::try_lock_for`].
    async fn try_lock_for(&self, timeout: Duration) -> Result<Option<Box<dyn LockGuard>>>;
}

/// A held [`DistributedLock`]; releases on drop.
///
/// # Cancel safety
/// `lost` is cancel safe; a dropped `release` finishes in the background.
#[async_trait]
pub trait LockGuard: Send + Sync + std::fmt::Debug {
    /// A number that grows with every new holder of the lock.
    fn fencing_token(&self) -> u64;
    /// Whether the lock can no longer be trusted.
    fn is_lost(&self) -> bool;
    /// Resolves once the lock can no longer be trusted; see [`MutexGuard::lost`].
    async fn lost(&self) -> Loss;
    /// Releases the lock and waits for the release to be confirmed; see
    /// [`MutexGuard::release`].
    async fn release(self: Box<Self>) -> Result<()>;
}

/// A distributed mutex: at most one holder across every process and session that locks the
/// same path.
///
/// Each acquisition enters the contender queue under the lock path with an
/// EPHEMERAL_SEQUENTIAL node named `_c_<uuid>-lock-<seq>`, as Apache Curator's
/// `InterProcessMutex` does, so Rust and Java services can share one lock. The lowest node
/// holds; every waiter watches only its immediate predecessor, so a release wakes exactly one
/// waiter. Waiters are served in the order they arrived.
///
/// * **Hand-off.** The next waiter takes the lock on the release notification itself, with
///   no further request, at any queue length: a holder that had waited deletes its node in
///   one transaction with a data change, which its successor's watch reports as
///   `NodeDataChanged` (Curator and kazoo waiters treat it as any other event and look
///   again). Nothing else writes to a contender node; a client that does breaks this.
///
/// * **Fencing.** [`MutexGuard::fencing_token`] is the zxid that created the holder's node:
///   it grows with every new holder, so a resource that remembers the largest token it has
///   seen can refuse a stale holder.
/// * **Loss.** A holder is told when it can no longer trust its lock:
///   [`MutexGuard::lost`] resolves when the session expires, the connection is suspended
///   (see [`SessionBuilder::tolerate_suspension`](crate::SessionBuilder::tolerate_suspension)),
///   or the node is deleted by anyone.
/// * **Leaving.** Release, a timed-out or cancelled wait, and a dropped guard all delete the
///   node; after any outcome but "holding", no node of this `Mutex` is left in ZooKeeper.
/// * **Re-entrancy.** A `Mutex` value is one participant: [`Mutex::lock`] on a value that
///   already holds the lock returns another guard at once, and the node is deleted when the
///   last guard goes. Concurrent acquisitions through one value are served one at a time.
/// * **Session expiry.** A `lock()` that was waiting when its session expired enters the
///   queue again on the new session (at its end: its old place died with the old session).
///
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::Mutex;
///
/// let mutex = Mutex::new(&session, "/locks/orders")?;
/// let guard = mutex.lock().await?;
/// // ... work, passing guard.fencing_token() to the resource ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Mutex {
    session: Session,
    queue: Queue,
    acquiring: tokio::sync::Mutex<()>,
    held: std::sync::Mutex<Weak<Held>>,
}

/// When an acquisition gives up.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Forever,
    Never,
    Until(Instant),
}

impl Wait {
    fn deadline(self) -> Option<Instant> {
        match self {
            Wait::Until(deadline) => Some(deadline),
            Wait::Forever | Wait::Never => None,
        }
    }
}

impl Mutex {
    /// A mutex on `path` (created, with missing parents, as container nodes on first use).
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed; nothing is sent to ZooKeeper.
    pub fn new(session: &Session, path: &str) -> Result<Mutex> {
        Ok(Mutex {
            session: session.clone(),
            queue: Queue::new(path, "lock-", true)?,
            acquiring: tokio::sync::Mutex::new(()),
            held: std::sync::Mutex::new(Weak::new()),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.queue.root()
    }

    /// Waits as long as it takes to hold the lock; returns at once if this `Mutex` value
    /// already holds it.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the ACL of the lock path (or a parent) denies creating nodes.
    /// * [`Error::EphemeralParent`] if the lock path lies under an ephemeral node.
    /// * [`Error::LockLost`] if this value holds a guard whose lock was lost: release it first.
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future (for example under `tokio::time::timeout`) deletes
    /// the waiter's node in the background, even if the reply to its create was lost.
    pub async fn lock(&self) -> Result<MutexGuard> {
        match self.acquire(Wait::Forever).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::Closed),
        }
    }

    /// Takes the lock if no other contender is ahead; never waits on a holder.
    ///
    /// Costs one round trip: the create and the listing that decides are sent together.
    /// Returns `None`, with the node deleted, if the lock is held or waited for (also when
    /// another acquisition through this same value is under way).
    ///
    /// # Notable errors
    /// As [`lock`](Self::lock), and [`Error::SessionExpired`] if the session expired while
    /// trying or no session is live (a new one is being made): it does not wait for one.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<MutexGuard>> {
        self.acquire(Wait::Never).await
    }

    /// Waits at most `timeout` to hold the lock; `None` if it did not, with the node deleted
    /// before it returns (or, if the connection is down, in the background).
    ///
    /// The bound covers waiting for a session, for the queue and for the holder.
    ///
    /// # Notable errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<Option<MutexGuard>> {
        self.acquire(Wait::Until(Instant::now() + timeout)).await
    }

    // `acquire`, `contend` and `contend_once` are not `async fn`s: an `async fn` future holds
    // its arguments twice (as passed and as moved into the body) for as long as it waits,
    // and every waiting `lock()` future nests all three.
    #[allow(clippy::manual_async_fn)]
    fn acquire(&self, wait: Wait) -> impl Future<Output = Result<Option<MutexGuard>>> + '_ {
        async move {
            // Held until the acquisition is over: one at a time through this value.
            let Some(_turn) = self.turn(wait).await else {
                return Ok(None);
            };
            if let Some(guard) = self.reenter()? {
                return Ok(Some(guard));
            }
            let span = info_span!(
                "zk.lock.acquire",
                path = %self.path(),
                node = tracing::field::Empty,
                position = tracing::field::Empty,
                waited_ms = tracing::field::Empty,
            );
            self.contend(wait).instrument(span).await
        }
    }

    /// This value's turn to acquire, waited for within `wait`; `None` if it did not come.
    /// Its own future, so that it takes no room in the `lock()` future once it resolved.
    async fn turn(&self, wait: Wait) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match wait {
            Wait::Never => self.acquiring.try_lock().ok(),
            Wait::Forever => Some(self.acquiring.lock().await),
            Wait::Until(deadline) => {
                let turn = self.acquiring.lock();
                tokio::time::timeout_at(deadline.into(), turn).await.ok()
            }
        }
    }

    /// Another guard on the lock this value holds, if it holds it.
    fn reenter(&self) -> Result<Option<MutexGuard>> {
        let held = self.held.lock().ok().and_then(|held| held.upgrade());
        match held {
            Some(held) if held.is_lost() => Err(Error::LockLost {
                node: held.node.clone(),
            }),
            Some(held) => {
                debug!(node = %held.node, "re-entered");
                Ok(Some(MutexGuard { held }))
            }
            None => Ok(None),
        }
    }

    #[allow(clippy::manual_async_fn)] // see `acquire`
    fn contend(&self, wait: Wait) -> impl Future<Output = Result<Option<MutexGuard>>> + '_ {
        async move {
            let started = Instant::now();
            loop {
                match self.contend_once(wait).await {
                    Ok(Some(contender)) => return Ok(Some(self.hold(contender, started))),
                    Ok(None) => return Ok(None),
                    Err(err @ (Error::SessionExpired | Error::LockLost { .. }))
                        if !matches!(wait, Wait::Never) =>
                    {
                        warn!(%err, "left the queue against our will; entering it again");
                    }
                    Err(err) => return Err(err),
                }
            }
        }
    }

    /// Enters the queue and waits to be first; `None` if the wait was given up.
    #[allow(clippy::manual_async_fn)] // see `acquire`
    fn contend_once(&self, wait: Wait) -> impl Future<Output = Result<Option<Contender>>> + '_ {
        async move {
            let Some(mut contender) = self.enter_in_turn(wait).await? else {
                return Ok(None);
            };
            Span::current().record("node", contender.node());
            Span::current().record("position", contender.ahead());
            if matches!(wait, Wait::Never) && !contender.is_first() {
                debug!(ahead = contender.ahead(), "lock is taken");
                Box::pin(give_up(contender)).await;
                return Ok(None);
            }
            if contender.wait_first(wait.deadline()).await? {
                return Ok(Some(contender));
            }
            debug!("gave up waiting");
            Box::pin(give_up(contender)).await;
            Ok(None)
        }
    }

    /// Waits for this session's turn to enter (see [`Session::entry_turn`]), then enters.
    /// Its own future, so that neither the turn nor the wait for it takes room in the
    /// waiting state, and the entering state is allocated only once the turn came.
    async fn enter_in_turn(&self, wait: Wait) -> Result<Option<Contender>> {
        let turn = pin!(self.session.entry_turn());
        let Some(turn) = bounded(wait.deadline(), turn).await? else {
            return Ok(None);
        };
        Box::pin(self.enter(wait, turn)).await
    }

    /// Enters the queue on the live session (waiting for one unless `wait` is `Never`).
    async fn enter(&self, wait: Wait, turn: SemaphorePermit<'_>) -> Result<Option<Contender>> {
        let deadline = wait.deadline();
        let client = match wait {
            Wait::Never => self.session.live_now()?,
            _ => match bounded(deadline, pin!(self.session.live())).await? {
                Some(client) => client,
                None => return Ok(None),
            },
        };
        let entering = pin!(self.queue.enter(&client, &[], turn));
        bounded(deadline, entering).await
    }

    fn hold(&self, contender: Contender, started: Instant) -> MutexGuard {
        let waited = started.elapsed();
        Span::current().record("waited_ms", waited.as_millis() as u64);
        info!(node = %contender.node(), token = contender.czxid(), ?waited, "acquired");
        let held = Held::watch(contender, self.session.tolerates_suspension());
        if let Ok(mut slot) = self.held.lock() {
            *slot = Arc::downgrade(&held);
        }
        MutexGuard { held }
    }
}

/// Runs `work` until `deadline`; `Ok(None)` if the deadline passed first.
///
/// `work` comes pinned by the caller: a future passed by value would be stored twice while
/// it runs, once as the argument and once where it is awaited.
async fn bounded<T>(
    deadline: Option<Instant>,
    work: Pin<&mut impl Future<Output = Result<T>>>,
) -> Result<Option<T>> {
    match deadline {
        None => work.await.map(Some),
        // Boxed: a waiter without a deadline does not carry the timer.
        Some(deadline) => match Box::pin(tokio::time::timeout_at(deadline.into(), work)).await {
            Ok(done) => done.map(Some),
            Err(_) => Ok(None),
        },
    }
}

/// Deletes a waiter's node: at once while connected, in the background otherwise.
async fn give_up(contender: Contender) {
    if contender.client().state() != SessionState::SyncConnected {
        drop(contender);
        return;
    }
    if let Ok(Err(err)) = tokio::time::timeout(LEAVE_GRACE, contender.leave()).await {
        debug!(%err, "leaving the queue failed; retrying in the background");
    }
}

/// The state of one acquisition, shared by its guards.
#[derive(Debug)]
struct Held {
    node: String,
    token: u64,
    contender: Option<Contender>,
    loss: watch::Receiver<Option<Loss>>,
    /// Set before the node is deleted on purpose, so that its deletion is not a loss.
    releasing: Arc<AtomicBool>,
    /// Notified when someone awaits the loss: the node is watched from then on at once.
    asked: Arc<Notify>,
    monitor: JoinHandle<()>,
}

impl Held {
    /// Starts watching for the loss of `contender`'s lock.
    fn watch(contender: Contender, tolerate_suspension: bool) -> Arc<Held> {
        let (report, loss) = watch::channel(None);
        let node = contender.node().to_owned();
        let token = u64::try_from(contender.czxid()).unwrap_or_default();
        let probe = contender.probe();
        let releasing = Arc::new(AtomicBool::new(false));
        let released = releasing.clone();
        let asked = Arc::new(Notify::new());
        let watch_node_from = {
            let asked = asked.clone();
            async move {
                tokio::select! {
                    () = tokio::time::sleep(NODE_WATCH_DELAY) => {}
                    () = asked.notified() => {}
                }
            }
        };
        let monitor = tokio::spawn(
            async move {
                let loss = probe.lost(tolerate_suspension, watch_node_from).await;
                if !released.load(Ordering::SeqCst) {
                    warn!(?loss, "lock lost");
                    report.send_replace(Some(loss));
                }
            }
            .instrument(info_span!("zk.lock.held", node = %node)),
        );
        let contender = Some(contender);
        Arc::new(Held {
            node,
            token,
            contender,
            loss,
            releasing,
            asked,
            monitor,
        })
    }

    fn is_lost(&self) -> bool {
        self.loss.borrow().is_some()
    }

    async fn lost(&self) -> Loss {
        self.asked.notify_one();
        let mut loss = self.loss.clone();
        let seen = loss.wait_for(Option::is_some).await.map(|loss| *loss);
        seen.ok().flatten().unwrap_or(Loss::Closed)
    }

    /// Deletes the node, unless the lock was lost in a way that makes that pointless.
    ///
    /// The monitor's watch on the node, if set, is left to fire with the delete (removing it
    /// first would cost a request on the release path); the monitor is stopped afterwards.
    async fn release(mut self) -> Result<()> {
        self.releasing.store(true, Ordering::SeqCst);
        let lost = *self.loss.borrow();
        let Some(contender) = self.contender.take() else {
            return Ok(());
        };
        let node = self.node.clone();
        let lost_error = || Error::LockLost { node: node.clone() };
        match lost {
            Some(Loss::SessionExpired | Loss::Closed | Loss::NodeDeleted) => {
                contender.disown();
                return Err(lost_error());
            }
            Some(Loss::Suspended) if contender.client().state() != SessionState::SyncConnected => {
                drop(contender);
                return Err(lost_error());
            }
            _ => {}
        }
        match contender.leave().await {
            Ok(true) if lost.is_none() => {
                info!(%node, "released");
                Ok(())
            }
            Ok(_) => Err(lost_error()),
            Err(Error::SessionExpired | Error::Closed) => Err(lost_error()),
            Err(err) => Err(err),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.releasing.store(true, Ordering::SeqCst);
        self.monitor.abort();
        if let Some(contender) = self.contender.take() {
            debug!(node = %self.node, "guard dropped; releasing in the background");
            drop(contender);
        }
    }
}

/// Proof of holding a [`Mutex`]; releases the lock when dropped (in the background).
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct MutexGuard {
    held: Arc<Held>,
}

impl MutexGuard {
    /// The fencing token: the zxid that created the holder's node. It is strictly greater
    /// for every later holder of this lock path, so a resource that remembers the largest
    /// token it has accepted can refuse a holder that lost the lock without knowing.
    pub fn fencing_token(&self) -> u64 {
        self.held.token
    }

    /// Full path of the znode that holds the lock.
    pub fn node(&self) -> &str {
        &self.held.node
    }

    /// Whether the lock can no longer be trusted (see [`lost`](Self::lost)). Deletion of the
    /// node by someone else is noticed from 10 ms after acquisition on (at once once
    /// `lost()` has been awaited); expiry and suspension from the start.
    pub fn is_lost(&self) -> bool {
        self.held.is_lost()
    }

    /// Resolves once the lock can no longer be trusted: the session expired, the
    /// connection was suspended, or the node was deleted; says which.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        self.held.lost().await
    }

    /// Releases the lock and waits until the server confirms. A nested guard (from a
    /// re-entrant `lock()`) only gives up its share; the node goes with the last guard.
    ///
    /// # Notable errors
    /// * [`Error::LockLost`] if the lock was lost before the release. Nothing of anyone
    ///   else's is deleted; if the session is gone this returns at once.
    /// * [`Error::ConnectionLoss`] if the connection broke during the delete; the node is
    ///   then deleted in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished release is finished in the background.
    pub async fn release(self) -> Result<()> {
        let Ok(held) = Arc::try_unwrap(self.held) else {
            return Ok(());
        };
        // Boxed: a caller that awaits `lock()` then `release()` in one future reserves room
        // for the larger of the two, for as long as it waits for the lock.
        Box::pin(held.release()).await
    }
}

#[async_trait]
impl LockGuard for MutexGuard {
    fn fencing_token(&self) -> u64 {
        MutexGuard::fencing_token(self)
    }

    fn is_lost(&self) -> bool {
        MutexGuard::is_lost(self)
    }

    async fn lost(&self) -> Loss {
        MutexGuard::lost(self).await
    }

    async fn release(self: Box<Self>) -> Result<()> {
        MutexGuard::release(*self).await
    }
}

#[async_trait]
impl DistributedLock for Mutex {
    async fn lock(&self) -> Result<Box<dyn LockGuard>> {
        Ok(Box::new(Mutex::lock(self).await?))
    }

    async fn try_lock(&self) -> Result<Option<Box<dyn LockGuard>>> {
        Ok(Mutex::try_lock(self)
            .await?
            .map(|guard| Box::new(guard) as Box<dyn LockGuard>))
    }

    async fn try_lock_for(&self, timeout: Duration) -> Result<Option<Box<dyn LockGuard>>> {
        Ok(Mutex::try_lock_for(self, timeout)
            .await?
            .map(|guard| Box::new(guard) as Box<dyn LockGuard>))
    }
}
