//! Locks on several paths at once, all or nothing: [`MultiLock`] and [`MultiGuard`].
//!
//! Several [`Mutex`]es are locked all or nothing, in one global order (by lock path), so
//! that callers wanting overlapping sets never deadlock; one guard, lost with the first loss
//! of any of its locks, fences by every node. The semantics are stated in full on
//! [`MultiLock`], the public face of this module.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tracing::{debug, debug_span, Instrument};

use crate::error::{Error, Result};
use crate::hold::{Core, Fenced, LossSignal};
use crate::loss::Loss;
use crate::queue::Wait;
use crate::recipes::lock::{Mutex, MutexGuard};

/// How long a failed or timed-out acquisition waits for the locks it took to be given back
/// before it returns; a release that takes longer goes on in the background, until the node
/// or its session is gone.
const GIVE_BACK: Duration = Duration::from_secs(1);

/// Several [`Mutex`]es locked all or nothing, in one global order.
///
/// A [`MultiLock`] is a set of [`Mutex`]es (for keys of a [`KeyedMutex`](crate::KeyedMutex):
/// [`KeyedMutex::lock_all`](crate::KeyedMutex::lock_all)) taken together:
///
/// * **All or nothing.** An acquisition returns a [`MultiGuard`] holding every lock of the
///   set, or nothing: a try that finds one held, a timeout after some were taken, an error,
///   and a dropped future all give back the locks taken so far, and leave no node of the
///   acquisition in ZooKeeper while its session lives.
/// * **No deadlock.** The locks are taken one after the other in one global order, by
///   full lock path (byte order), whatever order they were given in; two callers that want
///   overlapping sets therefore never wait for each other in a circle. That holds among
///   `MultiLock`s (and [`KeyedMutex::lock_all`](crate::KeyedMutex::lock_all)); a task that
///   holds one lock and then takes others in another order on its own can still deadlock,
///   as can Curator's `InterProcessMultiLock`, which takes its locks in the order given.
/// * **A set.** A path given twice (the same key, or two [`Mutex`]es on one path) is locked
///   once: the set is deduplicated by lock path (the first [`Mutex`] given for a path is
///   the one used). An empty set is refused.
/// * **One guard, one loss.** The [`MultiGuard`] is lost once any of its locks is (the
///   first loss of any: [`MultiGuard::is_lost`], [`lost`](MultiGuard::lost),
///   [`loss_signal`](MultiGuard::loss_signal)); its [`fenced`](MultiGuard::fenced) writes
///   commit only while every one of its nodes exists; [`release`](MultiGuard::release)
///   gives them all back together.
/// * **A lock lost while taking the next.** If a lock already taken is lost while a later
///   one is waited for, everything taken is given back and the acquisition starts again
///   from the first lock (within the same bound), so that a guard is never handed out lost.
///
/// Each lock of the set is exactly a [`Mutex`] (Curator's `InterProcessMutex` layout), so
/// a Java service's `InterProcessMutex` on one of the paths excludes the `MultiGuard`'s
/// holder, and the other way round.
///
/// A `MultiGuard` is no [`Hold`](crate::Hold): a hold has one node and one fencing token,
/// and a resource fenced by tokens must compare each lock's token with the largest it has
/// seen *for that lock*. Each lock's own guard (a [`MutexGuard`], a `Hold`) gives them:
/// [`MultiGuard::guards`], [`MultiGuard::guard`].
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::{MultiLock, Mutex};
///
/// let both = MultiLock::new([
///     Mutex::new(&session, "/locks/accounts/alice")?,
///     Mutex::new(&session, "/locks/accounts/bob")?,
/// ])?;
/// let guard = both.lock().await?;
/// // ... move money from alice to bob, committing with guard.fenced() ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    /// Sorted by path, without repeats; never empty.
    mutexes: Arc<[Mutex]>,
}

/// What one attempt at taking every lock came to.
enum Attempt {
    Held(Vec<MutexGuard>),
    /// The bound passed (or a try found a lock held); what was taken is given back.
    GaveUp,
    /// A lock taken was lost before the last was taken; what was taken is given back.
    Lost,
}

