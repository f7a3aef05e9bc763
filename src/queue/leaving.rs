//! Leaving the queue: the node is deleted whatever was written into it, now if the
//! connection is up, else in the background; a first contender that had waited marks the
//! root as it goes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::{debug, debug_span, warn, Instrument};
use uuid::Uuid;
use zookeeper_client::{Acls, Client, CreateMode, MultiWriteError};

use super::entering::find_own;
use super::Contender;
use crate::error::{Error, Result};
use crate::path;
use crate::session::{connected_now, reconnected, retry, Session};

/// How long a waiter that gives up may spend deleting its node before leaving that to the
/// background.
const GIVE_UP_GRACE: Duration = Duration::from_secs(1);

/// What the root's hand-off mark says before the zxid that created the contender that
/// left while first. Written only by this crate, into the root's data; a root whose data
/// is anything else simply has no mark.
///
/// The mark names the node by its creation zxid, not its sequence number: zxids only grow
/// (64 bits), while sequence numbers wrap after 2^31 creations, and a mark stays in the
/// root until the next one, however old it gets.
const MARK: &str = "zk-recipes first left, created at zxid ";

/// The creation zxid of the node a root's data marks as having left while first.
fn first_left(data: &[u8]) -> Option<i64> {
    std::str::from_utf8(data)
        .ok()?
        .strip_prefix(MARK)?
        .parse()
        .ok()
}

/// Whether a root's data `data` says that every node up to the blocker created at zxid
/// `czxid` is gone: the mark's node was created at or after it, and was first when it left.
pub(super) fn covers(data: &[u8], czxid: i64) -> bool {
    first_left(data).is_some_and(|mark| mark >= czxid)
}

/// How a node left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Left {
    /// We deleted it.
    Deleted,
    /// It was gone already: deleted by someone, or ended with its session.
    AlreadyGone,
}

impl Contender {
    /// Deletes the node and waits for the server to confirm; never waits for a connection.
    ///
    /// # Notable errors
    /// * [`Error::ConnectionLoss`] if the connection is down or broke during the delete: the
    ///   node is then deleted in the background (this returns at once).
    /// * [`Error::Closed`] / [`Error::SessionExpired`] if the session ended (so did the node).
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished delete is finished in the background.
    pub(crate) async fn leave(mut self) -> Result<Left> {
        let client = match self.client() {
            Ok(client) => client,
            Err(err) => {
                self.armed = false;
                return Err(err);
            }
        };
        connected_now(&client)?;
        let (signal, mark) = (self.signals(), self.mark());
        let span = debug_span!("zk.queue.leave", node = %self.node, signal, ?mark);
        let removed = remove(&client, &self.node, signal, mark)
            .instrument(span)
            .await;
        match removed {
            Ok(()) => {
                self.armed = false;
                Ok(Left::Deleted)
            }
            Err(zookeeper_client::Error::NoNode) => {
                self.armed = false;
                debug!(node = %self.node, "node was already gone");
                Ok(Left::AlreadyGone)
            }
            Err(err) => {
                let err = Error::from(err);
                if matches!(err, Error::SessionExpired | Error::Closed) {
                    self.armed = false;
                }
                Err(err)
            }
        }
    }

    /// Leaves the queue after waiting in vain: deletes the node at once while connected,
    /// else (or if that takes over a second) in the background.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`leave`](Self::leave).
    pub(crate) async fn give_up(self) {
        match tokio::time::timeout(GIVE_UP_GRACE, self.leave()).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => debug!(%err, "leaving the queue now failed; in the background"),
            Err(_) => debug!("leaving the queue is slow; in the background"),
        }
    }
}

impl Contender {
    /// The mark to leave in the root when leaving now: the node's creation zxid if it is an
    /// exclusive contender that entered behind others and is first.
    fn mark(&self) -> Option<i64> {
        (self.marks && self.is_first()).then_some(self.czxid)
    }

    /// Whether leaving now must signal the successor: an exclusive contender that is first,
    /// whether it entered first or not (a successor that saw it first also waits for the
    /// signal: only the transaction that makes it cannot also delete the successor's node).
    fn signals(&self) -> bool {
        self.exclusive && self.is_first()
    }
}

impl Drop for Contender {
    fn drop(&mut self) {
        if self.armed {
            let (signal, mark) = (self.signals(), self.mark());
            spawn_removal(
                self.session.clone(),
                self.client.clone(),
                Removal::Node(std::mem::take(&mut self.node), signal, mark),
            );
        }
    }
}

