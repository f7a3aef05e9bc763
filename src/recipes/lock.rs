//! The distributed mutex: [`Mutex`], [`MutexGuard`] and the [`DistributedLock`] trait.
//!
//! At most one holder at a time across every process, session and task that locks the same
//! path; waiters are served in order of arrival, each woken alone when its turn comes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::hold::{boxed, Core, Fenced, Hold, Holding, LossSignal, LOCK_WATCH};
use crate::loss::Loss;
use crate::queue::{Blockers, Queue, Wait};
use crate::recipes::contenders::{list, revoke_holding, validate_id, Access, Contender};
use crate::session::Session;

/// A distributed lock, as a trait object: lets a service hold `Arc<dyn DistributedLock>` and
/// swap [`Mutex`] for another lock (the write side of an [`RwLock`](crate::RwLock)) or an
/// in-memory fake in its own tests.
///
/// # Cancel safety
/// Implementations must be cancel safe: a dropped acquisition leaves nothing held. [`Mutex`]
/// is.
#[async_trait]
pub trait DistributedLock: Send + Sync {
    /// Waits as long as it takes to hold the lock; see [`Mutex::lock`].
    async fn lock(&self) -> Result<Box<dyn Hold>>;
    /// Takes the lock if nobody holds it or waits for it; never waits on a holder; see
    /// [`Mutex::try_lock`].
    async fn try_lock(&self) -> Result<Option<Box<dyn Hold>>>;
    /// Waits at most `timeout` to hold the lock; see [`Mutex::try_lock_for`].
    async fn try_lock_for(&self, timeout: Duration) -> Result<Option<Box<dyn Hold>>>;
}

/// A distributed mutex: at most one holder across every process, session and task that
/// locks the same path.
///
/// Each acquisition enters the contender queue under the lock path with an
/// EPHEMERAL_SEQUENTIAL node named `_c_<uuid>-lock-<seq>`, as Apache Curator's
/// `InterProcessMutex` does, so Rust and Java services can share one lock. The lowest node
/// holds; every waiter watches only the node just ahead of it, so a release wakes exactly
/// one waiter. Waiters are served in the order they arrived.
///
/// * **Tasks.** Every [`lock`](Self::lock) is a contender of its own, so tasks sharing one
///   `Mutex` (in an `Arc`, or cloned) exclude each other exactly as processes do, as with
///   `tokio::sync::Mutex`. That includes two branches of one task (`join!`, `select!`).
/// * **A lock per key** (per job, order, tenant): a new `Mutex` on `<root>/<key>` per
///   acquisition costs no request and no more than one kept, or use
///   [`KeyedMutex`](crate::KeyedMutex), which checks the key and hands out that `Mutex`.
/// * **Re-entrancy** is explicit: [`MutexGuard::reenter`] gives the holder another guard on
///   the lock it holds, and the lock is released with the last of them. `lock()` while
///   holding waits for yourself, as with `tokio::sync::Mutex`.
/// * **Hand-off.** When a holder goes, the next waiter holds on what it heard, with no
///   request in the common case and one small request otherwise, at any queue length (the
///   rule: `docs/design.md`, "Why it works this way"). It never reports holding unless its own
///   node exists at that moment: a waiter whose node someone deleted enters the queue
///   again, at its end.
/// * **Fencing.** [`MutexGuard::fencing_token`] is the zxid that created the holder's node:
///   it grows with every new holder, so a resource that remembers the largest token it has
///   seen can refuse a stale holder.
/// * **Loss.** A holder is told when it can no longer trust its lock:
///   [`MutexGuard::lost`] resolves when the session expires or is closed, the connection is
///   suspended (see
///   [`SessionBuilder::tolerate_suspension`](crate::SessionBuilder::tolerate_suspension)),
///   or the node is deleted by anyone. A write into the node by someone else (Curator's
///   revoker writes `__REVOKE__`) is no loss, and changes nothing.
/// * **Leaving.** Release, a timed-out or cancelled wait, and a dropped guard all delete the
///   node, whatever was written into it; after any outcome but "holding", no node of this
///   acquisition is left in ZooKeeper while its session lives.
/// * **Session expiry.** A `lock()` that was waiting when its session expired enters the
///   queue again on the new session (at its end: its old place died with the old session).
///
/// **Order across the wrap.** ZooKeeper's sequence counter is a signed 32-bit number. This
/// crate compares sequence numbers as serial numbers, so its order stays right across the
/// wrap; Curator and kazoo compare the 10-digit suffixes as strings. After 2^31 nodes under
/// one lock path that never became empty (a container root that empties is deleted and
/// starts again at 0), a Rust and a Java contender on that path disagree about the order.
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
#[derive(Clone, Debug)]
pub struct Mutex {
    pub(crate) session: Session,
    pub(crate) queue: Queue,
}

