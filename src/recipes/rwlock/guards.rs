//! The guards of an [`RwLock`](super::RwLock): [`RwLockReadGuard`] and
//! [`RwLockWriteGuard`], each a [`Holding`] of one contender node, with what every
//! [`Hold`] offers (token, node, loss, release, fenced writes, revocation requests).

use async_trait::async_trait;

use crate::error::Result;
use crate::hold::{Fenced, Hold, Holding, LossSignal};
use crate::loss::Loss;

/// Proof of holding an [`RwLock`](super::RwLock) for reading; releases the lock when
/// dropped (in the background). Tokens grow in queue order.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct RwLockReadGuard {
    holding: Holding,
}

impl RwLockReadGuard {
    /// The guard of a reader that holds.
    pub(super) fn new(holding: Holding) -> RwLockReadGuard {
        RwLockReadGuard { holding }
    }

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
        // Boxed: a caller that awaits an acquisition then the release in one future
        // reserves room for the larger of the two while it waits.
        Box::pin(self.holding.release()).await
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
}

#[async_trait]
impl Hold for RwLockReadGuard {
    fn fencing_token(&self) -> u64 {
        RwLockReadGuard::fencing_token(self)
    }

    fn node(&self) -> &str {
        RwLockReadGuard::node(self)
    }

    fn is_lost(&self) -> bool {
        RwLockReadGuard::is_lost(self)
    }

    async fn lost(&self) -> Loss {
        RwLockReadGuard::lost(self).await
    }

    fn loss_signal(&self) -> LossSignal {
        RwLockReadGuard::loss_signal(self)
    }

    async fn release(self: Box<Self>) -> Result<()> {
        RwLockReadGuard::release(*self).await
    }

    fn fenced(&self) -> Fenced {
        RwLockReadGuard::fenced(self)
    }

    async fn revocation_requested(&self) -> Result<()> {
        RwLockReadGuard::revocation_requested(self).await
    }
}

/// Proof of holding an [`RwLock`](super::RwLock) for writing; releases the lock when
/// dropped (in the background). Tokens grow in queue order: a writer's is greater than
/// that of every holder, reader or writer, before it.
#[derive(Debug)]
#[must_use = "the lock is released when the guard is dropped"]
pub struct RwLockWriteGuard {
    holding: Holding,
}

impl RwLockWriteGuard {
    /// The guard of a writer that holds.
    pub(super) fn new(holding: Holding) -> RwLockWriteGuard {
        RwLockWriteGuard { holding }
    }

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
        // Boxed: a caller that awaits an acquisition then the release in one future
        // reserves room for the larger of the two while it waits.
        Box::pin(self.holding.release()).await
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
}

#[async_trait]
impl Hold for RwLockWriteGuard {
    fn fencing_token(&self) -> u64 {
        RwLockWriteGuard::fencing_token(self)
    }

    fn node(&self) -> &str {
        RwLockWriteGuard::node(self)
    }

    fn is_lost(&self) -> bool {
        RwLockWriteGuard::is_lost(self)
    }

    async fn lost(&self) -> Loss {
        RwLockWriteGuard::lost(self).await
    }

    fn loss_signal(&self) -> LossSignal {
        RwLockWriteGuard::loss_signal(self)
    }

    async fn release(self: Box<Self>) -> Result<()> {
        RwLockWriteGuard::release(*self).await
    }

    fn fenced(&self) -> Fenced {
        RwLockWriteGuard::fenced(self)
    }

    async fn revocation_requested(&self) -> Result<()> {
        RwLockWriteGuard::revocation_requested(self).await
    }
}
