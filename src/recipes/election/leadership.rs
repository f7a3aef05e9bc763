//! A leadership: what a leading candidate holds in one term; what a leader advertises
//! ([`Leadership::proclaim`]), and how observers read it.
//!
//! A candidate's node holds its id, as Curator's `LeaderLatch` has it (its participant id
//! is the node's data). A leader that proclaims keeps its id and adds what it proclaims
//! after a NUL: the node's data becomes `<id>\0<proclaimed>`, so
//! [`Participant::id`](crate::Participant::id) stays the id and
//! [`Participant::proclaimed`](crate::Participant::proclaimed) is the rest (etcd's
//! `Proclaim` replaces the value; here the id is kept, which is why ids hold no NUL).
//! Curator's observers see the whole data as the id. A proclamation lasts for the term:
//! a candidate that joins again (after an expiry, or a term that ended) starts with its id
//! alone.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{watch, Notify};
use tracing::debug;

use crate::error::{Error, Result};
use crate::hold::{Core, Fenced, Hold, LossSignal};
use crate::loss::Loss;
use crate::queue::MAX_DATA;

/// Writes a proclamation tries while the node keeps changing between its read and its write
/// (someone else writes into it: a request to let go, a hint).
const ATTEMPTS: u32 = 3;

/// Leadership of an election, held while the candidate's node is first and trusted.
///
/// [`release`](Self::release) resigns the candidate that leads (as
/// [`Candidate::resign`](crate::Candidate::resign)): it leaves the election.
#[derive(Clone, Debug)]
pub struct Leadership {
    /// The hold core of the leader's node in this term (the campaign owns its holding).
    core: Core,
    /// The way out of the election.
    exit: Exit,
    /// The id the leader joined with.
    id: Arc<str>,
}

impl Leadership {
    /// The leadership of a term held with `core`, left through `exit`.
    pub(super) fn new(core: Core, exit: Exit, id: Arc<str>) -> Leadership {
        Leadership { core, exit, id }
    }

    /// Resigns the candidate; [`Error::Lost`] if this term was lost before.
    async fn resign(self) -> Result<()> {
        let lost = self.core.is_lost();
        match (self.exit.leave().await, lost) {
            (Ok(()) | Err(Error::Lost { .. }), true) => Err(self.core.lost_error()),
            (left, _) => left,
        }
    }

    /// The fencing token: the zxid that created the leadership's node. It is greater for every node
    /// created later, so a resource that remembers the largest token it has accepted can refuse a
    /// stale holder.
    pub fn fencing_token(&self) -> u64 {
        self.core.token()
    }

    /// Full path of the leadership's znode.
    pub fn node(&self) -> &str {
        self.core.node()
    }

    /// Whether the leadership can no longer be trusted (see [`lost`](Self::lost)). Deletion of the
    /// node by someone else is noticed once it is watched (a lock's or a lease's from 10 ms after
    /// it was acquired, or once `lost()` has been awaited; a leadership's at once); expiry,
    /// suspension and closing from the start; a session the servers have not confirmed in time
    /// ([`Loss::Lapsed`](crate::Loss::Lapsed)) at the first look, read from the clock, even right
    /// after the process wakes from a pause.
    pub fn is_lost(&self) -> bool {
        self.core.is_lost()
    }