impl Mutex {
    /// A mutex on `path` (created, with missing parents, as container nodes on first use),
    /// whose nodes get the session's [`NodeAcl`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed or too long; nothing is sent to
    ///   ZooKeeper.
    pub fn new(session: &Session, path: &str) -> Result<Mutex> {
        Ok(Mutex {
            session: session.clone(),
            queue: Queue::new(path, "lock-", Blockers::EVERY, session.node_acl())?,
        })
    }

    /// The ACL of the nodes this mutex creates (its contender nodes, and the lock path and
    /// its parents where it makes them), instead of the session's
    /// [`node_acl`](crate::SessionBuilder::node_acl).
    ///
    /// A creator-only ACL on a session without credentials makes acquisitions fail with
    /// [`Error::InvalidAcl`] (the servers refuse it); nothing is created.
    pub fn node_acl(self, acl: NodeAcl) -> Mutex {
        Mutex {
            queue: self.queue.with_acl(acl),
            ..self
        }
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.queue.root()
    }

    /// Waits as long as it takes to hold the lock.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the ACL of the lock path (or a parent) denies creating nodes
    ///   (also how a wrong digest password shows); nothing is created. Also, naming the
    ///   contender ahead, as soon as this one would wait on a node it may not read (a
    ///   [`NodeAcl::CreatorOnly`] node of another identity: the servers would never say
    ///   that it went); the node is deleted. A node ahead whose ACL is narrowed only after
    ///   this one started waiting on it is not noticed (a change of ACL fires no watch): the
    ///   wait then lasts until its deadline (for `lock()`, until it is cancelled).
    /// * [`Error::InvalidAcl`] if the servers refuse the [`NodeAcl`] (creator-only
    ///   without credentials).
    /// * [`Error::EphemeralParent`] if the lock path lies under an ephemeral node.
    /// * [`Error::ConnectionLoss`] if the connection broke under one request three times in
    ///   a row (the servers drop a request they refuse to read); nothing is left behind.
    /// * [`Error::Closed`] if the session was closed (also while waiting).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future (for example under `tokio::time::timeout`) deletes
    /// the waiter's node in the background, even if the reply to its create was lost.
    pub async fn lock(&self) -> Result<MutexGuard> {
        let acquired = self.acquire(Wait::Forever).await?;
        acquired.ok_or(Error::Closed)
    }

