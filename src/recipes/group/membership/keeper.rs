//! The task that keeps a member's node: makes it, writes into it the data the member sets,
//! makes it again after it went, and deletes it when the member leaves (see the
//! [group docs](crate::Group) for what it promises, and [`Membership::set_data`] for what
//! a write of the member's data may touch).
//!
//! [`Membership::set_data`]: super::Membership::set_data

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};
use zookeeper_client::{Client, CreateMode, EventType, SessionId, SessionState, Stat};

use super::Presence;
use crate::acl::NodeAcl;
use crate::error::outcome_unknown;
use crate::error::{Error, Result};
use crate::loss::Loss;
use crate::queue::{spawn_removal, Removal};
use crate::session::{reconnected, retry, Session};

/// The pause before making the node again after an attempt that failed for a reason that
/// passes (connection, expiry); it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// How many times a create is sent while its outcome stays unknown.
const ATTEMPTS: usize = 3;

/// Where the task publishes: the presence, and why the membership ended.
pub(super) type Publish = (watch::Sender<Presence>, watch::Sender<Option<Loss>>);

/// The data the member wants in its node: the latest it set, numbered from 0 (the data
/// it joined with).
#[derive(Debug)]
pub(super) struct Wanted {
    pub(super) serial: u64,
    pub(super) data: Arc<[u8]>,
}

/// What became of the data wanted: the number of the latest that is in the node (written,
/// or the node made with it), or that the servers refused to write (and why).
#[derive(Clone, Debug, Default)]
pub(super) struct Put {
    pub(super) serial: u64,
    pub(super) refused: Option<Error>,
}

/// What the task keeps: the node, its data, and where it goes.
#[derive(Debug)]
pub(super) struct Claim {
    pub(super) session: Session,
    pub(super) root: Arc<str>,
    pub(super) node: Arc<str>,
    pub(super) wanted: watch::Receiver<Wanted>,
    pub(super) put: watch::Sender<Put>,
    pub(super) acl: NodeAcl,
    /// Until when the first make waits for another session's node at the path to go
    /// ([`Group::join_within`](crate::Group::join_within)); `None`: it does not wait.
    pub(super) until: Option<Instant>,
}

/// The node made: on which session's client, and the zxid that created it (its identity).
struct Made {
    client: Weak<Client>,
    owner: i64,
    czxid: i64,
}

/// What a write of the data wanted into the node came to.
enum Wrote {
    /// Written, or the node changed or went since it was seen, or its session ended:
    /// nothing more is written until the node's watch fires (it fires on every change of
    /// the node, our own write's included, and when the session ends).
    Changed,
    /// Refused by the servers (published): the node is as it was.
    Refused,
    /// Its outcome is unknown (the connection broke): written again once connected.
    Unknown,
}

/// Makes the node, tells `joined`, and keeps the node until `stopped` (then deletes it).
/// Publishes the presence, and why the membership ended if it ends before `stopped`.
pub(super) async fn keep(
    claim: Claim,
    (presence, ended): Publish,
    joined: oneshot::Sender<Result<u64>>,
    mut stopped: oneshot::Receiver<()>,
) -> Result<()> {
    let first = async {
        let client = claim.session.live().await?;
        let czxid = claim.make(&client, None, claim.until).await?;
        Ok(Made {
            client: Arc::downgrade(&client),
            owner: client.session_id().0,
            czxid,
        })
    };
    // A close ends a join that waits for the connection: the node, if made, goes with
    // the session.
    let made = tokio::select! {
        biased;
        () = claim.session.closed() => Err(Error::Closed),
        made = first => made,
    };
    let mut made = match made {
        Ok(made) => made,
        Err(err) => {
            let _ = joined.send(Err(err));
            return Ok(());
        }
    };
    presence.send_replace(Presence::Present);
    info!("joined");
    if joined
        .send(Ok(u64::try_from(made.czxid).unwrap_or_default()))
        .is_err()
    {
        debug!("join dropped; leaving");
        return claim.remove(made.client).await;
    }
    loop {
        let went = tokio::select! {
            biased;
            _ = &mut stopped => break,
            () = claim.session.closed() => return closed(&presence, &ended),
            went = claim.attend(&made) => went,
        };
        presence.send_replace(Presence::Absent);
        warn!(?went, "the node went; making it again");
        let remade = tokio::select! {
            biased;
            // The create may have been sent: remove what it made.
            _ = &mut stopped => return claim.remove_if_made().await,
            () = claim.session.closed() => return closed(&presence, &ended),
            remade = claim.remake(made.owner) => remade,
        };
        match remade {
            Ok(remade) => {
                made = remade;
                presence.send_replace(Presence::Present);
                info!("made again");
            }
            Err(Error::IdTaken { node }) => {
                warn!(%node, "the id was taken by another session meanwhile; not taking it back");
                // Lost first: whoever sees it taken sees it lost.
                ended.send_replace(Some(went));
                presence.send_replace(Presence::Taken);
                // Nothing more is done: the node at the path is another session's.
                let _ = stopped.await;
                return Ok(());
            }
            Err(err) => {
                ended.send_replace(Some(went));
                return Err(err);
            }
        }
    }
    claim.remove(made.client).await
}

