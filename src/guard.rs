//! What every guard on a held queue node offers: its fencing token, its node, whether it
//! is lost, and its release.

/// The methods a guard shares with every other guard on a [`Holding`](crate::queue::Holding) (kept in its field
/// `holding`): `fencing_token`, `node`, `is_lost`, `lost` and `release`. `$what` names what
/// it holds in their docs (`"lock"`, `"lease"`).
macro_rules! guard_methods {
    ($what:literal) => {
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
        pub fn is_lost(&self) -> bool {
            self.holding.trust().is_lost()
        }

        #[doc = concat!("Resolves once the ", $what, " can no longer be trusted: the session")]
        #[doc = "expired or was closed, the connection was suspended, the node was deleted, or"]
        #[doc = "the servers have not confirmed the session for a session timeout"]
        #[doc = "([`Loss::Lapsed`](crate::Loss::Lapsed)); the first look after a pause sees it;"]
        #[doc = "says which."]
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
        #[doc = "* [`Error::LockLost`](crate::Error::LockLost) if it was lost before the release"]
        #[doc = "  (what was done under it may have overlapped with another holder); the node,"]
        #[doc = "  if still there, is deleted all the same."]
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
    };
}
pub(crate) use guard_methods;