    /// Takes the lock if no other contender is ahead; never waits, neither on a holder nor
    /// on the connection.
    ///
    /// Costs one round trip: the create and the listing that decides are sent together.
    /// Returns `None`, with the node deleted, if the lock is held or waited for.
    ///
    /// # Notable errors
    /// As [`lock`](Self::lock), and at once:
    /// * [`Error::Disconnected`] if the connection is down (nothing was sent);
    /// * [`Error::ConnectionLoss`] if it broke while trying (a node that may have been made
    ///   is deleted in the background);
    /// * [`Error::Renewing`] while a new session is being made (nothing was sent);
    /// * [`Error::SessionExpired`] if the session expired while trying.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<MutexGuard>> {
        self.acquire(Wait::Never).await
    }

    /// Waits at most `timeout` to hold the lock; `None` if it did not, with the node deleted
    /// before it returns (or, if that takes over a second, by a removal that goes on in the
    /// background until the node or its session is gone).
    ///
    /// The bound covers waiting for a session, for the connection, for the queue and for
    /// the holder, never the requests of an attempt the servers are answering: a timeout
    /// too short to wait (even zero) still tries once, as `flock -w 0` does. A `timeout` too large to add to the current instant waits as long as it
    /// takes.
    ///
    /// # Notable errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<Option<MutexGuard>> {
        self.acquire(Wait::at_most(timeout)).await
    }

    /// Waits, within `wait`, to hold the lock.
    pub(crate) async fn acquire(&self, wait: Wait) -> Result<Option<MutexGuard>> {
        let ticket = self.queue.acquire(&self.session, &mut None, wait).await?;
        Ok(ticket.map(|ticket| MutexGuard {
            holding: Shared(Arc::new(Holding::start(ticket, LOCK_WATCH, None))),
        }))
    }

    /// Every contender for this lock, first (the holder) first; works without locking. A
    /// contender whose node this session may not read is listed without an id (see
    /// [`Contender`]).
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the lock path cannot be read (not for a contender's node).
    /// * [`Error::Disconnected`] at once if the connection is down: it does not wait.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn contenders(&self) -> Result<Vec<Contender>> {
        list(
            &self.session,
            &self.queue,
            |_| Access::Exclusive,
            |i, _, _| i == 0,
        )
        .await
    }

    /// The id this mutex's contenders carry (their nodes' data), instead of
    /// `<host name>/<process id>`; shown by [`contenders`](Self::contenders).
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if `id` is empty, holds a NUL, is `__REVOKE__`, or is
    ///   larger than a node holds (960 KiB here). Nothing is sent.
    pub fn id(self, id: &str) -> Result<Mutex> {
        let id = validate_id(id)?;
        Ok(Mutex {
            queue: self.queue.with_id(id),
            ..self
        })
    }

    /// Asks whoever holds this lock now to let go ([`revoke`](crate::revoke)); the nodes
    /// asked (none: nobody holds it). A holder whose node this session may neither read nor
    /// write (its ACL) is not asked; nodes it cannot read do not keep the others from being
    /// asked.
    ///
    /// # Notable errors
    /// As [`contenders`](Self::contenders) and [`revoke`](crate::revoke).
    ///
    /// # Cancel safety
    /// Cancel safe; a holder may or may not have been asked.
    pub async fn revoke_holders(&self) -> Result<Vec<String>> {
        revoke_holding(&self.session, self.contenders().await?).await
    }
}

/// Proof of holding a [`Mutex`]; releases the lock when dropped (in the background).
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct MutexGuard {
    holding: Shared,
}

impl MutexGuard {
    /// The fencing token: the zxid that created the lock's node. It is greater for every node
    /// created later, so a resource that remembers the largest token it has accepted can refuse a
    /// stale holder.
    pub fn fencing_token(&self) -> u64 {
        self.holding.core().token()
    }

    /// Full path of the lock's znode.
    pub fn node(&self) -> &str {
        self.holding.core().node()
    }

    /// Whether the lock can no longer be trusted (see [`lost`](Self::lost)). Deletion of the node
    /// by someone else is noticed once it is watched (a lock's or a lease's from 10 ms after it was
    /// acquired, or once `lost()` has been awaited; a leadership's at once); expiry, suspension and
    /// closing from the start; a session the servers have not confirmed in time
    /// ([`Loss::Lapsed`](crate::Loss::Lapsed)) at the first look, read from the clock, even right
    /// after the process wakes from a pause.
    pub fn is_lost(&self) -> bool {
        self.holding.core().is_lost()
    }

