//! Leader election: [`LeaderElection`], [`Candidate`], [`Leadership`].

use std::future::Future;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, info_span, warn, Instrument};

use crate::error::{Error, Result};
use crate::path;
use crate::queue::{reconnected, Contender, Loss, Queue};
use crate::session::Session;

/// A candidate's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// First in the queue, with a trusted session: the master.
    Leader,
    /// Waiting in the queue (or out of it).
    Follower,
}

/// A member of the election, as observers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    /// The id the candidate joined with (its node's data).
    pub id: String,
    /// Full path of its node.
    pub node: String,
}

/// Leader election: one leader (master) among the candidates on a path, the rest followers.
///
/// A candidate joins the contender queue under the election path with an
/// EPHEMERAL_SEQUENTIAL node named `_c_<uuid>-latch-<seq>` holding its id, as Apache
/// Curator's `LeaderLatch` does, so Rust and Java candidates can share one election. The
/// first in the queue leads; every other candidate watches only its predecessor, so when a
/// leader goes exactly one follower wakes and leadership passes in queue order.
///
/// * **Stepping down.** A leader becomes [`Role::Follower`] as soon as its leadership can no
///   longer be trusted: the session expires, the connection is suspended (see
///   [`SessionBuilder::tolerate_suspension`](crate::SessionBuilder::tolerate_suspension)),
///   or its node is deleted. It never learns of the loss later than the servers could let
///   the next candidate lead. After a suspension that the session survived, it leads again
///   with the same term (its node was first all along, so nobody else led meanwhile).
/// * **Terms.** [`Leadership::term`] is the zxid that created the leader's node: it grows
///   with every new leader, a fencing token for what the leader writes.
/// * **Session expiry.** A candidate re-joins the queue on the new session by default
///   ([`LeaderElection::rejoin_after_expiry`]).
/// * **Leaving.** [`Candidate::resign`] and dropping the candidate delete its node.
///
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::LeaderElection;
///
/// let election = LeaderElection::new(&session, "/election/orders", "node-a")?;
/// election
///     .run(|leadership| async move {
///         println!("leading in term {}", leadership.term());
///         leadership.lost().await; // lead until the leadership is lost
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LeaderElection {
    session: Session,
    queue: Queue,
    id: String,
    rejoin: bool,
}

impl LeaderElection {
    /// An election on `path` in which this process takes part as `id`.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed.
    /// * [`Error::InvalidArgument`] if `id` is empty.
    ///
    /// Nothing is sent to ZooKeeper.
    pub fn new(session: &Session, path: &str, id: impl Into<String>) -> Result<LeaderElection> {
        let id = id.into();
        if id.is_empty() {
            return Err(Error::InvalidArgument("participant id is empty".into()));
        }
        Ok(LeaderElection {
            session: session.clone(),
            queue: Queue::new(path, "latch-", false)?,
            id,
            rejoin: true,
        })
    }

    /// Whether a candidate whose session expired joins again on the new session
    /// (default `true`). With `false` its campaign ends with [`Error::SessionExpired`].
    pub fn rejoin_after_expiry(mut self, rejoin: bool) -> LeaderElection {
        self.rejoin = rejoin;
        self
    }

    /// The election path.
    pub fn path(&self) -> &str {
        self.queue.root()
    }

    /// Enters the queue and returns at once, as a [`Candidate`] that follows or leads in
    /// the background.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the ACL of the path (or a parent) denies creating nodes.
    /// * [`Error::EphemeralParent`] if the path lies under an ephemeral node.
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: a node created for a dropped `join()` is deleted in the background.
    pub async fn join(&self) -> Result<Candidate> {
        let span = info_span!("zk.election.join", path = %self.path(), id = %self.id);
        async {
            let contender = self.enter().await?;
            info!(node = %contender.node(), ahead = contender.ahead(), "joined");
            Ok(Candidate::start(self.clone(), contender))
        }
        .instrument(span)
        .await
    }

    /// Enters the queue in this session's turn, on its live session (waiting for one).
    async fn enter(&self) -> Result<Contender> {
        let turn = self.session.entry_turn().await?;
        let client = self.session.live().await?;
        self.queue.enter(&client, self.id.as_bytes(), turn).await
    }