/// Publishes that the membership ended with its session closed: lost, and its node gone
/// with the session.
fn closed(presence: &watch::Sender<Presence>, ended: &watch::Sender<Option<Loss>>) -> Result<()> {
    ended.send_replace(Some(Loss::Closed));
    presence.send_replace(Presence::Absent);
    Ok(())
}

impl Claim {
    /// Creates the node on `client` (and the group path, if missing), with the data
    /// wanted now, or finds it ours (a create whose reply was lost). A node of `previous`
    /// (our session before expiry) is waited for until it goes; another session's, until
    /// `until`. A create whose outcome stays unknown is sent at most [`ATTEMPTS`] times.
    ///
    /// # Notable errors
    /// * [`Error::IdTaken`] if the node belongs to another session (another membership of
    ///   this session included) and does not go by `until`, or is persistent.
    async fn make(
        &self,
        client: &Client,
        previous: Option<i64>,
        until: Option<Instant>,
    ) -> Result<i64> {
        let options = CreateMode::Ephemeral.with_acls(self.acl.acls());
        let (serial, data) = {
            let wanted = self.wanted.borrow();
            (wanted.serial, wanted.data.clone())
        };
        let (mut made_root, mut unknown) = (false, 0);
        let czxid = loop {
            match client.create(&self.node, &data, &options).await {
                Ok((stat, _)) => break stat.czxid,
                Err(zookeeper_client::Error::NoNode) if !made_root => {
                    made_root = true;
                    self.make_root(client).await?;
                }
                Err(zookeeper_client::Error::NodeExists) => {
                    let maybe_ours = unknown > 0;
                    if let Some(czxid) =
                        self.found_ours(client, previous, maybe_ours, until).await?
                    {
                        break czxid;
                    }
                }
                Err(err) if outcome_unknown(&err) && unknown + 1 < ATTEMPTS => {
                    unknown += 1;
                    reconnected(client).await?;
                }
                Err(err) => return Err(Error::at(&self.node, err)),
            }
        };
        self.done(serial, None);
        Ok(czxid)
    }

    /// Whether the node that exists is ours: made by this session, when a create of ours
    /// may have made it (`maybe_ours`). `false` once it is gone: a node of `previous` is
    /// waited for; another session's ephemeral node, until `until`.
    ///
    /// # Notable errors
    /// * [`Error::IdTaken`] if it belongs to another session or another membership and
    ///   does not go by `until`, or is persistent.
    async fn found_ours(
        &self,
        client: &Client,
        previous: Option<i64>,
        maybe_ours: bool,
        until: Option<Instant>,
    ) -> Result<Option<i64>> {
        let ours = client.session_id().0;
        let (stat, watcher) = client
            .check_and_watch_stat(&self.node)
            .await
            .map_err(|err| Error::at(&self.node, err))?;
        let (owner, czxid) = match stat {
            None => return Ok(None),
            Some(stat) => (stat.ephemeral_owner, stat.czxid),
        };
        if owner == ours && maybe_ours {
            return Ok(Some(czxid));
        }
        let taken = || Error::IdTaken {
            node: self.node.to_string(),
        };
        if owner != ours && previous == Some(owner) {
            debug!(
                owner,
                "our expired session's node is still there; waiting for it to go"
            );
            watcher.changed().await;
            return Ok(None);
        }
        // A persistent node never goes by itself.
        let Some(until) = until.filter(|_| owner != 0) else {
            return Err(taken());
        };
        info!(
            owner = %SessionId(owner),
            "the id's node is another session's; waiting for it to go"
        );
        // Dropped unfired at the bound, the watch is removed from the servers.
        match tokio::time::timeout_at(until, watcher.changed()).await {
            Ok(_) => Ok(None),
            Err(_) => Err(taken()),
        }
    }

