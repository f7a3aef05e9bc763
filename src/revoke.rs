//! Revocation, as Apache Curator does it: anyone may ask a holder to let go.
//!
//! Asking writes Curator's revoke marker, `__REVOKE__`, into the holder's node ([`revoke`],
//! [`Mutex::revoke_holders`](crate::Mutex::revoke_holders),
//! [`RwLock::revoke_holders`](crate::RwLock::revoke_holders)), exactly as Curator's
//! `Revoker.attemptRevoke` does; a holder learns of it from `revocation_requested()`
//! on its guard, lease or leadership, which resolves once the marker is in its node (also
//! when it was written before the call). A request to a node belongs to the node, heard by
//! every handle of it: once one handle saw the marker, every guard (re-entered ones too),
//! lease or leadership made for that node hears it, a leader's next term on the same node
//! included, even after the holder's own write (a proclamation, a [fenced](crate::Fenced)
//! write into its node: it reads the node first) replaced the marker. So it
//! works both ways: a Curator holder made revocable (`makeRevocable`) is called back when
//! zk-recipes asks, and a zk-recipes holder hears Curator's `Revoker`.
//!
//! Asking is a hint, never a loss: nothing else changes. The holder decides whether and when
//! to release; its hold stays trusted, its [fenced writes](crate::Fenced) still commit, and
//! its release deletes the node whatever was written into it. The marker replaces the
//! node's data, so the holder's id ([`Contender::id`](crate::Contender::id)) is no longer
//! shown once it was asked ([`Contender::revocation_requested`](crate::Contender) says so).

use tracing::{debug, info, info_span, Instrument};
use zookeeper_client::Error as Zk;

use crate::error::{Error, Result};
use crate::path;
use crate::queue::is_contender_name;
use crate::session::{retry, Session};

/// What Curator's `Revoker` writes into a holder's node (`LockInternals.REVOKE_MESSAGE`).
pub(crate) const REVOKE: &[u8] = b"__REVOKE__";

/// Asks the holder of `node` (the full path of a contender's node: a lock holder's, a
/// lease's, a leader's) to let go, by writing `__REVOKE__` into it as Curator's
/// `Revoker.attemptRevoke` does. `false` if there is no such node, or it is no contender's:
/// nobody was asked and nothing was written. A contender's node is told by what the queue
/// recipes create: an ephemeral node named `_c_<uuid>-` (Curator's protected prefix, ours
/// too) then `lock-`, `latch-`, `__READ__`, `__WRIT__` or `lease-` (ours and Curator's
/// names), or kazoo's `<32 hex digits>__lock__` or `__rlock__`, then the sequence number.
/// Anything else (a lock's own path, a group member, even one whose id ends in ten digits,
/// such as `member-0000000001`) is refused; and a member's id is never a contender's node
/// name ([`check_name`](crate::check_name) refuses it).
///
/// A holder learns of it from `revocation_requested()` on its guard, lease or leadership,
/// which resolves once the marker is in its node (also when it was written before the
/// call). So it works both ways with Curator: a Curator holder made revocable
/// (`makeRevocable`) is called back when zk-recipes asks, and a zk-recipes holder hears
/// Curator's `Revoker`. [`Mutex::revoke_holders`](crate::Mutex::revoke_holders) and
/// [`RwLock::revoke_holders`](crate::RwLock::revoke_holders) ask whoever holds a path now.
///
/// Asking is a hint, never a loss: nothing else changes. The holder decides whether and when
/// to release; its hold stays trusted, its [fenced writes](crate::Fenced) still commit, and
/// its release deletes the node whatever was written into it. The marker replaces the
/// node's data, so the holder's id is no longer shown once it was asked
/// ([`Contender::revocation_requested`](crate::Contender::revocation_requested) says so).
///
/// Does not wait for a connection that is down; sends the write again if the connection
/// broke with it in flight (it is idempotent), a few times at most.
///
/// # Notable errors
/// * [`Error::InvalidPath`] if `node` is malformed; nothing is sent.
/// * [`Error::NoAuth`] if the node's ACL denies writing it.
/// * [`Error::Disconnected`] at once if the connection is down: nothing was sent.
/// * [`Error::ConnectionLoss`] if the outcome stayed unknown.
/// * [`Error::Renewing`] while a new session is being made.
///
/// # Cancel safety
/// Cancel safe; the marker may or may not have been written.
pub async fn revoke(session: &Session, node: &str) -> Result<bool> {
    let node = path::validate_root(node)?;
    let span = info_span!("zk.revoke", node);
    async {
        let client = session.connected()?;
        let stat = retry(&client, || client.check_stat(node))
            .await
            .map_err(|err| at(node, err))?;
        if !stat.is_some_and(|stat| is_contender(node, stat.ephemeral_owner)) {
            debug!("no contender's node: nobody to ask");
            return Ok(false);
        }
        match retry(&client, || client.set_data(node, REVOKE, None)).await {
            Ok(_) => {
                info!("asked the holder to let go");
                Ok(true)
            }
            Err(Error::ZooKeeper(Zk::NoNode)) => Ok(false),
            Err(err) => Err(at(node, err)),
        }
    }
    .instrument(span)
    .await
}

/// Whether `node` is a contender's: ephemeral (`owner` is its session), and named as a
/// queue recipe names its contenders (ours, Curator's, kazoo's): see
/// [`is_contender_name`].
/// A lock's own path, a semaphore's `leases` folder, a group member (even one whose id
/// ends in ten digits) is none: writing the marker there would ask nobody and overwrite
/// data.
fn is_contender(node: &str, owner: i64) -> bool {
    let name = node.rsplit('/').next().unwrap_or_default();
    owner != 0 && is_contender_name(name)
}

/// A client error about `node` as the crate's error for it.
pub(crate) fn at(node: &str, err: Error) -> Error {
    match err {
        Error::ZooKeeper(err) => Error::at(node, err),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contender_is_ephemeral() {
        let node = "/r/_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-lock-0000000001";
        assert!(!is_contender(node, 0));
        assert!(is_contender(node, 7));
        assert!(!is_contender("/r/member-0000000001", 7));
    }
}
