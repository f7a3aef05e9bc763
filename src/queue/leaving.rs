//! Leaving the queue: the node is deleted whatever was written into it, and nothing of
//! ours is given up while its session lives: a removal keeps trying until the node is gone
//! or its session is, on the session's runtime, whoever dropped the node and wherever. A
//! first contender that had waited marks the root as it goes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::oneshot;
use tracing::{debug, debug_span, warn, Instrument};
use uuid::Uuid;
use zookeeper_client::{Acls, Client, CreateMode, MultiWriteError};

use super::entering::find_own;
use super::Contender;
use crate::error::{outcome_unknown, Error, Result};
use crate::path;
use crate::session::{reconnected, Session};

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
    /// It went with its session: the session ended, or the connection stayed down for
    /// longer than the servers keep a session they do not hear from (see
    /// [`SESSION_GONE`]).
    WithSession,
}

/// How long after a removal starts waiting for a connection it takes the node to have
/// gone with its session, in session timeouts (negotiated): the servers expire a session
/// a timeout after they last heard from it, rounded up to their next tick (at most half a
/// timeout, since a timeout is at least two ticks). The removal itself goes on in the
/// background until the node is gone or the client learns that its session ended.
const SESSION_GONE: (u32, u32) = (3, 2);

/// The pause after a removal whose outcome was unknown; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(2);

impl Contender {
    /// Deletes the node, whatever was written into it, and waits until it is gone: deleted
    /// now, or once the connection is back, or gone with its session. Never fails for a
    /// connection that is down: the delete is sent again, with back-off, until the node is
    /// gone or its session is over.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the servers refuse the delete: the node may still be there
    ///   (it goes with the session).
    ///
    /// # Cancel safety
    /// Cancel safe: the removal goes on in the background.
    pub(crate) async fn leave(mut self) -> Result<Left> {
        self.armed = false;
        let removal = Removal::Node(std::mem::take(&mut self.node), self.signals(), self.mark());
        spawn_removal(&self.session, self.client.clone(), removal).await
    }

