//! The task that keeps a member's node: makes it, makes it again after it went, and
//! deletes it when the member leaves (see the [group docs](crate::Group) for what it
//! promises).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tracing::{debug, info, warn};
use zookeeper_client::{Client, CreateMode, EventType, SessionState};

use super::Presence;
use crate::acl::NodeAcl;
use crate::error::outcome_unknown;
use crate::error::{Error, Result};
use crate::queue::{spawn_removal, Removal};
use crate::session::{reconnected, retry, Session};
use crate::trust::Loss;

/// The pause before making the node again after an attempt that failed for a reason that
/// passes (connection, expiry); it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// How many times a create is sent while its outcome stays unknown.
const ATTEMPTS: usize = 3;

/// Where the task publishes: the presence, and why the membership ended.
pub(super) type Publish = (watch::Sender<Presence>, watch::Sender<Option<Loss>>);

/// What the task keeps: the node, its data, and where it goes.
#[derive(Debug)]
pub(super) struct Claim {
    pub(super) session: Session,
    pub(super) root: Arc<str>,
    pub(super) node: Arc<str>,
    pub(super) data: Vec<u8>,
    pub(super) acl: NodeAcl,
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
        let czxid = claim.make(&client, None).await?;
        Ok((Arc::downgrade(&client), client.session_id().0, czxid))
    };
    // A close ends a join that waits for the connection: the node, if made, goes with
    // the session.
    let made = tokio::select! {
        biased;
        () = claim.session.closed() => Err(Error::Closed),
        made = first => made,
    };
    let (mut client, mut owner, czxid) = match made {
        Ok(made) => made,
        Err(err) => {
            let _ = joined.send(Err(err));
            return Ok(());
        }
    };
    presence.send_replace(Presence::Present);
    info!("joined");
    if joined
        .send(Ok(u64::try_from(czxid).unwrap_or_default()))
        .is_err()
    {
        debug!("join dropped; leaving");
        return claim.remove(client).await;
    }
    loop {
        let went = tokio::select! {
            biased;
            _ = &mut stopped => break,
            () = claim.session.closed() => return closed(&presence, &ended),
            went = claim.gone(&client) => went,
        };
        presence.send_replace(Presence::Absent);
        warn!(?went, "the node went; making it again");
        let remade = tokio::select! {
            biased;
            // The create may have been sent: remove what it made.
            _ = &mut stopped => return claim.remove_if_made().await,
            () = claim.session.closed() => return closed(&presence, &ended),
            remade = claim.remake(owner) => remade,
        };
        match remade {
            Ok(remade) => {
                (client, owner) = remade;
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
    claim.remove(client).await
}

/// Publishes that the membership ended with its session closed: lost, and its node gone
/// with the session.
fn closed(presence: &watch::Sender<Presence>, ended: &watch::Sender<Option<Loss>>) -> Result<()> {
    ended.send_replace(Some(Loss::Closed));
    presence.send_replace(Presence::Absent);
    Ok(())
}

impl Claim {
    /// Creates the node on `client` (and the group path, if missing), or finds it ours (a
    /// create whose reply was lost). A node of `previous` (our session before expiry) is
    /// waited for until it goes. A create whose outcome stays unknown is sent at most
    /// [`ATTEMPTS`] times.
    ///
    /// # Notable errors
    /// * [`Error::IdTaken`] if the node belongs to another session (another membership of
    ///   this session included), or is persistent.
    async fn make(&self, client: &Client, previous: Option<i64>) -> Result<i64> {
        let options = CreateMode::Ephemeral.with_acls(self.acl.acls());
        let (mut made_root, mut unknown) = (false, 0);
        loop {
            match client.create(&self.node, &self.data, &options).await {
                Ok((stat, _)) => return Ok(stat.czxid),
                Err(zookeeper_client::Error::NoNode) if !made_root => {
                    made_root = true;
                    self.make_root(client).await?;
                }
                Err(zookeeper_client::Error::NodeExists) => {
                    if let Some(czxid) = self.found_ours(client, previous, unknown > 0).await? {
                        return Ok(czxid);
                    }
                }
                Err(err) if outcome_unknown(&err) && unknown + 1 < ATTEMPTS => {
                    unknown += 1;
                    reconnected(client).await?;
                }
                Err(err) => return Err(Error::at(&self.node, err)),
            }
        }
    }

    /// Whether the node that exists is ours: made by this session, when a create of ours
    /// may have made it (`maybe_ours`). `false` once it is gone: a node of `previous` is
    /// waited for.
    ///
    /// # Notable errors
    /// * [`Error::IdTaken`] if it belongs to another session or another membership, or is
    ///   persistent.
    async fn found_ours(
        &self,
        client: &Client,
        previous: Option<i64>,
        maybe_ours: bool,
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
        if owner == ours || previous != Some(owner) {
            return Err(Error::IdTaken {
                node: self.node.to_string(),
            });
        }
        debug!(
            owner,
            "our expired session's node is still there; waiting for it to go"
        );
        watcher.changed().await;
        Ok(None)
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
    /// `previous` owned the node that went. The client it was made on, and its session id.
    ///
    /// # Notable errors
    /// * [`Error::IdTaken`] if another session made it meanwhile.
    /// * [`Error::NoAuth`], [`Error::Closed`]: the membership ends.
    async fn remake(&self, previous: i64) -> Result<(Weak<Client>, i64)> {
        let mut pause = FIRST_PAUSE;
        loop {
            let client = self.session.live().await?;
            match self.make(&client, Some(previous)).await {
                Ok(_) => return Ok((Arc::downgrade(&client), client.session_id().0)),
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

    /// Resolves once the node made on `client` is gone: deleted or found someone else's
    /// ([`Loss::NodeDeleted`]), or gone with its session ([`Loss::SessionExpired`],
    /// [`Loss::Closed`]). Holds the client only while a request is in flight.
    async fn gone(&self, client: &Weak<Client>) -> Loss {
        loop {
            let Some(live) = client.upgrade() else {
                return Loss::SessionExpired;
            };
            let ours = live.session_id().0;
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
            match stat {
                Some(stat) if stat.ephemeral_owner == ours => {}
                _ => return Loss::NodeDeleted,
            }
            let event = watcher.changed().await;
            match event.event_type {
                EventType::NodeDeleted => return Loss::NodeDeleted,
                EventType::Session if event.session_state == SessionState::Closed => {
                    return Loss::Closed
                }
                EventType::Session => return Loss::SessionExpired,
                // Written into (a hint), or anything else: look again.
                _ => debug!(?event.event_type, "the node changed; looking again"),
            }
        }
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
        let removal = Removal::Owned(self.node.to_string());
        let left = spawn_removal(&self.session, client, removal).await?;
        info!(?left, "left");
        Ok(())
    }
}