    /// The current leader, if anyone is in the queue; works without joining.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants().await?.into_iter().next())
    }

    /// Everyone in the queue, leader first; works without joining. Foreign candidates on
    /// the same path (Curator's `LeaderLatch`) are listed with their ids too.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        let client = self.session.live().await?;
        let contenders = self.queue.contenders(&client).await?;
        Ok(contenders
            .into_iter()
            .map(|(name, data)| Participant {
                id: String::from_utf8_lossy(&data).into_owned(),
                node: path::join(self.path(), &name),
            })
            .collect())
    }

    /// Leads whenever this process is elected: joins, waits for leadership, runs
    /// `lead(leadership)`, and gives leadership up when `lead` returns or leadership is
    /// lost (then `lead`'s future is dropped); joins again and repeats. Returns only on
    /// error; drop the future to stop (the node is deleted).
    ///
    /// # Notable errors
    /// As [`join`](Self::join).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it resigns.
    pub async fn run<F, Fut>(&self, mut lead: F) -> Result<()>
    where
        F: FnMut(Leadership) -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            let candidate = self.join().await?;
            let leadership = candidate.leadership().await?;
            let term = leadership.term();
            tokio::select! {
                () = lead(leadership.clone()) => info!(term, "leader finished its work"),
                loss = leadership.lost() => warn!(term, ?loss, "leadership lost while leading"),
            }
            match candidate.resign().await {
                Ok(()) | Err(Error::LockLost { .. }) => {}
                Err(err) => return Err(err),
            }
        }
    }
}

/// What a candidate's campaign publishes.
#[derive(Clone, Debug)]
enum Campaign {
    Following,
    Leading(Leadership),
    Ended(Error),
}

/// A member of an election; leaves the queue when dropped (in the background).
#[derive(Debug)]
pub struct Candidate {
    roles: watch::Receiver<Role>,
    campaign: watch::Receiver<Campaign>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<()>>>,
}

