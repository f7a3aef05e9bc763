//! A membership: the member's node, made and kept by a task on the session's runtime until
//! the member leaves (see the [group docs](super) for what it promises); `keeper` is that
//! task.

mod keeper;

use std::sync::Arc;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info_span, Instrument};

use super::{check_data, Group};
use crate::error::{Error, Result};
use crate::loss::Loss;
use keeper::{keep, Claim, Put, Wanted};

/// Whether a member's node is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Presence {
    /// The node was made (or seen) on the live session and not heard deleted since. While
    /// the connection is suspended it stays `Present`: the session, and the node, may live.
    Present,
    /// The node went (session expired, someone deleted it) and is being made again; or the
    /// membership ended: with an error ([`Membership::leave`] returns it), or with its
    /// session closed.
    Absent,
    /// While the node was away, another session made `<path>/<id>` its own. The membership
    /// does not take it back: it ends; leave and join again when the id is free.
    Taken,
}

/// This process's membership of a [`Group`]: keeps the node `<path>/<id>` until
/// [`leave`](Self::leave) or drop, making it again after session expiry, with the data
/// last set ([`set_data`](Self::set_data)).
///
/// Dropping it deletes the node in the background: to join again under the same id on the
/// same session, [`leave`](Self::leave) first (a join that comes before the delete finds
/// the id taken).
///
/// # No fenced writes
///
/// A membership is no [`Hold`](crate::Hold) and offers no [`fenced`](crate::Fenced) writes,
/// because the servers cannot tell its node from another. A hold's identity is its node,
/// checked on the server: a lock's node is named with a uuid of its own (`_c_<uuid>-…`), so
/// a node at that path is the one the hold made. A member's node is named by its id,
/// `<path>/<id>`, a path any session may create again once it is gone (another replica
/// joining with the same id, an operator); a ZooKeeper multi can check only a node's
/// existence or its data version, and a node made again (by another replica running this
/// very code) has the same versions. So no check sent to the servers proves that the node
/// at `<path>/<id>` is the one this membership made, and a write fenced by it could commit
/// after the id was taken. Fence writes with what has a node of its own: a
/// [`Mutex`](crate::Mutex) guard or a [`Leadership`](crate::Leadership). The one write a
/// membership makes is of its own data into its own node ([`set_data`](Self::set_data)),
/// which says how close it comes.
///
/// ```compile_fail
/// # fn demo(member: zk_recipes::Membership) {
/// use zk_recipes::Hold;
/// let _ = member.fenced(); // no such method: a membership fences nothing
/// # }
/// ```
#[derive(Debug)]
pub struct Membership {
    id: Arc<str>,
    node: Arc<str>,
    created: u64,
    presence: watch::Receiver<Presence>,
    /// Why the membership ended, once it did: it is no longer kept.
    ended: watch::Receiver<Option<Loss>>,
    /// The data the member wants in its node, for the task that writes it.
    wanted: watch::Sender<Wanted>,
    /// What the task did with it.
    put: watch::Receiver<Put>,
    stop: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<Result<()>>>,
}

impl Membership {
    /// Makes the node on the live session and starts keeping it; waits for another
    /// session's node at the path to go until `until`, if given.
    pub(super) async fn join(
        group: &Group,
        node: String,
        id: &str,
        data: Vec<u8>,
        until: Option<Instant>,
    ) -> Result<Membership> {
        let (wanted, wanted_rx) = watch::channel(Wanted {
            serial: 0,
            data: data.into(),
        });
        let (put_tx, put) = watch::channel(Put::default());
        let claim = Claim {
            session: group.session.clone(),
            root: group.root.clone(),
            node: node.into(),
            wanted: wanted_rx,
            put: put_tx,
            acl: group.acl,
            until,
        };
        let node = claim.node.clone();
        let (presence_tx, presence) = watch::channel(Presence::Absent);
        let (ended_tx, ended) = watch::channel(None);
        let (stop, stopped) = oneshot::channel();
        let (joined_tx, joined) = oneshot::channel();
        let (done_tx, done) = oneshot::channel();
        let span = info_span!("zk.group.member", %node);
        let session = claim.session.clone();
        session.spawn(
            async move {
                let ended = keep(claim, (presence_tx, ended_tx), joined_tx, stopped).await;
                let _ = done_tx.send(ended);
            }
            .instrument(span),
        );
        // A dropped join drops `stop`: the task deletes what it made.
        let created = joined.await.unwrap_or(Err(Error::Closed))?;
        Ok(Membership {
            id: id.into(),
            node,
            created,
            presence,
            ended,
            wanted,
            put,
            stop: Some(stop),
            done: Some(done),
        })
    }

    /// The member's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Full path of the member's node.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The zxid that created the member's node when it joined (a node made again after
    /// expiry has a greater one).
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Whether the node is there now (as far as this process knows).
    pub fn presence(&self) -> Presence {
        *self.presence.borrow()
    }

    /// The presence as it changes.
    pub fn presences(&self) -> watch::Receiver<Presence> {
        self.presence.clone()
    }