    /// Resolves once the lock can no longer be trusted: the session expired or was closed, the
    /// connection was suspended, the node was deleted, or the servers have not confirmed the
    /// session for a session timeout ([`Loss::Lapsed`](crate::Loss::Lapsed): they may have expired
    /// it); says which.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        self.holding.core().lost().await
    }

    /// The loss of this hold as an owned, cloneable value: hand it to a task that watches
    /// the hold while another works under it; see [`LossSignal`](crate::LossSignal).
    pub fn loss_signal(&self) -> LossSignal {
        self.holding.core().loss_signal()
    }

    /// Releases the lock and returns once its node is gone: deleted, or gone with its session.
    /// While the connection is down it waits for it to come back, at most until the servers would
    /// have expired the session (1.5 session timeouts); it never fails for a connection that is
    /// down.
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if the lock was lost before the release (what was done
    ///   under it may have overlapped with another holder); the node, if still there, is deleted
    ///   all the same; if the session is gone this returns at once.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the servers refuse the delete: the node stays
    ///   until the session ends.
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished release goes on in the background until the node is gone or its
    /// session is.
    pub async fn release(self) -> Result<()> {
        // Not boxed: it keeps the holding and its removal, less than a waiting `lock()`,
        // so a caller that awaits an acquisition then the release in one future reserves
        // no room for it.
        self.holding.release().await
    }

    /// A transaction that commits only while this hold is intact; see [`Fenced`](crate::Fenced).
    pub fn fenced(&self) -> Fenced {
        self.holding.core().fenced()
    }

    /// Resolves once someone asked the holder to let go; see [`revoke`](crate::revoke). A request
    /// to the node belongs to the node: once any handle of it saw the marker (a re-entered guard, a
    /// clone, a leader's earlier term on the same node), this resolves, even after the holder's own
    /// write replaced the marker (such a write, a proclamation or a fenced one, reads the node
    /// first: it never replaces a marker unseen).
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if the hold ends first.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the node's ACL no longer lets the session read
    ///   it.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn revocation_requested(&self) -> Result<()> {
        self.holding.core().revocation_requested().await
    }

    /// The hold core of the lock (for a guard made of several: its fence and loss).
    pub(crate) fn core(&self) -> &Core {
        self.holding.core()
    }

    /// Another guard on the lock this one holds (re-entrancy): the lock is released when the
    /// last of them is released or dropped; releasing one that is not the last only gives up
    /// its share (and returns [`Error::Lost`] if the lock was lost). No request is sent.
    pub fn reenter(&self) -> MutexGuard {
        MutexGuard {
            holding: self.holding.clone(),
        }
    }
}

#[async_trait]
impl Hold for MutexGuard {
    fn fencing_token(&self) -> u64 {
        MutexGuard::fencing_token(self)
    }

    fn node(&self) -> &str {
        MutexGuard::node(self)
    }

    fn is_lost(&self) -> bool {
        MutexGuard::is_lost(self)
    }

    async fn lost(&self) -> Loss {
        MutexGuard::lost(self).await
    }

    fn loss_signal(&self) -> LossSignal {
        MutexGuard::loss_signal(self)
    }

    async fn release(self: Box<Self>) -> Result<()> {
        MutexGuard::release(*self).await
    }

    fn fenced(&self) -> Fenced {
        MutexGuard::fenced(self)
    }

    async fn revocation_requested(&self) -> Result<()> {
        MutexGuard::revocation_requested(self).await
    }
}

/// A holding shared by re-entrant guards: the node goes with the last of them.
#[derive(Clone, Debug)]
struct Shared(Arc<Holding>);

impl std::ops::Deref for Shared {
    type Target = Holding;

    fn deref(&self) -> &Holding {
        &self.0
    }
}

impl Shared {
    /// Releases the holding if this is the last share (at the call: see
    /// [`Holding::release`]); else gives up this share, with [`Error::Lost`] if the holding
    /// was lost.
    fn release(self) -> impl Future<Output = Result<()>> + Send {
        let mut last = Arc::try_unwrap(self.0).map(Holding::release);
        async move {
            // Awaited in place: the release is not moved into the future again.
            match &mut last {
                Ok(releasing) => releasing.await,
                Err(shared) if shared.core().is_lost() => Err(shared.core().lost_error()),
                Err(_) => Ok(()),
            }
        }
    }
}

#[async_trait]
impl DistributedLock for Mutex {
    async fn lock(&self) -> Result<Box<dyn Hold>> {
        Ok(Box::new(Mutex::lock(self).await?))
    }

    async fn try_lock(&self) -> Result<Option<Box<dyn Hold>>> {
        Ok(Mutex::try_lock(self).await?.map(boxed))
    }

    async fn try_lock_for(&self, timeout: Duration) -> Result<Option<Box<dyn Hold>>> {
        Ok(Mutex::try_lock_for(self, timeout).await?.map(boxed))
    }
}
