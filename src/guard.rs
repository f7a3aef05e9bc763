//! [`Hold`]: what everything held offers — a [`MutexGuard`](crate::MutexGuard), an
//! [`RwLockReadGuard`](crate::RwLockReadGuard) or [`RwLockWriteGuard`](crate::RwLockWriteGuard),
//! a [`Lease`](crate::Lease), a [`Leadership`](crate::Leadership): its fencing token, its
//! node, whether it is lost, and its release.
//!
//! Each of those types has the same methods of its own too, so calling them needs no
//! import of the trait; the trait is for code that treats them alike (`Box<dyn Hold>`,
//! `impl Hold`).

use async_trait::async_trait;

use crate::error::Result;
use crate::trust::Loss;

/// Something held in ZooKeeper: a lock, a lease or a leadership, on a node of its own.
///
/// Implemented by [`MutexGuard`](crate::MutexGuard), [`RwLockReadGuard`](crate::RwLockReadGuard),
/// [`RwLockWriteGuard`](crate::RwLockWriteGuard), [`Lease`](crate::Lease) and
/// [`Leadership`](crate::Leadership); returned by
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

/// Makes `$guard` a [`Hold`], with the same methods of its own (`fencing_token`, `node`,
/// `is_lost`, `lost`, `release`) so that callers need not import the trait. The guard keeps
/// what it holds in its field `holding`, which offers `token()`, `node()`, `trust()` and
/// `release(self)`. `$what` names what it holds in the docs (`"lock"`, `"lease"`).
macro_rules! hold {
    ($guard:ty, $what:literal) => {
        impl $guard {
            #[doc = concat!("The fencing token: the zxid that created the ", $what, "'s node. ")]
            #[doc = "It is greater for every node created later, so a resource that remembers"]
            #[doc = "the largest token it has accepted can refuse a stale holder."]
            pub fn fencing_token(&self) -> u64 {
                self.holding.token()
            }

            #[doc = concat!("Full path of the ", $what, "'s znode.")]
            pub fn node(&self) -> &str {
                self.holding.node()
            }

            #[doc = concat!("Whether the ", $what, " can no longer be trusted (see [`lost`](Self::lost)).")]
            #[doc = "Deletion of the node by someone else is noticed once it is watched (a"]
            #[doc = "lock's or a lease's from 10 ms after it was acquired, or once `lost()` has"]
            #[doc = "been awaited; a leadership's at once); expiry, suspension and closing from"]
            #[doc = "the start; a session the servers have not confirmed in"]
            #[doc = "time ([`Loss::Lapsed`](crate::Loss::Lapsed)) at the first look, read from"]
            #[doc = "the clock, even right after the process wakes from a pause."]
            pub fn is_lost(&self) -> bool {
                self.holding.trust().is_lost()
            }

            #[doc = concat!("Resolves once the ", $what, " can no longer be trusted: the session")]
            #[doc = "expired or was closed, the connection was suspended, the node was deleted, or"]
            #[doc = "the servers have not confirmed the session for a session timeout"]
            #[doc = "([`Loss::Lapsed`](crate::Loss::Lapsed): they may have expired it); says which."]
            #[doc = ""]
            #[doc = "# Cancel safety"]
            #[doc = "Cancel safe."]
            pub async fn lost(&self) -> $crate::trust::Loss {
                self.holding.trust().lost().await
            }

            #[doc = concat!("Releases the ", $what, " and returns once its node is gone: deleted,")]
            #[doc = "or gone with its session. While the connection is down it waits for it to come"]
            #[doc = "back, at most until the servers would have expired the session (1.5 session"]
            #[doc = "timeouts); it never fails for a connection that is down."]
            #[doc = ""]
            #[doc = "# Notable errors"]
            #[doc = concat!("* [`Error::Lost`](crate::Error::Lost) if the ", $what, " was lost before")]
            #[doc = "  the release (what was done under it may have overlapped with another"]
            #[doc = "  holder); the node, if still there, is deleted all the same; if the session"]
            #[doc = "  is gone this returns at once."]
            #[doc = "* [`Error::NoAuth`](crate::Error::NoAuth) if the servers refuse the delete: the"]
            #[doc = "  node stays until the session ends."]
            #[doc = ""]
            #[doc = "# Cancel safety"]
            #[doc = "Cancel safe: an unfinished release goes on in the background until the node"]
            #[doc = "is gone or its session is."]
            pub async fn release(self) -> $crate::error::Result<()> {
                // Boxed: a caller that awaits an acquisition then the release in one future
                // reserves room for the larger of the two while it waits.
                Box::pin(self.holding.release()).await
            }
        }

        impl $guard {
            $crate::fenced::fence_methods!();
        }

        #[async_trait::async_trait]
        impl $crate::guard::Hold for $guard {
            fn fencing_token(&self) -> u64 {
                <$guard>::fencing_token(self)
            }

            fn node(&self) -> &str {
                <$guard>::node(self)
            }

            fn is_lost(&self) -> bool {
                <$guard>::is_lost(self)
            }

            async fn lost(&self) -> $crate::trust::Loss {
                <$guard>::lost(self).await
            }

            async fn release(self: Box<Self>) -> $crate::error::Result<()> {
                <$guard>::release(*self).await
            }

            fn fenced(&self) -> $crate::Fenced {
                <$guard>::fenced(self)
            }

            async fn revocation_requested(&self) -> $crate::error::Result<()> {
                <$guard>::revocation_requested(self).await
            }
        }
    };
}
pub(crate) use hold;

/// A hold as a trait object.
pub(crate) fn boxed(hold: impl Hold + 'static) -> Box<dyn Hold> {
    Box::new(hold)
}
