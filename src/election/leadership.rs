//! A leadership: what a leading candidate holds in one term.

use std::sync::Arc;

use tokio::sync::{watch, Notify};

use crate::error::{Error, Result};
use crate::fenced::Fence;
use crate::guard::hold;
use crate::trust::Trust;

/// Leadership of an election, held while the candidate's node is first and trusted.
///
/// [`release`](Self::release) resigns the candidate that leads (as
/// [`Candidate::resign`](crate::Candidate::resign)): it leaves the election.
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
    pub(super) token: u64,
    pub(super) node: Arc<str>,
    pub(super) trust: Trust,
    pub(super) exit: Exit,
    /// For fenced writes, revocation and proclaiming.
    pub(super) fence: Fence,
    /// The id the leader joined with.
    pub(super) id: Arc<str>,
}

impl Term {
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    pub(crate) fn fence(&self) -> Fence {
        self.fence.clone()
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
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
pub(super) struct Exit {
    pub(super) stop: Arc<Notify>,
    pub(super) ended: watch::Receiver<Option<Result<()>>>,
}

impl Exit {
    /// Stops the campaign.
    pub(super) fn stop(&self) {
        self.stop.notify_one();
    }

    /// Stops the campaign and returns how it ended.
    pub(super) async fn leave(mut self) -> Result<()> {
        self.stop();
        match self.ended.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone().unwrap_or(Err(Error::Closed)),
            // The campaign's task ended without a word: its runtime shut down.
            Err(_) => Err(Error::Closed),
        }
    }
}