    /// Whether the membership is over: the id was taken by another session while this one
    /// was away ([`Presence::Taken`]), or the node went and can no longer be made again
    /// (the session was closed, the servers refused the create). An expiry, or a deletion,
    /// is no loss while the node is being made again.
    pub fn is_lost(&self) -> bool {
        self.ended.borrow().is_some() || self.ended.has_changed().is_err()
    }

    /// Resolves once the membership is over (see [`is_lost`](Self::is_lost)); says how its
    /// node went: [`Loss::NodeDeleted`] (deleted, or found another session's) or
    /// [`Loss::SessionExpired`] before it was taken or could not be made again;
    /// [`Loss::Closed`] once the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        let mut ended = self.ended.clone();
        let loss = ended.wait_for(Option::is_some).await.map(|loss| *loss);
        loss.ok().flatten().unwrap_or(Loss::Closed)
    }

    /// Sets the member's data (as Curator's `setThisData`): writes it into the member's
    /// node, and keeps it, so that a node made again (after expiry, after a deletion)
    /// carries it; views ([`Group::watch_members`](crate::Group::watch_members)) show it.
    /// Returns once the data is in the node: written into it, or the node made again with
    /// it (or with data set after it: calls racing each other, the last set wins). Waits
    /// while the node is away or the connection is down: bound it with
    /// [`tokio::time::timeout`].
    ///
    /// The membership's task does every write, and only into the node this membership
    /// made (by the zxid that created it), never into one another session made at the path:
    ///
    /// * **Over, it writes nothing.** A membership that [`is_lost`](Self::is_lost) (its id
    ///   [`Taken`](Presence::Taken), its session closed, its node not made again) fails at
    ///   once, and its task no longer writes at all.
    /// * **Away, the node made again carries it.** While the node is
    ///   [`Absent`](Presence::Absent) (gone, being made again), nothing is written: the
    ///   data goes in with the create. If the node cannot be made again (its id was taken
    ///   meanwhile), the call fails and nothing was written.
    /// * **Present, it writes at the version seen.** The data is written at the version the
    ///   node had when the task last looked at it (and set the node's watch, which fires on
    ///   every change after): a node changed since is looked at again before it is
    ///   written, and one that is another node now is not written.
    ///
    /// What remains is the window of [`leave`](Self::leave)'s delete: the servers check a
    /// node's version, never which node it is. If, after the task's last look, someone
    /// deletes the node and another session makes one at the path with the same data
    /// version (a new node has version 0: one whose member set no data since), and that
    /// happens while the notification of the deletion is on its way to us and our write
    /// on its way to the servers (less than one round trip), the write lands in the other
    /// session's node. The reply tells: the task logs a warning naming the node, does not
    /// count the data as written, and the deletion then ends the membership as taken (this
    /// call fails with [`Error::Lost`]).
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if `data` is larger than a node holds (960 KiB here):
    ///   nothing changes.
    /// * [`Error::Lost`] if the membership is over, or ends before the data is in its
    ///   node: nothing was written (but for the window above).
    /// * [`Error::NoAuth`] if the servers refuse the write (someone changed the node's
    ///   ACL): the node keeps its data; a node made again gets the new data.
    /// * [`Error::ConnectionLoss`] if the connection broke with the write in flight three
    ///   times: whether it was written is unknown; a node made again gets the new data.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: from the call's first poll, the data is kept and written by
    /// the membership's task, whether the call is awaited to the end or dropped.
    pub async fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        let data = data.into();
        check_data(&data)?;
        if self.is_lost() {
            return Err(self.lost_error());
        }
        let serial = self.want_data(data);
        let (mut put, mut ended) = (self.put.clone(), self.ended.clone());
        tokio::select! {
            // Written, then ended: written.
            biased;
            put = put.wait_for(|put| put.serial >= serial) => match put {
                Ok(put) => put.refused.clone().map_or(Ok(()), Err),
                Err(_) => Err(self.lost_error()),
            },
            _ = ended.wait_for(Option::is_some) => Err(self.lost_error()),
        }
    }

    /// Hands `data` (checked by the caller) to the task that writes it, and returns at once
    /// with the serial number the task reports it under (see [`set_data`](Self::set_data)).
    pub(crate) fn want_data(&self, data: Vec<u8>) -> u64 {
        let mut serial = 0;
        self.wanted.send_modify(|wanted| {
            wanted.serial += 1;
            wanted.data = data.into();
            serial = wanted.serial;
        });
        debug!(node = %self.node, serial, "member data set");
        serial
    }

    /// The error of a membership that is over.
    fn lost_error(&self) -> Error {
        Error::Lost {
            node: self.node.to_string(),
        }
    }

    /// Leaves the group: deletes the node and returns once it is gone (deleted, or gone
    /// with its session). While the connection is down it waits for it, at most until the
    /// servers would have expired the session. Only a node its session owns is deleted: a
    /// node another session made at the path (the id taken while this one was cut off,
    /// before it heard) is left alone.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the servers refused to make the node again after it went, or
    ///   refuse the delete (the node then goes with the session).
    ///
    /// # Cancel safety
    /// Cancel safe: the node is deleted in the background.
    pub async fn leave(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.done.take() {
            Some(done) => done.await.unwrap_or(Ok(())),
            None => Ok(()),
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