impl Candidate {
    fn start(election: LeaderElection, contender: Contender) -> Candidate {
        let (roles_tx, roles) = watch::channel(Role::Follower);
        let (campaign_tx, campaign) = watch::channel(Campaign::Following);
        let (stop, stopped) = oneshot::channel();
        let span = info_span!("zk.election.candidate", path = %election.path(), id = %election.id);
        let report = Report {
            roles: roles_tx,
            campaign: campaign_tx,
        };
        let task =
            tokio::spawn(self::campaign(election, contender, report, stopped).instrument(span));
        Candidate {
            roles,
            campaign,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The current role.
    pub fn role(&self) -> Role {
        *self.roles.borrow()
    }

    /// The role as it changes.
    pub fn roles(&self) -> watch::Receiver<Role> {
        self.roles.clone()
    }

    /// Waits until this candidate leads; returns at once if it does.
    ///
    /// # Notable errors
    /// * [`Error::SessionExpired`] if the session expired and the election does not re-join.
    /// * Any error that ended the campaign (for example [`Error::Closed`]).
    ///
    /// # Cancel safety
    /// Cancel safe: the candidate keeps its place.
    pub async fn leadership(&self) -> Result<Leadership> {
        let mut campaign = self.campaign.clone();
        let state = campaign
            .wait_for(|state| match state {
                Campaign::Leading(leadership) => !leadership.is_lost(),
                Campaign::Ended(_) => true,
                Campaign::Following => false,
            })
            .await
            .map_err(|_| Error::Closed)?;
        match &*state {
            Campaign::Leading(leadership) => Ok(leadership.clone()),
            Campaign::Ended(err) => Err(err.clone()),
            Campaign::Following => Err(Error::Closed),
        }
    }

    /// Leaves the election and waits until the node is deleted, so the next candidate can
    /// lead.
    ///
    /// # Notable errors
    /// * [`Error::LockLost`] if the node was already gone (session expired, deleted).
    /// * [`Error::ConnectionLoss`] if the delete's outcome is unknown; it is retried in
    ///   the background.
    ///
    /// # Cancel safety
    /// Cancel safe: the node is deleted in the background.
    pub async fn resign(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        task.await.unwrap_or(Err(Error::Closed))
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Leadership of an election, held while the candidate's node is first and trusted.
#[derive(Clone, Debug)]
pub struct Leadership {
    term: u64,
    node: String,
    loss: watch::Receiver<Option<Loss>>,
}

impl Leadership {
    /// The term: the zxid that created the leader's node, greater for every later leader.
    /// Use it as a fencing token.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// Full path of the leader's node.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether the leadership can no longer be trusted.
    pub fn is_lost(&self) -> bool {
        self.loss.borrow().is_some() || self.loss.has_changed().is_err()
    }

    /// Resolves once the leadership can no longer be trusted; says why.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        let mut loss = self.loss.clone();
        let seen = loss.wait_for(Option::is_some).await.map(|loss| *loss);
        seen.ok().flatten().unwrap_or(Loss::Closed)
    }
}

/// The campaign's outlets.
struct Report {
    roles: watch::Sender<Role>,
    campaign: watch::Sender<Campaign>,
}

impl Report {
    fn role(&self, role: Role) {
        self.roles.send_if_modified(|current| {
            let changed = *current != role;
            *current = role;
            changed
        });
    }
}

/// Follows and leads until stopped; then leaves the queue (`Error::LockLost` if the node
/// was already gone).
async fn campaign(
    election: LeaderElection,
    contender: Contender,
    report: Report,
    stopped: oneshot::Receiver<()>,
) -> Result<()> {
    let mut slot = Some(contender);
    let ended = tokio::select! {
        err = follow_and_lead(&election, &mut slot, &report) => Some(err),
        _ = stopped => None,
    };
    report.role(Role::Follower);
    if let Some(err) = ended {
        warn!(%err, "campaign ended");
        report.campaign.send_replace(Campaign::Ended(err.clone()));
        return Err(err);
    }
    report.campaign.send_replace(Campaign::Ended(Error::Closed));
    let Some(contender) = slot else {
        return Ok(());
    };
    let node = contender.node().to_owned();
    match contender.leave().await? {
        true => {
            info!(%node, "resigned");
            Ok(())
        }
        false => Err(Error::LockLost { node }),
    }
}

/// The campaign proper; returns only with the error that ends it.
async fn follow_and_lead(
    election: &LeaderElection,
    slot: &mut Option<Contender>,
    report: &Report,
) -> Error {
    loop {
        if let Err(err) = step(election, slot, report).await {
            match err {
                Error::SessionExpired if election.rejoin => {
                    warn!("session expired; joining again on the new session")
                }
                err => return err,
            }
        }
    }
}

/// One turn: enter the queue if out of it, wait to be first, lead until the loss.
async fn step(
    election: &LeaderElection,
    slot: &mut Option<Contender>,
    report: &Report,
) -> Result<()> {
    let contender = match slot {
        Some(contender) => contender,
        None => {
            let entered = election.enter().await?;
            debug!(node = %entered.node(), "re-joined the queue");
            slot.insert(entered)
        }
    };
    match contender.wait_first(None).await {
        Ok(_) => {}
        Err(Error::LockLost { node }) => {
            warn!(%node, "our node was deleted while we waited; joining again");
            forget(slot);
            return Ok(());
        }
        Err(err) => {
            if matches!(err, Error::SessionExpired) {
                forget(slot);
            }
            return Err(err);
        }
    }
    let loss = lead(contender, election.session.tolerates_suspension(), report).await;
    match loss {
        Loss::Suspended => {
            if let Err(err) = reconnected(contender.client()).await {
                forget(slot);
                return Err(err);
            }
            Ok(())
        }
        Loss::NodeDeleted => {
            forget(slot);
            Ok(())
        }
        Loss::SessionExpired => {
            forget(slot);
            Err(Error::SessionExpired)
        }
        Loss::Closed => Err(Error::Closed),
    }
}

/// Forgets a node that went with its session (or was deleted).
fn forget(slot: &mut Option<Contender>) {
    if let Some(contender) = slot.take() {
        contender.disown();
    }
}

/// Leads until the leadership is lost; returns why.
async fn lead(contender: &Contender, tolerate_suspension: bool, report: &Report) -> Loss {
    let (lose, loss) = watch::channel(None);
    let leadership = Leadership {
        term: u64::try_from(contender.czxid()).unwrap_or_default(),
        node: contender.node().to_owned(),
        loss,
    };
    info!(term = leadership.term, node = %leadership.node, "leading");
    report.campaign.send_replace(Campaign::Leading(leadership));
    report.role(Role::Leader);
    let lost = contender
        .probe()
        .lost(tolerate_suspension, std::future::ready(()))
        .await;
    report.role(Role::Follower);
    lose.send_replace(Some(lost));
    report.campaign.send_replace(Campaign::Following);
    warn!(loss = ?lost, "stepped down");
    lost
}
