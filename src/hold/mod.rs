//! The hold core: what every hold is a thin shell over, and [`Hold`], what every hold
//! offers.
//!
//! A ticket of the queue that is first becomes a [`Holding`] ([`Holding::start`]): it owns
//! the hold's [`Core`] — the node's identity on its session (path, fencing token, client),
//! its [trust](trust) and loss, its fence ([`Fenced`] writes check that very node), and the
//! node's latch of a request to let go — watches it for its loss (see [`holding`]), and
//! is the one way the node is released. A [`MutexGuard`](crate::MutexGuard), the
//! [`RwLock`](crate::RwLock) guards, a [`Lease`](crate::Lease) and a
//! [`Leadership`](crate::Leadership) each keep a holding (or, for a leadership, its core)
//! and write the methods of [`Hold`] as one-line delegations to it, as a
//! [`PartitionHold`](crate::PartitionHold) does to the `MutexGuard` it wraps: no recipe builds
//! its own trust, fence or latch.
//!
//! Each of those types has the same methods of its own too, so calling them needs no
//! import of the trait; the trait is for code that treats them alike (`Box<dyn Hold>`,
//! `impl Hold`).

mod core;
mod fenced;
mod holding;
mod trust;

use async_trait::async_trait;

pub(crate) use self::core::Core;
pub use fenced::{Fenced, Written};
pub(crate) use holding::{Holding, NodeWatch, LOCK_WATCH};
pub(crate) use trust::Announce;
pub use trust::LossSignal;

use crate::error::Result;
use crate::loss::Loss;

/// Something held in ZooKeeper: a lock, a lease or a leadership, on a node of its own.
///
/// Implemented by [`MutexGuard`](crate::MutexGuard), [`RwLockReadGuard`](crate::RwLockReadGuard),
/// [`RwLockWriteGuard`](crate::RwLockWriteGuard), [`Lease`](crate::Lease),
/// [`Leadership`](crate::Leadership) and [`PartitionHold`](crate::PartitionHold); returned by
/// [`DistributedLock`](crate::DistributedLock). Each method means what the type's own method
/// of that name means (see [`MutexGuard`](crate::MutexGuard)).
///
/// A hold's identity is its node, checked on the server: each of these made a node named
/// with a uuid of its own, so its [fenced writes](crate::Fenced) prove that the very node it
/// made still exists; and a request to let go belongs to the node, heard by every handle of
/// it. A [`Membership`](crate::Membership) is no `Hold`: its node's path is its id, which
/// any session may create again, so nothing can fence by it (see its docs).
///
/// # Cancel safety
/// `lost` is cancel safe; a dropped `release` finishes in the background.
#[async_trait]
pub trait Hold: Send + Sync + std::fmt::Debug {
    /// The fencing token: the zxid that created the node; greater for every later holder.
    fn fencing_token(&self) -> u64;
    /// Full path of the node that holds.
    fn node(&self) -> &str;
    /// Whether the hold can no longer be trusted.
    fn is_lost(&self) -> bool;
    /// Resolves once the hold can no longer be trusted; says why.
    async fn lost(&self) -> Loss;
    /// The hold's loss as an owned, cloneable value, for a task that watches the hold
    /// without borrowing it; see [`LossSignal`].
    fn loss_signal(&self) -> LossSignal;
    /// Gives up the hold and returns once its node is gone.
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if it was lost before the release.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the servers refuse the delete.
    async fn release(self: Box<Self>) -> Result<()>;
    /// A transaction that commits only while the hold is intact; see [`Fenced`](crate::Fenced).
    fn fenced(&self) -> crate::Fenced;
    /// Resolves once someone asked the holder to let go; see [`revoke`](crate::revoke).
    async fn revocation_requested(&self) -> Result<()>;
}

/// A hold as a trait object.
pub(crate) fn boxed(hold: impl Hold + 'static) -> Box<dyn Hold> {
    Box::new(hold)
}
