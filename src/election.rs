//! Leader election: [`LeaderElection`], [`Candidate`], [`Leadership`].
//!
//! One leader (master) among the candidates on a path, the rest followers; leadership
//! passes in order of arrival, and a leader is told as soon as it can no longer trust its
//! leadership.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tracing::{debug, info, info_span, warn, Instrument};

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::guard::hold;
use crate::path;
use crate::queue::{Blockers, Contender, Holding, Left, NodeWatch, Queue, Turn, Wait, MAX_DATA};
use crate::session::Session;
use crate::trust::{Announce, Loss, Trust};

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
/// * **Taking over.** A follower leads only once its own node is known to exist: one whose
///   node was deleted by someone joins the queue again, at its end, and never leads on
///   the old node.
/// * **Stepping down.** A leader becomes [`Role::Follower`] as soon as its leadership can no
///   longer be trusted: the session expires or is closed, the connection is suspended (see
///   [`SessionBuilder::tolerate_suspension`](crate::SessionBuilder::tolerate_suspension)),
///   or its node is deleted. It never learns of the loss later than the servers could let
///   the next candidate lead. After a suspension that the session survived, it leads again
///   with the same term once it has seen its node still there (its node was first all
///   along, so nobody else led meanwhile).
/// * **Terms.** [`Leadership::term`] is the zxid that created the leader's node: it grows
///   with every new leader, a fencing token for what the leader writes.
/// * **Session expiry.** A candidate re-joins the queue on the new session by default
///   ([`LeaderElection::rejoin_after_expiry`]).
/// * **Leaving.** [`Candidate::resign`] and dropping the candidate delete its node.
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
    id: Arc<str>,
    rejoin: bool,
    backoff: Duration,
}

/// The first pause [`LeaderElection::run`] makes after a term that ended quickly.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

impl LeaderElection {
    /// An election on `path` in which this process takes part as `id`.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed or too long.
    /// * [`Error::InvalidArgument`] if `id` is empty or larger than ZooKeeper accepts in a
    ///   node (960 KiB here).
    ///
    /// Nothing is sent to ZooKeeper.
    pub fn new(session: &Session, path: &str, id: impl Into<String>) -> Result<LeaderElection> {
        let id = id.into();
        if id.is_empty() {
            return Err(Error::InvalidArgument("participant id is empty".into()));
        }
        if id.len() > MAX_DATA {
            return Err(Error::InvalidArgument(format!(
                "participant id is {} bytes; a node holds at most {MAX_DATA}",
                id.len()
            )));
        }
        Ok(LeaderElection {
            session: session.clone(),
            queue: Queue::new(path, "latch-", Blockers::EVERY, session.node_acl())?,
            id: id.into(),
            rejoin: true,
            backoff: Duration::from_secs(10),
        })
    }

    /// Whether a candidate whose session expired joins again on the new session
    /// (default `true`). With `false` its campaign ends with [`Error::SessionExpired`].
    pub fn rejoin_after_expiry(mut self, rejoin: bool) -> LeaderElection {
        self.rejoin = rejoin;
        self
    }

    /// The longest pause [`run`](Self::run) makes before it joins again after a term that
    /// ended quickly (default 10 s), so that a leader whose work fails at once (its
    /// database is down) does not hammer the ensemble with terms. The pause starts at
    /// 100 ms and doubles, up to this, while terms keep ending within the pause before
    /// them; a term that lasts longer than that starts it again at 100 ms. Zero: no pause.
    pub fn backoff(mut self, max: Duration) -> LeaderElection {
        self.backoff = max;
        self
    }

    /// The ACL of the nodes this election creates (its candidates' nodes, and the election
    /// path and its parents where it makes them), instead of the session's
    /// [`node_acl`](crate::SessionBuilder::node_acl). With
    /// [`NodeAcl::CreatorAllWorldRead`], observers without credentials can still call
    /// [`participants`](Self::participants) and [`leader`](Self::leader).
    ///
    /// A creator-only ACL on a session without credentials makes [`join`](Self::join) fail
    /// with [`Error::InvalidAcl`] (the servers refuse it); nothing is created.
    pub fn node_acl(mut self, acl: NodeAcl) -> LeaderElection {
        self.queue = self.queue.with_acl(acl);
        self
    }

