//! ZooKeeper coordination recipes for tokio services.
//!
//! * [`Mutex`]: a distributed lock on ephemeral-sequential znodes. Waiters queue in order of
//!   arrival and each watches only its predecessor, so a release wakes one waiter, not all
//!   (no herd effect). Blocking, non-blocking and bounded-wait acquisition; fencing tokens;
//!   a guard that learns when its lock is lost; cancellation that never leaks a node. Tasks
//!   sharing one `Mutex` exclude each other as processes do.
//! * [`KeyedMutex`]: a [`Mutex`] per key under one root (a lock per job, order or tenant).
//! * [`MultiLock`] (and [`KeyedMutex::lock_all`]): several locks all or nothing, in one
//!   global order so overlapping sets never deadlock, under one [`MultiGuard`].
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
//! * [`SharedCounter`]: a 32-bit counter in one node (Curator's `SharedCount` layout),
//!   compare-and-set by version, with a watchable value that says when it may be stale.
//! * [`Cache`]: a cache of a node and its subtree, kept by one persistent watch and read
//!   again in full after every reconnection or expiry; it says when it may be stale, reports
//!   each change once, and lets a decision commit only if the nodes it read are unchanged
//!   ([`Fenced::unchanged`]).
//! * [`Session`]: a ZooKeeper session that is renewed by itself after expiry.
//!
//! Every recipe names its nodes as Apache Curator does (`_c_<uuid>-lock-<seq>`,
//! `_c_<uuid>-__READ__<seq>`, `<path>/leases/_c_<uuid>-lease-<seq>`, …), so a Rust service
//! can share a path with Java services using Curator's `InterProcessMutex`,
//! `InterProcessReadWriteLock`, `InterProcessSemaphoreV2` or `LeaderLatch` (and a counter
//! with Curator's `SharedCount`).
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
//!
//! # Below the recipes: [`zookeeper`]
//!
//! The recipes stand on [zookeeper-client](https://docs.rs/zookeeper-client/0.11) 0.11,
//! whose types show in this crate's API: [`Session::client`] hands out its `Client`,
//! [`Fenced::create`] takes its `CreateMode`, and [`Error::ZooKeeper`] and
//! [`Error::FencedOpFailed`] carry its `Error`. Use them through [`zookeeper`], the very
//! crate the recipes were built with, rather than a `zookeeper-client` dependency of your
//! own: one whose version differs is another crate to Cargo, and its types do not fit.
//! [`Session::client`] is the way down, on the session the recipes share: `None` while a
//! new session is being made; drop the client when done (a clone kept keeps the session
//! open after [`Session::close`]).
//!
//! ```no_run
//! use zk_recipes::zookeeper::{self, CreateMode};
//! use zk_recipes::{Error, Mutex, Session};
//!
//! # async fn demo(session: Session) -> Result<(), Error> {
//! // Under the lock: record a claim, fenced (written only while the lock is held).
//! let guard = Mutex::new(&session, "/locks/orders")?.lock().await?;
//! let claimed = guard
//!     .fenced()
//!     .create("/claims/orders-17", b"worker-7", CreateMode::Persistent)
//!     .commit()
//!     .await;
//! match claimed {
//!     Ok(_) => {}
//!     Err(Error::FencedOpFailed { reason: zookeeper::Error::NodeExists, .. }) => {}
//!     Err(err) => return Err(err),
//! }
//! guard.release().await?;
//!
//! // The way down: the session's own client, for what the recipes do not cover.
//! if let Some(client) = session.client() {
//!     let (data, _stat) = client.get_data("/claims/orders-17").await?;
//!     assert_eq!(data, b"worker-7");
//! }
//! # Ok(()) }
//! ```

mod acl;
mod error;
mod hold;
mod loss;
mod metrics;
mod node;
mod path;
mod queue;
mod recipes;
mod revoke;
mod session;

pub use acl::NodeAcl;
pub use error::{Error, Result};
pub use hold::{Fenced, Hold, LossSignal, Written};
pub use loss::Loss;
pub use node::CachedNode;
pub use path::check_path;
pub use recipes::cache::{Cache, CacheState, Change, Snapshot, Snapshots, CHANGES_KEPT};
pub use recipes::contenders::check_contender_id;
pub use recipes::contenders::{Access, Contender};
pub use recipes::counter::{CounterState, CounterValue, SharedCounter, Versioned};
pub use recipes::election::{Candidate, LeaderElection, Leadership, Participant, Role};
pub use recipes::group::{check_name, Group, Member, Membership, Presence};
pub use recipes::keyed::KeyedMutex;
pub use recipes::lock::{DistributedLock, Mutex, MutexGuard};
pub use recipes::multi::{MultiGuard, MultiLock};
pub use recipes::partition::{
    PartitionHold, PartitionOwner, Partitioner, PartitionerStatus, Worker, WorkerState,
};
pub use recipes::rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use recipes::semaphore::{Lease, Semaphore};
pub use revoke::revoke;
pub use session::{CloseReason, Closing, Session, SessionBuilder, SessionEvent};

/// [zookeeper-client](https://docs.rs/zookeeper-client/0.11) 0.11, the ZooKeeper client the
/// recipes are built on: its types in this crate's API, and the operations the recipes do
/// not cover, on the session they share ([`Session::client`]); see the crate's docs.
pub use zookeeper_client as zookeeper;