    /// Resolves once the leadership can no longer be trusted: the session expired or was closed,
    /// the connection was suspended, the node was deleted, or the servers have not confirmed the
    /// session for a session timeout ([`Loss::Lapsed`](crate::Loss::Lapsed): they may have expired
    /// it); says which.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        self.core.lost().await
    }

    /// The loss of this hold as an owned, cloneable value: hand it to a task that watches
    /// the hold while another works under it; see [`LossSignal`](crate::LossSignal).
    pub fn loss_signal(&self) -> LossSignal {
        self.core.loss_signal()
    }

    /// Releases the leadership and returns once its node is gone: deleted, or gone with its
    /// session. While the connection is down it waits for it to come back, at most until the
    /// servers would have expired the session (1.5 session timeouts); it never fails for a
    /// connection that is down.
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if the leadership was lost before the release (what
    ///   was done under it may have overlapped with another holder); the node, if still there, is
    ///   deleted all the same; if the session is gone this returns at once.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the servers refuse the delete: the node stays
    ///   until the session ends.
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished release goes on in the background until the node is gone or its
    /// session is.
    pub async fn release(self) -> Result<()> {
        // Boxed: a caller that awaits an acquisition then the release in one future
        // reserves room for the larger of the two while it waits.
        Box::pin(self.resign()).await
    }

    /// A transaction that commits only while this hold is intact; see [`Fenced`](crate::Fenced).
    pub fn fenced(&self) -> Fenced {
        self.core.fenced()
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
        self.core.revocation_requested().await
    }

    /// The term: the zxid that created the leader's node, greater for every later leader.
    /// Use it as a fencing token (it is [`fencing_token`](Self::fencing_token)).
    pub fn term(&self) -> u64 {
        self.core.token()
    }

    /// Advertises `data` (an address, an epoch) in the leader's node, fenced as
    /// [`fenced`](Self::fenced) writes are: written only while this leadership is intact.
    /// Observers see it in [`LeaderElection::leader`](crate::LeaderElection::leader) and
    /// [`participants`](crate::LeaderElection::participants) as
    /// [`Participant::proclaimed`](crate::Participant::proclaimed), with the id unchanged. Each call replaces the last.
    ///
    /// The node's data becomes `<id>\0<data>`: the id stays first, so
    /// [`Participant::id`](crate::Participant::id) is still the id (etcd's `Proclaim` replaces the value; here the
    /// id is kept, which is why ids hold no NUL). Curator's `LeaderLatch` observers see the
    /// whole data as the id. A proclamation lasts for the term: a candidate that joins again
    /// (after an expiry, or a term that ended) starts with its id alone. It writes over what
    /// it read of the node: a request to let go found there (Curator's marker) stays heard
    /// by [`revocation_requested`](Self::revocation_requested) after the node is rewritten.
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if the leadership is over or reads as lost: nothing was
    ///   written.
    /// * [`Error::InvalidArgument`] if the id and `data` together are larger than a node
    ///   holds (960 KiB here): nothing was sent.
    /// * [`Error::FencedOpFailed`] if others kept writing into the node between its read and
    ///   its write, three times: nothing was written.
    /// * [`Error::NoAuth`] if the node's ACL no longer lets the session read or write it.
    /// * [`Error::Disconnected`] or [`Error::ConnectionLoss`] as
    ///   [`Fenced::commit`](crate::Fenced::commit).
    ///
    /// # Cancel safety
    /// As [`Fenced::commit`](crate::Fenced::commit): a dropped proclamation may or may not be written.
    pub async fn proclaim(&self, data: &[u8]) -> Result<()> {
        let id = &self.id;
        let mut proclaimed = Vec::with_capacity(id.len() + 1 + data.len());
        proclaimed.extend_from_slice(id.as_bytes());
        proclaimed.push(0);
        proclaimed.extend_from_slice(data);
        if proclaimed.len() > MAX_DATA {
            return Err(Error::InvalidArgument(format!(
                "the id and the proclaimed data take {} bytes; a node holds at most {MAX_DATA}",
                proclaimed.len()
            )));
        }
        let node = self.node().to_owned();
        let fence = &self.core;
        let mut attempt = 1;
        loop {
            // Read first, and write only over what was read: a request to let go written
            // into the node meanwhile stays heard (the fence latches it), never overwritten
            // unseen.
            let version = fence.read_own_node().await?;
            let written = fence
                .fenced()
                .set_data(&node, &proclaimed, Some(version))
                .commit()
                .await;
            match written {
                Err(Error::FencedOpFailed {
                    reason: zookeeper_client::Error::BadVersion,
                    ..
                }) if attempt < ATTEMPTS => {
                    debug!(attempt, "the node changed meanwhile");
                    attempt += 1;
                }
                written => {
                    written?;
                    debug!(%node, bytes = data.len(), "proclaimed");
                    return Ok(());
                }
            }
        }
    }
}

#[async_trait]
impl Hold for Leadership {
    fn fencing_token(&self) -> u64 {
        Leadership::fencing_token(self)
    }

    fn node(&self) -> &str {
        Leadership::node(self)
    }

    fn is_lost(&self) -> bool {
        Leadership::is_lost(self)
    }

    async fn lost(&self) -> Loss {
        Leadership::lost(self).await
    }

    fn loss_signal(&self) -> LossSignal {
        Leadership::loss_signal(self)
    }

    async fn release(self: Box<Self>) -> Result<()> {
        Leadership::release(*self).await
    }

    fn fenced(&self) -> Fenced {
        Leadership::fenced(self)
    }

    async fn revocation_requested(&self) -> Result<()> {
        Leadership::revocation_requested(self).await
    }
}

/// The way out of an election, shared by a candidate and its leaderships: stops the
/// campaign and waits for its end (its node gone).
#[derive(Clone, Debug)]
pub(super) struct Exit {
    pub(super) stop: Arc<Notify>,
    pub(super) ended: watch::Receiver<Option<Result<()>>>,
}

impl Exit {
    /// Stops the campaign.
    pub(super) fn stop(&self) {
        self.stop.notify_one();
    }

    /// Stops the campaign and returns how it ended.
    pub(super) async fn leave(mut self) -> Result<()> {
        self.stop();
        match self.ended.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone().unwrap_or(Err(Error::Closed)),
            // The campaign's task ended without a word: its runtime shut down.
            Err(_) => Err(Error::Closed),
        }
    }
}