    /// Creates the group path and its missing parents as container nodes (as Curator does).
    async fn make_root(&self, client: &Client) -> Result<()> {
        let options = CreateMode::Container.with_acls(self.acl.acls());
        retry(client, || client.mkdir(&self.root, &options))
            .await
            .map_err(|err| match err {
                Error::ZooKeeper(err) => Error::at(&self.root, err),
                err => err,
            })
    }

    /// Makes the node again on the live session, after failures that pass with back-off;
    /// `previous` owned the node that went.
    ///
    /// # Notable errors
    /// * [`Error::IdTaken`] if another session made it meanwhile.
    /// * [`Error::NoAuth`], [`Error::Closed`]: the membership ends.
    async fn remake(&self, previous: i64) -> Result<Made> {
        let mut pause = FIRST_PAUSE;
        loop {
            let client = self.session.live().await?;
            match self.make(&client, Some(previous), None).await {
                Ok(czxid) => {
                    return Ok(Made {
                        client: Arc::downgrade(&client),
                        owner: client.session_id().0,
                        czxid,
                    })
                }
                Err(
                    Error::ConnectionLoss
                    | Error::Disconnected
                    | Error::Renewing
                    | Error::SessionExpired,
                ) => {
                    debug!(?pause, "cannot make the node yet; again after a pause");
                    drop(client);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Keeps the node `made`: writes into it the data the member sets, and resolves once
    /// it is gone: deleted or found another node ([`Loss::NodeDeleted`]), or gone with its
    /// session ([`Loss::SessionExpired`], [`Loss::Closed`]). Holds the client only while a
    /// request is in flight.
    async fn attend(&self, made: &Made) -> Loss {
        let mut set = self.wanted.clone();
        loop {
            let Some(live) = made.client.upgrade() else {
                return Loss::SessionExpired;
            };
            let watching = live.check_and_watch_stat(&self.node);
            let (stat, watcher) = match watching.await {
                Ok(watching) => watching,
                Err(err) if outcome_unknown(&err) => {
                    debug!(%err, "cannot look at the node; again once connected");
                    if reconnected(&live).await.is_err() {
                        return Loss::SessionExpired;
                    }
                    continue;
                }
                Err(zookeeper_client::Error::SessionExpired) => return Loss::SessionExpired,
                Err(zookeeper_client::Error::ClientClosed) => return Loss::Closed,
                Err(err) => {
                    warn!(%err, "cannot look at the node; again after a pause");
                    drop(live);
                    tokio::time::sleep(MAX_PAUSE).await;
                    continue;
                }
            };
            drop(live);
            let version = match stat {
                Some(stat) if stat.czxid == made.czxid => stat.version,
                _ => return Loss::NodeDeleted,
            };
            let fired = watcher.changed();
            tokio::pin!(fired);
            // Writes what the member sets, at the version seen, until the node changed
            // (our own write changes it too): then it is looked at again.
            let (mut changed, mut unknown) = (false, 0);
            let event = loop {
                if let Some(wanted) = self.newer().filter(|_| !changed) {
                    let serial = wanted.0;
                    match self.write(made, version, wanted).await {
                        Wrote::Changed => changed = true,
                        Wrote::Refused => {}
                        Wrote::Unknown if unknown + 1 < ATTEMPTS => unknown += 1,
                        Wrote::Unknown => self.done(serial, Some(Error::ConnectionLoss)),
                    }
                    continue;
                }
                tokio::select! {
                    event = &mut fired => break event,
                    () = set_again(&mut set) => {}
                }
            };
            match event.event_type {
                EventType::NodeDeleted => return Loss::NodeDeleted,
                EventType::Session if event.session_state == SessionState::Closed => {
                    return Loss::Closed
                }
                EventType::Session => return Loss::SessionExpired,
                // Written into (by us, or a hint), or anything else: look again.
                _ => debug!(?event.event_type, "the node changed; looking again"),
            }
        }
    }

    /// The data wanted, if the node does not carry it (nor was it refused): its number
    /// and the data.
    fn newer(&self) -> Option<(u64, Arc<[u8]>)> {
        let wanted = self.wanted.borrow();
        let newer = wanted.serial > self.put.borrow().serial;
        newer.then(|| (wanted.serial, wanted.data.clone()))
    }

    /// Writes `data` (number `serial`) into the node `made`, at `version`: the version
    /// seen with the node's watch set, so that a node that changed since (another node
    /// made at the path included, unless its version is the same) is not written.
    async fn write(&self, made: &Made, version: i32, (serial, data): (u64, Arc<[u8]>)) -> Wrote {
        let Some(live) = made.client.upgrade() else {
            return Wrote::Changed;
        };
        let written = live.set_data(&self.node, &data, Some(version)).await;
        match written {
            Ok(stat) => {
                self.written(made, serial, &stat);
                Wrote::Changed
            }
            Err(err) if outcome_unknown(&err) => {
                debug!(%err, serial, "outcome of the write unknown; again once connected");
                match reconnected(&live).await {
                    Ok(()) => Wrote::Unknown,
                    // The watch tells how the session ended.
                    Err(_) => Wrote::Changed,
                }
            }
            // Changed or gone since it was seen, or its session ended: the watch tells.
            Err(
                zookeeper_client::Error::BadVersion
                | zookeeper_client::Error::NoNode
                | zookeeper_client::Error::SessionExpired
                | zookeeper_client::Error::ClientClosed,
            ) => Wrote::Changed,
            Err(err) => {
                let err = Error::at(&self.node, err);
                warn!(%err, serial, "the servers refused to write the member's data");
                self.done(serial, Some(err));
                Wrote::Refused
            }
        }
    }

    /// Publishes that the data numbered `serial` is in the node, if the node written (as
    /// `stat` says) is `made`; warns if it is another (see
    /// [`Membership::set_data`](super::Membership::set_data)): the node's watch, fired by
    /// its deletion, then ends the membership, taken.
    fn written(&self, made: &Made, serial: u64, stat: &Stat) {
        if stat.czxid == made.czxid {
            debug!(serial, version = stat.version, "data written");
            self.done(serial, None);
        } else {
            warn!(
                node = %self.node,
                owner = %SessionId(stat.ephemeral_owner),
                "the member's data went into another node made at its path between its \
                 deletion and the write"
            );
        }
    }

    /// Publishes that the data numbered `serial` is in the node, or was `refused`.
    fn done(&self, serial: u64, refused: Option<Error>) {
        self.put.send_if_modified(|put| {
            let newer = serial > put.serial;
            if newer {
                *put = Put { serial, refused };
            }
            newer
        });
    }

    /// Deletes the node if the live session made it (a create cut short by a leave).
    async fn remove_if_made(&self) -> Result<()> {
        let Ok(client) = self.session.connected() else {
            // Not connected: a create cut short may have made it; look once back.
            let Some(client) = self.session.client() else {
                return Ok(());
            };
            if reconnected(&client).await.is_err() {
                return Ok(());
            }
            return Box::pin(self.remove_if_made()).await;
        };
        let stat = retry(&client, || client.check_stat(&self.node)).await?;
        match stat {
            Some(stat) if stat.ephemeral_owner == client.session_id().0 => {
                self.remove(Arc::downgrade(&client)).await
            }
            _ => Ok(()),
        }
    }

    /// Deletes the node made on `client` while that session owns it: once the id was taken
    /// (even before this task heard it, a leave sent while cut off), the node at the path
    /// is the taker's, never deleted.
    async fn remove(&self, client: Weak<Client>) -> Result<()> {
        let removal = Removal::Owned(self.node.clone());
        let left = spawn_removal(&self.session, client, removal).await?;
        info!(?left, "left");
        Ok(())
    }
}

/// Resolves once the member sets its data again; never once the membership is dropped
/// (the task is stopped then).
async fn set_again(set: &mut watch::Receiver<Wanted>) {
    if set.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
