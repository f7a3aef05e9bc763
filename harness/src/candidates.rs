//! Looking at a set of election candidates: who leads, and waiting until one does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::{Candidate, LeaderElection, Role, Session};

use crate::wait::bounded;

/// One place in a list of candidates, which keeps its index when its candidate has left
/// (resigned, dropped): an `Arc<Candidate>`, or an `Option<Candidate>`.
pub trait Seat {
    /// The candidate in this place, if it has one.
    fn candidate(&self) -> Option<&Candidate>;
}

impl Seat for Arc<Candidate> {
    fn candidate(&self) -> Option<&Candidate> {
        Some(self)
    }
}

impl Seat for Option<Candidate> {
    fn candidate(&self) -> Option<&Candidate> {
        self.as_ref()
    }
}

/// Joins the election at `root` on `session` as `id`; fails the test if it cannot.
pub async fn join_election(session: &Session, root: &str, id: impl Into<String>) -> Candidate {
    let id = id.into();
    let election = LeaderElection::new(session, root, id.clone())
        .unwrap_or_else(|err| panic!("an election at {root:?}: {err}"));
    election
        .join()
        .await
        .unwrap_or_else(|err| panic!("{id} joins the election at {root}: {err}"))
}

/// The indices of the candidates whose [`Candidate::role`] is `Leader` now.
pub fn leaders<S: Seat>(seats: &[S]) -> Vec<usize> {
    seats
        .iter()
        .enumerate()
        .filter(|(_, seat)| seat.candidate().is_some_and(|c| c.role() == Role::Leader))
        .map(|(i, _)| i)
        .collect()
}

/// Waits, on the candidates' role changes (no polling), until exactly one of them reports
/// `Leader`; returns its index and when that was seen. Fails the test if two report
/// `Leader` at once, if a campaign ends, or if none leads within `within`.
pub async fn await_one_leader<S: Seat>(seats: &[S], within: Duration) -> (usize, Instant) {
    // Subscribed before the first look, so that no change between a look and the wait is
    // missed.
    let mut roles: Vec<_> = seats
        .iter()
        .filter_map(Seat::candidate)
        .map(Candidate::roles)
        .collect();
    assert!(!roles.is_empty(), "no candidate left to lead");
    let wait = async {
        loop {
            let now = leaders(seats);
            assert!(now.len() <= 1, "two candidates report Leader: {now:?}");
            if let [one] = now[..] {
                return (one, Instant::now());
            }
            let changes = roles.iter_mut().map(|r| Box::pin(r.changed()));
            let (changed, _, _) = futures::future::select_all(changes).await;
            changed.expect("a candidate's campaign ended");
        }
    };
    bounded("exactly one candidate leads", within, wait).await
}

/// The ids of the participants of `election`, in queue order (the leader first), as
/// [`LeaderElection::participants`] lists them; fails the test if it cannot list them, or
/// if a participant shows no id.
pub async fn participant_ids(election: &LeaderElection) -> Vec<String> {
    let participants = election
        .participants()
        .await
        .unwrap_or_else(|err| panic!("participants(): {err}"));
    (participants.into_iter())
        .map(|p| p.id.unwrap_or_else(|| panic!("{}: no id", p.node)))
        .collect()
}