    /// The election path.
    pub fn path(&self) -> &str {
        self.queue.root()
    }

    /// The session the election runs on.
    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    /// Enters the queue and returns at once, as a [`Candidate`] that follows or leads in
    /// the background.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the ACL of the path (or a parent) denies creating nodes
    ///   (also how a wrong digest password shows); nothing is created.
    /// * [`Error::InvalidAcl`] if the servers refuse the [`NodeAcl`] (creator-only
    ///   without credentials).
    /// * [`Error::EphemeralParent`] if the path lies under an ephemeral node.
    /// * [`Error::ConnectionLoss`] as [`Mutex::lock`](crate::Mutex::lock).
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: a node created for a dropped `join()` is deleted in the background.
    pub async fn join(&self) -> Result<Candidate> {
        let span = info_span!("zk.election.join", path = %self.path(), id = %self.id, acl = ?self.queue.acl());
        async {
            let contender = self.enter().await?;
            info!(node = %contender.node(), "joined");
            Ok(Candidate::start(self.clone(), contender))
        }
        .instrument(span)
        .await
    }

    /// Enters the queue on the live session (waiting for one).
    async fn enter(&self) -> Result<Contender> {
        let entered = self
            .queue
            .enter(&self.session, self.id.as_bytes(), Wait::Forever);
        entered.await?.ok_or(Error::Closed)
    }

