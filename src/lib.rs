//! ZooKeeper coordination recipes for tokio services.
//!
//! * [`Mutex`]: a distributed lock on ephemeral-sequential znodes. Waiters queue in order of
//!   arrival and each watches only its predecessor, so a release wakes one waiter, not all
//!   (no herd effect). Blocking, non-blocking and bounded-wait acquisition; fencing tokens;
//!   a guard that learns when its lock is lost; cancellation that never leaks a node. Tasks
//!   sharing one `Mutex` exclude each other as processes do.
//! * [`KeyedMutex`]: a [`Mutex`] per key under one root (a lock per job, order or tenant).
//! * [`RwLock`]: a read/write lock on the same queue: many readers or one writer, fair (a
//!   reader that arrives after a waiting writer waits for it), each waiter woken alone by the
//!   one contender it waits on.
//! * [`Semaphore`]: at most N [`Lease`]s at a time, one acquirer at a time waiting on the
//!   count behind an internal [`Mutex`].
//! * [`LeaderElection`]: master/follower roles on the same queue.
//! * [`Partitioner`]: work assignment: a fixed set of partitions dealt among the live
//!   members of a group (balanced, sticky, handed off cooperatively), each worked by one
//!   member at a time under a fenced [`PartitionHold`].
//! * [`Group`]: group membership (Curator's `GroupMember` layout): a member node kept
//!   across session expiry, and live views of the members and of an election's leader.
//! * [`Session`]: a ZooKeeper session that is renewed by itself after expiry.
//!
//! Every recipe names its nodes as Apache Curator does (`_c_<uuid>-lock-<seq>`,
//! `_c_<uuid>-__READ__<seq>`, `<path>/leases/_c_<uuid>-lease-<seq>`, …), so a Rust service
//! can share a path with Java services using Curator's `InterProcessMutex`,
//! `InterProcessReadWriteLock`, `InterProcessSemaphoreV2` or `LeaderLatch`.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes::{Error, Mutex, Session};
//!
//! # async fn demo() -> Result<(), Error> {
//! let session = Session::connect("127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183").await?;
//! let mutex = Mutex::new(&session, "/locks/orders")?;
//!
//! if let Some(guard) = mutex.try_lock_for(Duration::from_secs(2)).await? {
//!     let token = guard.fencing_token(); // hand it to the resource you write to
//!     tokio::select! {
//!         _ = do_the_work(token) => {}
//!         loss = guard.lost() => eprintln!("lock lost ({loss:?}); stopping"),
//!     }
//!     guard.release().await?;
//! }
//! # Ok(()) }
//! # async fn do_the_work(_token: u64) {}
//! ```
//!
//! zookeeper-client needs its `tokio` feature when it runs inside tokio (this crate turns it
//! on); every async method here must be called from within a tokio runtime.

mod acl;
mod contenders;
mod election;
mod error;
mod fenced;
mod group;
mod guard;
mod keyed;
mod lock;
mod partition;
mod path;
mod queue;
mod revoke;
mod rwlock;
mod semaphore;
mod session;
mod trust;
mod view;

pub use acl::NodeAcl;
pub use contenders::check_contender_id;
pub use contenders::{Access, Contender};
pub use election::{Candidate, LeaderElection, Leadership, Participant, Role};
pub use error::{Error, Result};
pub use fenced::{Fenced, Written};
pub use group::{check_name, Group, Member, Membership, Presence};
pub use guard::Hold;
pub use keyed::KeyedMutex;
pub use lock::{DistributedLock, Mutex, MutexGuard};
pub use partition::{PartitionHold, PartitionOwner, Partitioner, Worker, WorkerState};
pub use path::check_path;
pub use revoke::revoke;
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{Lease, Semaphore};
pub use session::{CloseReason, Closing, Session, SessionBuilder, SessionEvent};
pub use trust::Loss;
