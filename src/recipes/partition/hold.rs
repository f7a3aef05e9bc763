//! [`PartitionHold`]: the lock of one partition, handed to the member the assignment gives it
//! to, with the news that the assignment moved it away.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{mpsc, watch};

use crate::error::Result;
use crate::hold::Fenced;
use crate::hold::{Hold, LossSignal};
use crate::loss::Loss;
use crate::recipes::lock::MutexGuard;

/// What a hold tells its worker when it ends (released or dropped): the partition and the
/// token it was held with.
pub(crate) type Ended = (Arc<str>, u64);

/// Tells the worker, when dropped, that the hold ended.
#[derive(Debug)]
struct Notice {
    ended: mpsc::UnboundedSender<Ended>,
    name: Arc<str>,
    token: u64,
}

impl Drop for Notice {
    fn drop(&mut self) {
        // A worker that is gone needs no news.
        let _ = self.ended.send((self.name.clone(), self.token));
    }
}

/// One partition, held: proof that this member, and no other, may work it (the
/// [`MutexGuard`] of the partition's lock `<path>/partitions/<name>`), for as long as the
/// hold can be trusted. Returned by [`Worker::next_partition`](crate::Worker::next_partition).
///
/// Its [`Hold`] methods mean what [`MutexGuard`]'s do: [`fencing_token`](Self::fencing_token)
/// grows with every new owner of the partition, [`lost`](Self::lost) resolves once the hold
/// can no longer be trusted (the session expired or was suspended, the lock node was deleted,
/// the servers have not confirmed the session for a session timeout), [`fenced`](Self::fenced)
/// writes commit only while it is intact. Work on the partition stops when the hold is lost.
///
/// **Moved.** When the assignment gives the partition to another member (one joined, or this
/// one is leaving), [`moved`](Self::moved) resolves (and so does
/// [`revocation_requested`](Self::revocation_requested)) as soon as the next owner waits in
/// the partition's lock queue (or after a second if none comes: its view of the group may
/// trail, or it may have died): finish the unit of work under way, then
/// [`release`](Self::release). The next owner holds as soon as the node is gone, on one
/// notification, as a mutex hands off. A partition that does not move is never asked to.
///
/// Releasing or dropping the hold ends it (dropping releases in the background). If the
/// partition is still this member's, the worker takes its lock again and hands it out anew
/// through [`next_partition`](crate::Worker::next_partition) (with a greater token): so a lost
/// hold is given back after it is released, once the lock can be held again.
#[derive(Debug)]
#[must_use = "the partition is released when the hold is dropped"]
pub struct PartitionHold {
    guard: MutexGuard,
    name: Arc<str>,
    moved: watch::Receiver<bool>,
    notice: Notice,
}

impl PartitionHold {
    /// A hold of partition `name` by `guard`; `moved` turns true once the assignment moved
    /// it away; `ended` hears when the hold ends.
    pub(crate) fn new(
        guard: MutexGuard,
        name: Arc<str>,
        moved: watch::Receiver<bool>,
        ended: mpsc::UnboundedSender<Ended>,
    ) -> PartitionHold {
        let notice = Notice {
            ended,
            name: name.clone(),
            token: guard.fencing_token(),
        };
        PartitionHold {
            guard,
            name,
            moved,
            notice,
        }
    }

    /// The partition's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the assignment moved the partition away (see [`moved`](Self::moved)).
    pub fn is_moved(&self) -> bool {
        *self.moved.borrow() || self.moved.has_changed().is_err()
    }

    /// Resolves once the assignment moved the partition away from this member: another
    /// member is to work it (after a join, or because this member is leaving or its worker
    /// ended). Once moved, it stays moved, even if the assignment gives the partition back
    /// before the hold is released. Finish, then [`release`](Self::release).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn moved(&self) {
        let mut moved = self.moved.clone();
        let _ = moved.wait_for(|moved| *moved).await;
    }

    /// The fencing token: the zxid that created the partition's lock node. It is greater for
    /// every later owner of the partition.
    pub fn fencing_token(&self) -> u64 {
        self.guard.fencing_token()
    }

    /// Full path of the partition's lock node.
    pub fn node(&self) -> &str {
        self.guard.node()
    }

    /// Whether the hold can no longer be trusted; as [`MutexGuard::is_lost`].
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Resolves once the hold can no longer be trusted; says why. As [`MutexGuard::lost`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        self.guard.lost().await
    }

    /// The loss of this hold as an owned, cloneable value: hand it to a task that watches
    /// the hold while another works under it; see [`LossSignal`].
    pub fn loss_signal(&self) -> LossSignal {
        self.guard.loss_signal()
    }

    /// Releases the partition and returns once its lock node is gone; as
    /// [`MutexGuard::release`]. The worker then takes the partition again if it is still
    /// this member's.
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if the hold was lost before the release.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the servers refuse the delete.
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished release goes on in the background.
    pub async fn release(self) -> Result<()> {
        let PartitionHold { guard, notice, .. } = self;
        let released = guard.release().await;
        drop(notice);
        released
    }

    /// A transaction that commits only while this hold is intact; see [`Fenced`].
    pub fn fenced(&self) -> Fenced {
        self.guard.fenced()
    }

    /// Resolves once the member should let go: the assignment moved the partition away
    /// ([`moved`](Self::moved)), or someone asked the holder of its lock to
    /// ([`revoke`](crate::revoke)). A partition released on a revocation that is still this
    /// member's is taken again at the end of its lock's queue.
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if the hold ends first.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the lock node's ACL no longer lets the
    ///   session read it.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn revocation_requested(&self) -> Result<()> {
        tokio::select! {
            biased;
            () = self.moved() => Ok(()),
            asked = self.guard.revocation_requested() => asked,
        }
    }
}

#[async_trait]
impl Hold for PartitionHold {
    fn fencing_token(&self) -> u64 {
        PartitionHold::fencing_token(self)
    }

    fn node(&self) -> &str {
        PartitionHold::node(self)
    }

    fn is_lost(&self) -> bool {
        PartitionHold::is_lost(self)
    }

    async fn lost(&self) -> Loss {
        PartitionHold::lost(self).await
    }

    fn loss_signal(&self) -> LossSignal {
        PartitionHold::loss_signal(self)
    }

    async fn release(self: Box<Self>) -> Result<()> {
        PartitionHold::release(*self).await
    }

    fn fenced(&self) -> Fenced {
        PartitionHold::fenced(self)
    }

    async fn revocation_requested(&self) -> Result<()> {
        PartitionHold::revocation_requested(self).await
    }
}