    /// The current leader, if anyone is in the queue; works without joining.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read.
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down
    ///   (or a new session is being made): it does not wait.
    /// * [`Error::ConnectionLoss`] if the connection broke while it read.
    /// * [`Error::Closed`] if the session was closed.
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
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down
    ///   (or a new session is being made): it does not wait.
    /// * [`Error::ConnectionLoss`] if the connection broke while it read.
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        let span = info_span!("zk.election.participants", path = %self.path());
        let contenders = self
            .queue
            .contenders(&self.session)
            .instrument(span)
            .await?;
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
    /// lost (then `lead`'s future is dropped); joins again and repeats, after a pause if the
    /// term was short (see [`backoff`](Self::backoff)). Returns only on error; drop the
    /// future to stop (the node is deleted).
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
        let mut pause = Duration::ZERO;
        loop {
            let candidate = self.join().await?;
            let leadership = candidate.leadership().await?;
            let (term, started) = (leadership.term(), tokio::time::Instant::now());
            tokio::select! {
                () = lead(leadership.clone()) => info!(term, "leader finished its work"),
                loss = leadership.lost() => warn!(term, ?loss, "leadership lost while leading"),
            }
            match candidate.resign().await {
                Ok(()) | Err(Error::Lost { .. }) => {}
                Err(err) => return Err(err),
            }
            pause = match started.elapsed() > pause.max(FIRST_BACKOFF) {
                true => Duration::ZERO,
                false => (pause * 2).clamp(FIRST_BACKOFF, self.backoff.max(FIRST_BACKOFF)),
            }
            .min(self.backoff);
            if !pause.is_zero() {
                debug!(?pause, "the term was short; pausing before joining again");
                tokio::time::sleep(pause).await;
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

impl Campaign {
    /// The role this state means: leading while the leadership is trusted.
    fn role(&self) -> Role {
        match self {
            Campaign::Leading(leadership) if !leadership.is_lost() => Role::Leader,
            _ => Role::Follower,
        }
    }
}

/// A member of an election; leaves the queue when dropped (in the background).
#[derive(Debug)]
pub struct Candidate {
    campaign: watch::Receiver<Campaign>,
    roles: watch::Receiver<Role>,
    exit: Exit,
}

impl Candidate {
    fn start(election: LeaderElection, contender: Contender) -> Candidate {
        let (campaign_tx, campaign) = watch::channel(Campaign::Following);
        let (roles_tx, roles) = watch::channel(Role::Follower);
        let (ended_tx, ended) = watch::channel(None);
        let exit = Exit {
            stop: Arc::new(Notify::new()),
            ended,
        };
        let span = info_span!("zk.election.candidate", path = %election.path(), id = %election.id);
        let report = Report {
            campaign: campaign_tx,
            roles: roles_tx,
            exit: exit.clone(),
        };
        let run = async move {
            let ended = self::campaign(election, contender, report).await;
            ended_tx.send_replace(Some(ended));
        };
        drop(tokio::spawn(run.instrument(span)));
        Candidate {
            campaign,
            roles,
            exit,
        }
    }

    /// The current role: what [`roles`](Self::roles) says, and [`Role::Follower`] as soon
    /// as the leadership can no longer be trusted. The published role changes first (a
    /// loss steps it down just before the leadership reads as lost; a new leadership steps
    /// it up just before [`leadership`](Self::leadership) returns it), so whoever saw a
    /// role there sees it here.
    pub fn role(&self) -> Role {
        let lost = match &*self.campaign.borrow() {
            Campaign::Leading(leadership) => leadership.is_lost(),
            Campaign::Following => false,
            Campaign::Ended(_) => true,
        };
        match *self.roles.borrow() {
            Role::Leader if !lost => Role::Leader,
            _ => Role::Follower,
        }
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

    /// Leaves the election and returns once the node is gone (deleted, or gone with its
    /// session), so the next candidate can lead. While the connection is down it waits for
    /// it to come back, at most until the servers would have expired the session (1.5
    /// session timeouts); it never fails for a connection that is down.
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if it led and its leadership was lost before the call, or its
    ///   node was already gone (session expired, deleted).
    /// * [`Error::NoAuth`] if the servers refuse the delete: the node stays until the
    ///   session ends.
    ///
    /// # Cancel safety
    /// Cancel safe: the node is deleted in the background.
    pub async fn resign(self) -> Result<()> {
        self.exit.clone().leave().await
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        self.exit.stop();
    }
}

/// Leadership of an election, held while the candidate's node is first and trusted.
///
/// [`release`](Self::release) resigns the candidate that leads (as
/// [`Candidate::resign`]): it leaves the election.
#[derive(Clone, Debug)]
pub struct Leadership {
    pub(crate) holding: Term,
}

hold!(Leadership, "leadership");

impl Leadership {
    /// The term: the zxid that created the leader's node, greater for every later leader.
    /// Use it as a fencing token (it is [`fencing_token`](Self::fencing_token)).
    pub fn term(&self) -> u64 {
        self.holding.token()
    }
}

/// What a [`Leadership`] holds: the leader's node in one term, its trust, and the way out
/// of the election.
#[derive(Clone, Debug)]
pub(crate) struct Term {
    token: u64,
    node: Arc<str>,
    trust: Trust,
    exit: Exit,
}

impl Term {
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    pub(crate) fn trust(&self) -> &Trust {
        &self.trust
    }

    /// Resigns the candidate; [`Error::Lost`] if this term was lost before.
    async fn release(self) -> Result<()> {
        let lost = self.trust.is_lost();
        match (self.exit.leave().await, lost) {
            (Ok(()) | Err(Error::Lost { .. }), true) => Err(Error::Lost {
                node: self.node.to_string(),
            }),
            (left, _) => left,
        }
    }
}

/// The way out of an election, shared by a candidate and its leaderships: stops the
/// campaign and waits for its end (its node gone).
#[derive(Clone, Debug)]
struct Exit {
    stop: Arc<Notify>,
    ended: watch::Receiver<Option<Result<()>>>,
}

impl Exit {
    /// Stops the campaign.
    fn stop(&self) {
        self.stop.notify_one();
    }

    /// Stops the campaign and returns how it ended.
    async fn leave(mut self) -> Result<()> {
        self.stop();
        match self.ended.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone().unwrap_or(Err(Error::Closed)),
            // The campaign's task ended without a word: its runtime shut down.
            Err(_) => Err(Error::Closed),
        }
    }
}

/// Where a campaign publishes: the campaign, and the role derived from it.
struct Report {
    campaign: watch::Sender<Campaign>,
    roles: watch::Sender<Role>,
    /// Handed to every leadership.
    exit: Exit,
}

impl Report {
    /// The role first, then the campaign: whoever sees a leadership (or its end) in the
    /// campaign sees the role that goes with it.
    fn publish(&self, campaign: Campaign) {
        let role = campaign.role();
        self.roles.send_if_modified(|current| {
            let changed = *current != role;
            *current = role;
            changed
        });
        self.campaign.send_replace(campaign);
    }
}

/// A candidate's place in the election, between the steps of its campaign.
enum Seat {
    /// Out of the queue: joins at the next step.
    Out,
    /// In the queue, waiting to lead.
    Queued(Contender),
    /// Led until its connection was suspended; leads again if its node is still there.
    Cut(Contender),
    /// Leading.
    Leading(Holding),
}

/// Follows and leads until stopped (then leaves the queue) or an error ends it.
async fn campaign(election: LeaderElection, contender: Contender, report: Report) -> Result<()> {
    let mut seat = Seat::Queued(contender);
    let stop = report.exit.stop.clone();
    let ended = loop {
        tokio::select! {
            stepped = step(&election, &mut seat, &report) => {
                if let Err(err) = stepped {
                    break Err(err);
                }
            }
            () = stop.notified() => break Ok(()),
        }
    };
    report.publish(Campaign::Ended(match &ended {
        Ok(()) => Error::Closed,
        Err(err) => err.clone(),
    }));
    ended?;
    seat.leave().await
}

/// One step of a campaign: join, wait to lead, or lead until the leadership is lost.
///
/// # Cancel safety
/// Cancel safe: the seat keeps what was reached.
async fn step(election: &LeaderElection, seat: &mut Seat, report: &Report) -> Result<()> {
    match seat {
        Seat::Out => {
            let joined = election.enter().await?;
            info!(node = %joined.node(), "joined again");
            *seat = Seat::Queued(joined);
        }
        Seat::Queued(contender) | Seat::Cut(contender) => {
            let turn = match contender.is_first() {
                true => contender.still_first().await?,
                false => contender.wait_first(Wait::Forever).await?,
            };
            match turn {
                Turn::First => seat.lead(report),
                Turn::Late | Turn::Evicted => *seat = Seat::Out,
                Turn::Expired if election.rejoin => *seat = Seat::Out,
                Turn::Expired => return Err(Error::SessionExpired),
            }
        }
        Seat::Leading(holding) => {
            let loss = holding.trust().lost().await;
            report.publish(Campaign::Following);
            warn!(?loss, "stepped down");
            match loss {
                // The session may have survived: keep the node, and look at it once back.
                Loss::Suspended | Loss::Lapsed => seat.step_down(true),
                Loss::NodeDeleted => seat.step_down(false),
                Loss::SessionExpired if election.rejoin => seat.step_down(false),
                Loss::SessionExpired => return Err(Error::SessionExpired),
                Loss::Closed => return Err(Error::Closed),
            }
        }
    }
    Ok(())
}

impl Seat {
    /// From waiting to leading: the contender is first, with its node known to exist.
    fn lead(&mut self, report: &Report) {
        let (Seat::Queued(contender) | Seat::Cut(contender)) = std::mem::replace(self, Seat::Out)
        else {
            return;
        };
        // The role steps down as part of the loss: whoever sees the loss sees it.
        let roles = report.roles.clone();
        let step_down: Announce = Box::new(move || {
            roles
                .send_if_modified(|role| std::mem::replace(role, Role::Follower) != Role::Follower);
        });
        let holding = Holding::start(contender, NodeWatch::Now, Some(step_down));
        let leadership = Leadership {
            holding: Term {
                token: holding.token(),
                node: holding.node().into(),
                trust: holding.trust().clone(),
                exit: report.exit.clone(),
            },
        };
        info!(term = leadership.term(), node = %leadership.node(), "leading");
        report.publish(Campaign::Leading(leadership));
        *self = Seat::Leading(holding);
    }

    /// From leading to cut off (`keep`: the node may still be there) or out of the queue.
    fn step_down(&mut self, keep: bool) {
        let Seat::Leading(holding) = std::mem::replace(self, Seat::Out) else {
            return;
        };
        match (holding.into_contender(), keep) {
            (Some(contender), true) => *self = Seat::Cut(contender),
            (Some(contender), false) => contender.disown(),
            (None, _) => {}
        }
    }

    /// Leaves the election: deletes the node, whatever the seat.
    async fn leave(self) -> Result<()> {
        let contender = match self {
            Seat::Out => return Ok(()),
            Seat::Leading(holding) => return holding.release().await,
            Seat::Queued(contender) | Seat::Cut(contender) => contender,
        };
        let node = contender.node().to_owned();
        match contender.leave().await? {
            Left::Deleted | Left::WithSession => {
                info!(%node, "resigned");
                Ok(())
            }
            Left::AlreadyGone => Err(Error::Lost { node }),
        }
    }
}
