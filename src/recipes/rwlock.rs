//! The distributed read/write lock: [`RwLock`], [`RwLockReadGuard`], [`RwLockWriteGuard`].
//!
//! Many readers or one writer at a time across every process, session and task that locks
//! the same path; contenders are served in order of arrival.
//!
//! `RwLock` and how it is taken are here; its guards, each with what a hold offers, are
//! in `guards`.

mod guards;

use std::time::Duration;

use async_trait::async_trait;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::hold::{boxed, Hold, Holding, LOCK_WATCH};
use crate::queue::{is_writer, Blockers, Queue, Wait};
use crate::recipes::contenders::{list, revoke_holding, validate_id, Access, Contender};
use crate::recipes::lock::DistributedLock;
use crate::session::Session;
pub use guards::{RwLockReadGuard, RwLockWriteGuard};

/// What names a reader of ours (and Curator's): `_c_<uuid>-__READ__<seq>`.
const READER: &str = "__READ__";

/// A distributed read/write lock: many readers or one writer at a time, across every
/// process, session and task that locks the same path.
///
/// Every acquisition enters one queue under the lock path with an EPHEMERAL_SEQUENTIAL node
/// named `_c_<uuid>-__READ__<seq>` or `_c_<uuid>-__WRIT__<seq>`, as Apache Curator's
/// `InterProcessReadWriteLock` does, so Rust and Java services can share one lock.
///
/// * **Who holds.** A writer holds when it is first in the queue; a reader holds when no
///   writer is ahead of it. So the lock is fair: a writer waits only for those who came
///   before it, and a reader that arrives after a waiting writer waits for that writer.
/// * **No herd.** A waiting writer watches only the node just ahead of it; a waiting reader
///   watches only the closest writer ahead of it, never a reader. When a writer goes, the
///   readers right behind it all hold (each was waiting on it alone), and so does a writer
///   right behind it.
/// * **Tasks.** Every [`read`](Self::read) and [`write`](Self::write) is a contender of its
///   own, so tasks sharing one `RwLock` exclude each other exactly as processes do.
/// * **No upgrade, no downgrade.** A `read()` while this task holds the write lock queues
///   behind that writer like any other reader, and waits until it is released: awaited in
///   the task that holds the write lock, it never returns (as with `tokio::sync::RwLock`).
///   There is no downgrade: a read node made while writing is queued behind every writer
///   that arrived meanwhile (sequence numbers only grow), so granting it at once, as
///   Curator does for the thread that holds the write lock, would let such a writer in as
///   soon as the write lock goes. Release the write lock and `read()` instead.
/// * **Fencing, loss, leaving, session expiry** are those of [`Mutex`](crate::Mutex):
///   tokens grow in queue order, so every writer's token is greater than that of every
///   holder before it; guards learn when the lock can no longer be trusted; nothing is
///   left behind by a timed-out, cancelled or dropped acquisition.
///
/// **Sharing a path with other libraries.** Curator's `InterProcessReadWriteLock` shares it
/// fully. kazoo's `ReadLock` and `WriteLock` (`<hex>__rlock__<seq>`, `<hex>__lock__<seq>`)
/// are ordered and told apart here, but kazoo sees our nodes only when made with
/// `extra_lock_patterns` naming them (`["__WRIT__"]` for a reader, `["__WRIT__",
/// "__READ__"]` for a writer; kazoo 2.7.1 and later); and a kazoo 2.8 `ReadLock` that has to
/// wait watches the last writer of the whole queue, even one behind it (kazoo issue #649,
/// fixed in 2.9), which deadlocks with that writer. Curator and kazoo cannot share a path
/// with each other (each sorts the other's names wrongly), so a path has Curator or kazoo
/// peers, not both. Curator and kazoo compare sequence numbers as strings; see the note on
/// order across the wrap at [`Mutex`](crate::Mutex).
///
/// [`RwLock`] implements [`DistributedLock`] for its write side.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::RwLock;
///
/// let lock = RwLock::new(&session, "/locks/catalog")?;
/// let reader = lock.read().await?; // many at once
/// reader.release().await?;
/// let writer = lock.write().await?; // alone
/// writer.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RwLock {
    pub(crate) session: Session,
    pub(crate) readers: Queue,
    pub(crate) writers: Queue,
}

impl RwLock {
    /// A read/write lock on `path` (created, with missing parents, as container nodes on
    /// first use).
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed or too long; nothing is sent to
    ///   ZooKeeper.
    pub fn new(session: &Session, path: &str) -> Result<RwLock> {
        Ok(RwLock {
            session: session.clone(),
            readers: Queue::new(path, READER, Blockers::READER, session.node_acl())?,
            writers: Queue::new(path, "__WRIT__", Blockers::WRITER, session.node_acl())?,
        })
    }

    /// The ACL of the nodes this lock creates, instead of the session's
    /// [`node_acl`](crate::SessionBuilder::node_acl); as [`Mutex::node_acl`](crate::Mutex::node_acl).
    pub fn node_acl(self, acl: NodeAcl) -> RwLock {
        RwLock {
            readers: self.readers.with_acl(acl),
            writers: self.writers.with_acl(acl),
            ..self
        }
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.readers.root()
    }

