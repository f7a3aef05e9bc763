//! A candidate and its campaign: follows, leads while its leadership is trusted, steps
//! down, and joins again, until it resigns.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{watch, Notify};
use tracing::{debug, info, info_span, warn, Instrument};

use super::leadership::{Exit, Leadership};
use super::{LeaderElection, Role};
use crate::error::{Error, Result};
use crate::hold::{Announce, Holding, NodeWatch};
use crate::loss::Loss;
use crate::queue::{Left, Ticket, Wait};

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
    pub(super) fn start(election: LeaderElection, contender: Ticket) -> Candidate {
        let (campaign_tx, campaign) = watch::channel(Campaign::Following);
        let (roles_tx, roles) = watch::channel(Role::Follower);
        let (ended_tx, ended) = watch::channel(None);
        let exit = Exit {
            stop: Arc::new(Notify::new()),
            ended,
        };
        let span = info_span!("zk.election.candidate", path = %election.path(), id = %election.id);
        let report = Broadcast {
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
    /// * [`Error::NoAuth`], naming the candidate ahead, as soon as this one would wait on a
    ///   node it may not read (see [`Mutex::lock`](crate::Mutex::lock)): the campaign ends,
    ///   the node is deleted.
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
    /// * The error that had ended the campaign already, as [`leadership`](Self::leadership)
    ///   returns it (for example [`Error::SessionExpired`] without
    ///   [`rejoin_after_expiry`](crate::LeaderElection::rejoin_after_expiry), or
    ///   [`Error::Closed`]); its node, if any, is deleted in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: the node is deleted in the background.
    ///
    /// Takes `&self`, so a candidate shared by tasks (`Arc<Candidate>`) can resign; the
    /// returned future borrows nothing (it can be spawned). Once resigned, the candidate's
    /// [`leadership`](Self::leadership) returns [`Error::Closed`].
    pub fn resign(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let exit = self.exit.clone();
        async move { exit.leave().await }
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        self.exit.stop();
    }
}

/// Where a campaign publishes: the campaign, and the role derived from it.
struct Broadcast {
    campaign: watch::Sender<Campaign>,
    roles: watch::Sender<Role>,
    /// Handed to every leadership.
    exit: Exit,
}

impl Broadcast {
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
    /// In the queue waiting to lead (its node entered, or kept after a suspension, to be
    /// looked at once back), or out of it (joins again at the next step).
    Waiting(Option<Ticket>),
    /// Leading.
    Leading(Holding),
}

/// Follows and leads until stopped (then leaves the queue) or an error ends it.
async fn campaign(election: LeaderElection, contender: Ticket, report: Broadcast) -> Result<()> {
    let mut seat = Seat::Waiting(Some(contender));
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

/// One step of a campaign: wait to lead (joining again if out), or lead until the
/// leadership is lost.
///
/// # Cancel safety
/// Cancel safe: the seat keeps what was reached.
async fn step(election: &LeaderElection, seat: &mut Seat, report: &Broadcast) -> Result<()> {
    match seat {
        Seat::Waiting(waiting) => {
            let queue = &election.queue;
            let first = queue.acquire(&election.session, waiting, Wait::Forever);
            let ticket = first.await?.ok_or(Error::Closed)?;
            // The role steps down as part of the loss: whoever sees the loss sees it.
            let roles = report.roles.clone();
            let step_down: Announce = Box::new(move || {
                roles.send_if_modified(|role| {
                    std::mem::replace(role, Role::Follower) != Role::Follower
                });
            });
            let holding = Holding::start(ticket, NodeWatch::Now, Some(step_down));
            seat.lead(holding, report, &election.id);
        }
        Seat::Leading(holding) => {
            let loss = holding.core().lost().await;
            report.publish(Campaign::Following);
            warn!(?loss, "stepped down");
            match loss {
                // The session may have survived: keep the node, and look at it once back.
                Loss::Suspended | Loss::Lapsed | Loss::Unwatched => seat.step_down(true),
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
    /// From waiting to leading with `holding`.
    fn lead(&mut self, holding: Holding, report: &Broadcast, id: &Arc<str>) {
        let leadership = Leadership::new(holding.core().clone(), report.exit.clone(), id.clone());
        info!(term = leadership.term(), node = %leadership.node(), "leading");
        report.publish(Campaign::Leading(leadership));
        *self = Seat::Leading(holding);
    }

    /// From leading to waiting with the node kept (`keep`: it may still be there) or out
    /// of the queue.
    fn step_down(&mut self, keep: bool) {
        let Seat::Leading(holding) = std::mem::replace(self, Seat::Waiting(None)) else {
            return;
        };
        match (holding.into_ticket(), keep) {
            (Some(contender), true) => *self = Seat::Waiting(Some(contender)),
            (Some(contender), false) => contender.disown(),
            (None, _) => {}
        }
    }

    /// Leaves the election: deletes the node, whatever the seat.
    async fn leave(self) -> Result<()> {
        let contender = match self {
            Seat::Waiting(None) => return Ok(()),
            Seat::Leading(holding) => return holding.release().await,
            Seat::Waiting(Some(contender)) => contender,
        };
        let node = contender.node().to_owned();
        match contender.leave().await? {
            Left::Deleted | Left::WithSession => {
                debug!(%node, "resigned");
                Ok(())
            }
            Left::AlreadyGone => Err(Error::Lost { node }),
        }
    }
}