    /// Leaves the queue after waiting in vain: waits at most a second for the node to be
    /// gone; the removal goes on in the background after that.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`leave`](Self::leave).
    pub(crate) async fn give_up(self) {
        match tokio::time::timeout(GIVE_UP_GRACE, self.leave()).await {
            Ok(Ok(left)) => debug!(?left, "left the queue"),
            Ok(Err(err)) => {
                warn!(%err, "could not leave the queue; the node goes with the session")
            }
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
            let removal = Removal::Node(std::mem::take(&mut self.node), signal, mark);
            drop(spawn_removal(&self.session, self.client.clone(), removal));
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

/// What a removal deletes.
#[derive(Debug)]
pub(super) enum Removal {
    /// A node of ours, whether to signal its successor, and the mark to leave in the root,
    /// if any (see [`remove`]).
    Node(String, bool, Option<i64>),
    /// The node named with this uuid under the root, if a create made it.
    ByUuid { root: Arc<str>, uuid: Uuid },
}

/// Starts removing a node of ours, on the session's runtime (from any thread, inside a
/// runtime or not). It keeps trying, with back-off, until the node is gone or its session
/// is (then the servers delete it); closing the session ends it at once. The returned
/// future says how the node left as soon as that is known; dropping it leaves the removal
/// running.
pub(super) fn spawn_removal(
    session: &Session,
    client: Weak<Client>,
    removal: Removal,
) -> impl std::future::Future<Output = Result<Left>> {
    let (settle, settled) = oneshot::channel();
    let closing = session.clone();
    let span = debug_span!("zk.queue.remove", ?removal);
    session.spawn(
        async move {
            let mut settle = Some(settle);
            let left = tokio::select! {
                biased;
                () = closing.closed() => Ok(Left::WithSession),
                left = remove_until_gone(client, removal, &mut settle) => left,
            };
            match &left {
                Ok(left) => debug!(?left, "removed"),
                Err(err) => warn!(%err, "cannot delete; it goes when the session ends"),
            }
            if let Some(settle) = settle {
                let _ = settle.send(left);
            }
        }
        .instrument(span),
    );
    // A removal whose runtime is gone went with its session, whose client ran there too.
    async move { settled.await.unwrap_or(Ok(Left::WithSession)) }
}

/// Deletes the node `removal` names until it is gone or its session is.
async fn remove_until_gone(
    client: Weak<Client>,
    removal: Removal,
    settle: &mut Option<oneshot::Sender<Result<Left>>>,
) -> Result<Left> {
    let Some(client) = client.upgrade() else {
        return Ok(Left::WithSession); // the session was closed or replaced
    };
    let (node, signal, mark) = match removal {
        Removal::Node(node, signal, mark) => (node, signal, mark),
        Removal::ByUuid { root, uuid } => match find_by_uuid(&client, &root, &uuid, settle).await {
            Some(Ok(node)) => (node, false, None),
            Some(Err(left)) => return Ok(left),
            None => return Ok(Left::AlreadyGone),
        },
    };
    let mut pause = FIRST_PAUSE;
    loop {
        if !connected(&client, settle).await {
            return Ok(Left::WithSession);
        }
        match remove(&client, &node, signal, mark).await {
            Ok(()) => return Ok(Left::Deleted),
            Err(zookeeper_client::Error::NoNode) => return Ok(Left::AlreadyGone),
            Err(err) if outcome_unknown(&err) => {
                debug!(%err, ?pause, "outcome of the delete unknown; sending it again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(err) => {
                return match Error::at(&node, err) {
                    Error::SessionExpired | Error::Closed => Ok(Left::WithSession),
                    err => Err(err),
                }
            }
        }
    }
}

/// Waits until `client` is connected (`true`) or its session ended (`false`). Once it
/// has waited for as long as the servers keep a session they do not hear from, it tells
/// the waiting caller, through `settle`, that the node went with its session, and waits on.
async fn connected(client: &Client, settle: &mut Option<oneshot::Sender<Result<Left>>>) -> bool {
    let reconnecting = reconnected(client);
    tokio::pin!(reconnecting);
    if settle.is_some() {
        let (times, per) = SESSION_GONE;
        let gone_after = client.session_timeout() * times / per;
        tokio::select! {
            back = &mut reconnecting => return back.is_ok(),
            () = tokio::time::sleep(gone_after) => {
                debug!(?gone_after, "disconnected for longer than the session lives");
                if let Some(settle) = settle.take() {
                    let _ = settle.send(Ok(Left::WithSession));
                }
            }
        }
    }
    reconnecting.await.is_ok()
}

/// The node named with `uuid` under `root`, if a create made it (`None`: it made none, or
/// it is gone); listed once connected, again after each listing whose outcome is unknown.
/// `Some(Err(left))` if the session ended first, or the root cannot be listed (then the
/// node, if any, goes with the session).
async fn find_by_uuid(
    client: &Client,
    root: &str,
    uuid: &Uuid,
    settle: &mut Option<oneshot::Sender<Result<Left>>>,
) -> Option<std::result::Result<String, Left>> {
    let mut pause = FIRST_PAUSE;
    loop {
        if !connected(client, settle).await {
            return Some(Err(Left::WithSession));
        }
        // The sync makes the listing show a create that the lost reply was about.
        let listed = match client.sync(root).await {
            Ok(()) => client.list_children(root).await,
            Err(err) => Err(err),
        };
        match listed {
            Ok(children) => {
                return find_own(&children, uuid).map(|name| Ok(path::join(root, name)))
            }
            Err(zookeeper_client::Error::NoNode) => return None,
            Err(err) if outcome_unknown(&err) => {
                debug!(%err, ?pause, "cannot list the root yet; again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(err) => {
                warn!(%err, %root, "cannot look for a node whose create reply was lost");
                return Some(Err(Left::WithSession));
            }
        }
    }
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