    /// Waits as long as it takes to hold the lock for reading: until no writer is ahead.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the ACL of the lock path (or a parent) denies creating nodes;
    ///   or, naming the contender ahead, as soon as this one would wait on a node it may not
    ///   read (see [`Mutex::lock`](crate::Mutex::lock)).
    /// * [`Error::InvalidAcl`] if the servers refuse the [`NodeAcl`] (creator-only
    ///   without credentials).
    /// * [`Error::EphemeralParent`] if the lock path lies under an ephemeral node.
    /// * [`Error::ConnectionLoss`] as [`Mutex::lock`](crate::Mutex::lock).
    /// * [`Error::Closed`] if the session was closed (also while waiting).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future deletes the waiter's node in the background, even
    /// if the reply to its create was lost.
    pub async fn read(&self) -> Result<RwLockReadGuard> {
        self.acquire_read(Wait::Forever).await?.ok_or(Error::Closed)
    }

    /// Takes the read lock if no writer holds it or waits for it; never waits, neither on a
    /// writer nor on the connection. One round trip; `None`, with the node deleted, if a
    /// writer is ahead.
    ///
    /// # Notable errors
    /// As [`read`](Self::read), and at once those of
    /// [`Mutex::try_lock`](crate::Mutex::try_lock): [`Error::Disconnected`],
    /// [`Error::ConnectionLoss`], [`Error::Renewing`], [`Error::SessionExpired`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_read(&self) -> Result<Option<RwLockReadGuard>> {
        self.acquire_read(Wait::Never).await
    }

    /// Waits at most `timeout` to hold the read lock; `None` if it did not, with the node
    /// deleted. The bound covers waiting for a session, the connection and the writers.
    ///
    /// # Notable errors
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_read_for(&self, timeout: Duration) -> Result<Option<RwLockReadGuard>> {
        self.acquire_read(Wait::at_most(timeout)).await
    }

    /// Waits as long as it takes to hold the lock for writing: until first in the queue.
    ///
    /// # Notable errors
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`read`](Self::read).
    pub async fn write(&self) -> Result<RwLockWriteGuard> {
        self.acquire_write(Wait::Forever)
            .await?
            .ok_or(Error::Closed)
    }

    /// Takes the write lock if nobody holds the lock or waits for it; never waits. One
    /// round trip; `None`, with the node deleted, if anyone is ahead.
    ///
    /// # Notable errors
    /// As [`try_read`](Self::try_read).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_write(&self) -> Result<Option<RwLockWriteGuard>> {
        self.acquire_write(Wait::Never).await
    }

    /// Waits at most `timeout` to hold the write lock; `None` if it did not, with the node
    /// deleted.
    ///
    /// # Notable errors
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`read`](Self::read).
    pub async fn try_write_for(&self, timeout: Duration) -> Result<Option<RwLockWriteGuard>> {
        self.acquire_write(Wait::at_most(timeout)).await
    }

    /// Waits, within `wait`, to hold the lock on the side of `queue`, as `guard`.
    async fn acquire<G>(
        &self,
        queue: &Queue,
        wait: Wait,
        guard: fn(Holding) -> G,
    ) -> Result<Option<G>> {
        let ticket = queue.acquire(&self.session, &mut None, wait).await?;
        Ok(ticket.map(|ticket| guard(Holding::start(ticket, LOCK_WATCH, None))))
    }

    /// Waits, within `wait`, to hold the lock for reading.
    async fn acquire_read(&self, wait: Wait) -> Result<Option<RwLockReadGuard>> {
        let guard = RwLockReadGuard::new;
        self.acquire(&self.readers, wait, guard).await
    }

    /// Waits, within `wait`, to hold the lock for writing.
    async fn acquire_write(&self, wait: Wait) -> Result<Option<RwLockWriteGuard>> {
        let guard = RwLockWriteGuard::new;
        self.acquire(&self.writers, wait, guard).await
    }

    /// Every contender for this lock, in queue order: readers hold while no writer is
    /// ahead of them, a writer holds when first. Works without locking.
    ///
    /// # Notable errors
    /// As [`Mutex::contenders`](crate::Mutex::contenders).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn contenders(&self) -> Result<Vec<Contender>> {
        let access = |name: &str| match is_writer(name) {
            true => Access::Write,
            false => Access::Read,
        };
        let holds = |index, access, writer_ahead: bool| match access {
            Access::Read => !writer_ahead,
            _ => index == 0,
        };
        list(&self.session, &self.readers, access, holds).await
    }

    /// The id this lock's contenders carry; as [`Mutex::id`](crate::Mutex::id).
    ///
    /// # Notable errors
    /// As [`Mutex::id`](crate::Mutex::id).
    pub fn id(self, id: &str) -> Result<RwLock> {
        let id = validate_id(id)?;
        Ok(RwLock {
            readers: self.readers.with_id(id.clone()),
            writers: self.writers.with_id(id),
            ..self
        })
    }

    /// Asks whoever holds this lock now (the writer, or every reader) to let go; as
    /// [`Mutex::revoke_holders`](crate::Mutex::revoke_holders).
    ///
    /// # Notable errors
    /// As [`Mutex::revoke_holders`](crate::Mutex::revoke_holders).
    ///
    /// # Cancel safety
    /// Cancel safe; a holder may or may not have been asked.
    pub async fn revoke_holders(&self) -> Result<Vec<String>> {
        revoke_holding(&self.session, self.contenders().await?).await
    }
}

/// The write side: `lock()` is [`write`](RwLock::write).
#[async_trait]
impl DistributedLock for RwLock {
    async fn lock(&self) -> Result<Box<dyn Hold>> {
        Ok(Box::new(self.write().await?))
    }

    async fn try_lock(&self) -> Result<Option<Box<dyn Hold>>> {
        Ok(self.try_write().await?.map(boxed))
    }

    async fn try_lock_for(&self, timeout: Duration) -> Result<Option<Box<dyn Hold>>> {
        Ok(self.try_write_for(timeout).await?.map(boxed))
    }
}