impl MultiLock {
    /// The locks of `mutexes`, taken in the order of their paths; a path given twice is
    /// locked once. No request is sent.
    ///
    /// The mutexes may belong to different sessions: each lock is held on its own
    /// mutex's session, and is lost with it.
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if `mutexes` is empty.
    pub fn new(mutexes: impl IntoIterator<Item = Mutex>) -> Result<MultiLock> {
        let mut mutexes: Vec<Mutex> = mutexes.into_iter().collect();
        if mutexes.is_empty() {
            return Err(Error::InvalidArgument(
                "a multi lock needs at least one lock".into(),
            ));
        }
        mutexes.sort_by(|a, b| a.path().cmp(b.path()));
        mutexes.dedup_by(|later, first| later.path() == first.path());
        Ok(MultiLock {
            mutexes: mutexes.into(),
        })
    }

    /// The lock paths, in the order they are taken.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.mutexes.iter().map(Mutex::path)
    }

    /// Waits as long as it takes to hold every lock.
    ///
    /// # Notable errors
    /// As [`Mutex::lock`] for any of the locks; the locks taken before it are given back
    /// (within a second, else in the background) before the error is returned.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future gives back, in the background, every lock taken
    /// and the node of the one waited for.
    pub async fn lock(&self) -> Result<MultiGuard> {
        let acquired = self.acquire(Wait::Forever).await?;
        acquired.ok_or(Error::Closed)
    }

    /// Takes every lock if none is held or waited for by another contender; never waits,
    /// neither on a holder nor on the connection. One round trip per lock; `None`, with
    /// the locks taken given back, if one of them was held or waited for (or a lock taken
    /// was lost meanwhile).
    ///
    /// # Notable errors
    /// As [`Mutex::try_lock`] for any of the locks (at once, [`Error::Disconnected`] if the
    /// connection is down); the locks taken are given back first.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.acquire(Wait::Never).await
    }

    /// Waits at most `timeout`, in all, to hold every lock; `None` if it did not, with the
    /// locks taken given back before it returns (or, if that takes over a second, by
    /// removals that go on in the background until the nodes or their session are gone).
    /// As [`Mutex::try_lock_for`], the bound never cuts short a request the servers are
    /// answering.
    ///
    /// # Notable errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<Option<MultiGuard>> {
        self.acquire(Wait::at_most(timeout)).await
    }

    /// Takes every lock within `wait`, again from the first if one taken was lost before
    /// the last was taken (unless it may not wait).
    async fn acquire(&self, wait: Wait) -> Result<Option<MultiGuard>> {
        let span = debug_span!(
            "zk.multi.acquire",
            first = %self.mutexes.first().map_or("", Mutex::path),
            locks = self.mutexes.len(),
        );
        async {
            loop {
                match self.attempt(wait).await? {
                    Attempt::Held(guards) => {
                        debug!("holding every lock");
                        return Ok(MultiGuard::of(guards));
                    }
                    Attempt::GaveUp => return Ok(None),
                    Attempt::Lost if !wait.is_never() => {
                        debug!("again from the first lock");
                    }
                    Attempt::Lost => return Ok(None),
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Takes the locks one after the other, in path order, each within `wait`; gives back
    /// what it took if it cannot take them all.
    async fn attempt(&self, wait: Wait) -> Result<Attempt> {
        let mut held: Vec<MutexGuard> = Vec::with_capacity(self.mutexes.len());
        for mutex in self.mutexes.iter() {
            let signal = signal_of(&held);
            let lost = async {
                match &signal {
                    Some(signal) => signal.lost().await,
                    None => std::future::pending::<Loss>().await,
                }
            };
            let acquired = tokio::select! {
                acquired = mutex.acquire(wait) => acquired,
                loss = lost => {
                    debug!(path = mutex.path(), ?loss, "a lock taken was lost while waiting");
                    return Ok(give_back(held, Attempt::Lost).await);
                }
            };
            match acquired {
                Ok(Some(guard)) => {
                    debug!(node = guard.node(), "took a lock of the set");
                    held.push(guard);
                }
                Ok(None) => {
                    debug!(path = mutex.path(), "could not take a lock of the set");
                    return Ok(give_back(held, Attempt::GaveUp).await);
                }
                Err(err) => return Err(give_back(held, err).await),
            }
        }
        match held.iter().find(|guard| guard.is_lost()) {
            Some(guard) => {
                debug!(node = guard.node(), "a lock taken was lost");
                Ok(give_back(held, Attempt::Lost).await)
            }
            None => Ok(Attempt::Held(held)),
        }
    }
}

/// Gives back `held`, waiting at most [`GIVE_BACK`] (the rest goes on in the background),
/// and returns `outcome`.
async fn give_back<T>(held: Vec<MutexGuard>, outcome: T) -> T {
    if !held.is_empty() {
        debug!(locks = held.len(), "giving back the locks taken");
        let _ = tokio::time::timeout(GIVE_BACK, release_all(held)).await;
    }
    outcome
}

/// The loss of any of `guards`; `None` if there are none.
fn signal_of(guards: &[MutexGuard]) -> Option<LossSignal> {
    let (first, rest) = guards.split_first()?;
    let rest: Vec<LossSignal> = rest.iter().map(MutexGuard::loss_signal).collect();
    Some(first.loss_signal().with(&rest))
}

/// A release in flight.
type Releasing = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// Releases every one of `guards` at once, and returns once all are done: the first error,
/// if any ([`Error::Lost`] of a lock lost before).
async fn release_all(guards: Vec<MutexGuard>) -> Result<()> {
    let mut releases: Vec<Option<Releasing>> = guards
        .into_iter()
        .map(|guard| Some(Box::pin(guard.release()) as Releasing))
        .collect();
    let mut failed = None;
    std::future::poll_fn(|cx| {
        for slot in &mut releases {
            let Some(release) = slot else { continue };
            if let Poll::Ready(released) = release.as_mut().poll(cx) {
                *slot = None;
                if let Err(err) = released {
                    failed.get_or_insert(err);
                }
            }
        }
        match releases.iter().all(Option::is_none) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    })
    .await;
    failed.map_or(Ok(()), Err)
}

/// Proof of holding every lock of a [`MultiLock`] (or of
/// [`KeyedMutex::lock_all`](crate::KeyedMutex::lock_all)); gives them all back when
/// dropped (in the background).
///
/// Lost once any of its locks is; see [`MultiLock`].
#[derive(Debug)]
#[must_use = "the locks are released when the guard is dropped"]
pub struct MultiGuard {
    /// Sorted by lock path; never empty.
    guards: Vec<MutexGuard>,
    /// The hold core of the first: the fence's first check.
    first: Core,
    signal: LossSignal,
}

impl MultiGuard {
    /// The guard of `guards` (sorted by lock path); `None` if there are none.
    fn of(guards: Vec<MutexGuard>) -> Option<MultiGuard> {
        let signal = signal_of(&guards)?;
        let first = guards.first()?.core().clone();
        Some(MultiGuard {
            guards,
            first,
            signal,
        })
    }

    /// The guard of each lock, in lock path order: each lock's own node and fencing token
    /// ([`MutexGuard::node`], [`MutexGuard::fencing_token`]), to give a resource that
    /// fences by token the token of the lock that guards it.
    pub fn guards(&self) -> &[MutexGuard] {
        &self.guards
    }

    /// The guard of the lock on `path` (a [`Mutex::path`]; for a
    /// [`KeyedMutex`](crate::KeyedMutex), `<root>/<key>`), if it is one of the set.
    pub fn guard(&self, path: &str) -> Option<&MutexGuard> {
        self.guards
            .iter()
            .find(|guard| guard.node().rsplit_once('/').map(|(lock, _)| lock) == Some(path))
    }

    /// Whether any of the locks can no longer be trusted (see [`MutexGuard::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.signal.is_lost()
    }

    /// Resolves once any of the locks can no longer be trusted; says why (the loss of the
    /// first found lost; see [`MutexGuard::lost`]).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        self.signal.lost().await
    }

    /// The loss of any of the locks as an owned, cloneable value; see
    /// [`LossSignal`](crate::LossSignal).
    pub fn loss_signal(&self) -> LossSignal {
        self.signal.clone()
    }

    /// A transaction that commits only while every lock of the set is intact: its multi
    /// checks the existence of each lock's node before the operations added; see
    /// [`Fenced`](crate::Fenced). A write into the first lock's own node is read first
    /// (as a single guard's is); one into another lock's node is checked by that node's
    /// existence only.
    pub fn fenced(&self) -> Fenced {
        let also = self.guards.iter().skip(1);
        Fenced::of_all(
            self.first.clone(),
            also.map(|guard| guard.core().clone()).collect(),
        )
    }

    /// Releases every lock, all at once, and returns once every node is gone (deleted, or
    /// gone with its session); see [`MutexGuard::release`].
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if any lock was lost before the release (the first such found);
    ///   every node still there is deleted all the same.
    /// * [`Error::NoAuth`] if the servers refuse a delete.
    ///
    /// # Cancel safety
    /// Cancel safe: unfinished releases go on in the background until the nodes or their
    /// sessions are gone.
    pub async fn release(self) -> Result<()> {
        debug!(
            first = self.first.node(),
            locks = self.guards.len(),
            "releasing every lock"
        );
        release_all(self.guards).await
    }
}