/// Deletes `node`, whatever its version, in one transaction with what tells its successors
/// that it left while first: with `signal`, its left-first signal created and deleted again
/// first, so that its successor hears it ([`handoff`](super::handoff)); with `mark` (the
/// node's creation zxid), the root's hand-off mark after, so that successors that look know
/// that no one is ahead of them any more (see [`covers`]). Whatever of these cannot be
/// written (someone made the signal's path; the root's ACL) is left out, and the node is
/// deleted all the same.
async fn remove(
    client: &Client,
    node: &str,
    mut signal: bool,
    mut mark: Option<i64>,
) -> std::result::Result<(), zookeeper_client::Error> {
    loop {
        let failed = match remove_telling(client, node, signal, mark).await {
            Err(MultiWriteError::OperationFailed { index, source }) => (index, source),
            done => return done.map_err(zookeeper_client::Error::from),
        };
        // The operations: signal (two, if any), node, mark (if any).
        match (failed, signal) {
            ((0..=1, source), true) => {
                debug!(%node, %source, "cannot signal the successor; leaving that out");
                signal = false;
            }
            ((index, source), _) if mark.is_some() && index == usize::from(signal) * 2 + 1 => {
                debug!(%node, %source, "cannot mark the root; leaving that out");
                mark = None;
            }
            ((_, source), _) => return Err(source),
        }
    }
}

/// Deletes `node` in one transaction: after creating and deleting its left-first signal if
/// `signal`, before writing `mark` into its root if given; a plain delete if neither.
async fn remove_telling(
    client: &Client,
    node: &str,
    signal: bool,
    mark: Option<i64>,
) -> std::result::Result<(), MultiWriteError> {
    let root_and_mark = mark.zip(node.rsplit_once('/'));
    if !signal && root_and_mark.is_none() {
        return Ok(client.delete(node, None).await?);
    }
    let mut transaction = client.new_multi_writer();
    if signal {
        let signal = super::handoff::signal(node);
        // It exists for no one to see: its ACL never matters.
        let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        transaction.add_create(&signal, &[], &options)?;
        transaction.add_delete(&signal, None)?;
    }
    transaction.add_delete(node, None)?;
    if let Some((czxid, (root, _))) = root_and_mark {
        transaction.add_set_data(root, format!("{MARK}{czxid}").as_bytes(), None)?;
    }
    transaction.commit().await.map(drop)
}

/// What a background removal deletes.
pub(super) enum Removal {
    /// A node of ours, whether to signal its successor, and the mark to leave in the root,
    /// if any (see [`remove`]).
    Node(String, bool, Option<i64>),
    /// The node named with this uuid under the root, if a create made it.
    ByUuid { root: Arc<str>, uuid: Uuid },
}

/// Deletes a node of ours after its owner went away, once connected, until it is gone or
/// its session is (then the servers delete it). Closing the session ends it at once, so
/// that it never keeps a closed session's client alive while waiting for a connection.
pub(super) fn spawn_removal(session: Session, client: Weak<Client>, removal: Removal) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        warn!("no tokio runtime to delete a node; it goes when the session ends");
        return;
    };
    runtime.spawn(async move {
        tokio::select! {
            () = session.closed() => debug!("session closed: its nodes go with it"),
            () = remove_in_background(client, removal) => {}
        }
    });
}

async fn remove_in_background(client: Weak<Client>, removal: Removal) {
    let Some(client) = client.upgrade() else {
        return; // the session was closed or replaced: the node went with it
    };
    let (node, signal, mark) = match removal {
        Removal::Node(node, signal, mark) => (node, signal, mark),
        Removal::ByUuid { root, uuid } => match find_by_uuid(&client, &root, &uuid).await {
            Some(node) => (node, false, None),
            None => return,
        },
    };
    let span = debug_span!("zk.queue.remove", %node, ?mark);
    async {
        if reconnected(&client).await.is_err() {
            return;
        }
        match retry(&client, || remove(&client, &node, signal, mark)).await {
            Ok(()) => debug!("deleted in the background"),
            Err(Error::ZooKeeper(zookeeper_client::Error::NoNode))
            | Err(Error::SessionExpired | Error::Closed) => {}
            Err(err) => warn!(%err, "could not delete; it goes when the session ends"),
        }
    }
    .instrument(span)
    .await
}

async fn find_by_uuid(client: &Client, root: &str, uuid: &Uuid) -> Option<String> {
    reconnected(client).await.ok()?;
    retry(client, || client.sync(root)).await.ok()?;
    let children = retry(client, || client.list_children(root)).await.ok()?;
    find_own(&children, uuid).map(|name| path::join(root, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_its_own_mark() {
        assert_eq!(first_left(format!("{MARK}42").as_bytes()), Some(42));
        assert_eq!(first_left(b""), None);
        assert_eq!(first_left(b"__REVOKE__"), None);
        assert_eq!(first_left(b"10.0.0.1"), None);
        assert_eq!(first_left(format!("{MARK}x").as_bytes()), None);
    }

    /// A mark stays in the root until the next one; after 2^31 creations under one root a
    /// sequence number compared as a serial number read an old mark as a new one.
    #[test]
    fn a_stale_mark_never_covers_a_later_blocker() {
        let old_czxid = 1_000_i64;
        let mark = format!("{MARK}{old_czxid}");
        let later_czxid = old_czxid + (1 << 31) + 6;
        assert!(!covers(mark.as_bytes(), later_czxid));
        assert!(covers(mark.as_bytes(), old_czxid));
        assert!(covers(mark.as_bytes(), old_czxid - 1));
    }
}
