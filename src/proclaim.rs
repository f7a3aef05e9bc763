//! What a leader advertises: [`Leadership::proclaim`], and how observers read it.
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

use tracing::{debug, info};

use crate::election::{Leadership, Participant};
use crate::error::{Error, Result};
use crate::fenced::Fence;
use crate::queue::MAX_DATA;
use crate::revoke::REVOKE;

/// Writes a proclamation tries while the node keeps changing between its read and its write
/// (someone else writes into it: a request to let go, a hint).
const ATTEMPTS: u32 = 3;

/// A contender node's data as its id and, if it proclaimed, what it proclaimed.
pub(crate) fn split(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == 0) {
        Some(end) => (&data[..end], Some(&data[end + 1..])),
        None => (data, None),
    }
}

/// The participant whose node is `node`, from its node's data.
pub(crate) fn participant(node: String, data: &[u8]) -> Participant {
    // A request to let go replaced what the candidate wrote: its id is not known.
    let data = if data == REVOKE { &[][..] } else { data };
    let (id, proclaimed) = split(data);
    Participant {
        id: String::from_utf8_lossy(id).into_owned(),
        node,
        proclaimed: proclaimed.map(<[u8]>::to_vec),
    }
}

impl Leadership {
    /// Advertises `data` (an address, an epoch) in the leader's node, fenced as
    /// [`fenced`](Self::fenced) writes are: written only while this leadership is intact.
    /// Observers see it in [`LeaderElection::leader`](crate::LeaderElection::leader) and
    /// [`participants`](crate::LeaderElection::participants) as
    /// [`Participant::proclaimed`], with the id unchanged. Each call replaces the last.
    ///
    /// The node's data becomes `<id>\0<data>`: the id stays first, so
    /// [`Participant::id`] is still the id (etcd's `Proclaim` replaces the value; here the
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
        let id = self.holding.id();
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
        let fence = self.holding.fence();
        let mut attempt = 1;
        loop {
            // Read first, and write only over what was read: a request to let go written
            // into the node meanwhile stays heard (the fence latches it), never overwritten
            // unseen.
            let version = self.read_own_node(&fence).await?;
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
                    info!(%node, bytes = data.len(), "proclaimed");
                    return Ok(());
                }
            }
        }
    }

    /// Reads the leader's node, notes a request to let go in it, and returns its version.
    /// Waits for no connection, as the fenced write after it does not.
    async fn read_own_node(&self, fence: &Fence) -> Result<i32> {
        let client = fence.connected()?;
        match client.get_data(fence.node()).await {
            Ok((data, stat)) => {
                fence.note(&data);
                Ok(stat.version)
            }
            Err(zookeeper_client::Error::NoNode) => Err(fence.lost()),
            Err(err) => Err(Error::at(fence.node(), err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_and_proclaimed_data_are_told_apart() {
        let plain = participant("/e/n".into(), b"node-a");
        assert_eq!((plain.id.as_str(), plain.proclaimed), ("node-a", None));
        let proclaimed = participant("/e/n".into(), b"node-a\0host:80\0x");
        assert_eq!(proclaimed.id, "node-a");
        assert_eq!(proclaimed.proclaimed.as_deref(), Some(&b"host:80\0x"[..]));
    }
}
