//! How long the servers are certainly still keeping a session: the bound on every hold's
//! trust, whatever the process went through (a pause, an overloaded host, a one-way
//! partition).
//!
//! The servers expire a session once they have heard nothing from it for the negotiated
//! session timeout. A request of ours that they answered reached them after we sent it, so
//! they keep the session at least until *the time we sent it plus the timeout*. That is
//! the session's *confirmed* time: it moves forward only with answers to our own requests,
//! never with notifications (those keep coming over a partition in which the servers hear
//! nothing from us) and never by itself. A hold made on the session is trusted only before
//! it: a process that was paused past it (a stop signal, a long garbage collection, a
//! migrated VM whose monotonic clock ran on) learns that its holds are lost at its first
//! look, before any I/O completes.
//!
//! The session keeper sends one small request (an `exists` of the root) every third of
//! the timeout, so a healthy session is always confirmed for at least two thirds of it
//! ahead. Once the confirmed time has passed, holds made before stay lost even if a later
//! answer confirms the session again: the *epoch* counts such ends.
//!
//! One event ends every hold of an epoch, and all of them report the same cause: the first
//! session-wide loss seen in the epoch (by the clock, [`Loss::Lapsed`]; by the connection,
//! [`Loss::Suspended`] or [`Loss::SessionExpired`]; or [`Loss::Closed`]), recorded once
//! with [`Liveness::end`] by whichever sees it first: the session's keeper (which follows
//! the connection and the close, so that a hold needs no task of its own to learn them), a
//! hold's monitor, or a confirmation. The others read it back instead of what they saw
//! themselves later, in their own order.
//!
//! The clock is the process's monotonic clock (`Instant`), which on Linux runs on while the
//! process is stopped, but not while the whole machine sleeps.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tracing::{debug, debug_span, Instrument};
use zookeeper_client::{Client, SessionId};

use crate::loss::Loss;

/// How many ended epochs' causes are remembered: a hold of an older epoch saw its own loss
/// long ago (its monitor publishes it as soon as the epoch ends).
const CAUSES_KEPT: usize = 16;

/// What the servers confirmed of one ZooKeeper session.
#[derive(Debug)]
pub(crate) struct Liveness {
    /// The session it is about.
    session: SessionId,
    /// The instant every other one is counted from.
    origin: Instant,
    /// The negotiated session timeout.
    timeout: Duration,
    /// Until when (nanoseconds after `origin`) the servers certainly keep the session.
    confirmed: AtomicU64,
    /// How many session-wide losses ended the holds made before them (see [`end`](Self::end)).
    epoch: AtomicU64,
    /// The causes of the last epochs that ended, with their epoch; also taken to end one.
    causes: Mutex<VecDeque<(u64, Loss)>>,
    /// Notified when an epoch ends.
    ended: Notify,
}

impl Liveness {
    /// The session of `client`, whose connect request was sent at `dialed` or later.
    pub(crate) fn of(client: &Client, dialed: Instant) -> Arc<Liveness> {
        Liveness::new(client.session_id(), dialed, client.session_timeout())
    }

    fn new(session: SessionId, dialed: Instant, timeout: Duration) -> Arc<Liveness> {
        // Confirmed for a timeout after the connect request was sent.
        let confirmed = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let liveness = Liveness {
            session,
            origin: dialed,
            timeout,
            confirmed: AtomicU64::new(confirmed),
            epoch: AtomicU64::new(0),
            causes: Mutex::new(VecDeque::new()),
            ended: Notify::new(),
        };
        Arc::new(liveness)
    }

    /// Whether it is about the session of `client`.
    pub(crate) fn is_of(&self, client: &Client) -> bool {
        self.session == client.session_id()
    }

    /// The current epoch: holds made now are trusted while it lasts and the confirmed time
    /// has not passed.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Until when the servers certainly keep the session.
    pub(crate) fn confirmed(&self) -> Instant {
        self.origin + Duration::from_nanos(self.confirmed.load(Ordering::SeqCst))
    }

    /// Whether a hold made in `epoch` can still be trusted now.
    pub(crate) fn trusts(&self, epoch: u64) -> bool {
        Instant::now() < self.confirmed() && self.epoch() == epoch
    }

    /// Resolves once a hold made in `epoch` can no longer be trusted (the confirmed time
    /// passed, or a session-wide loss ended the epoch); with the cause that ended it.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn lapsed(&self, epoch: u64) -> Loss {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if !self.trusts(epoch) {
                return self.end(epoch, Loss::Lapsed);
            }
            tokio::select! {
                () = tokio::time::sleep_until(self.confirmed().into()) => {}
                () = ended => {}
            }
        }
    }

    /// Ends `epoch` because of `seen`, a loss of the whole session (never the deletion of
    /// one node, nor the end of one hold), unless it ended already; returns the cause that
    /// ended it, the same for every hold of the epoch: `seen` if it came first. A hold of
    /// an epoch too old to be remembered keeps `seen`.
    pub(crate) fn end(&self, epoch: u64, seen: Loss) -> Loss {
        let Ok(mut causes) = self.causes.lock() else {
            return seen;
        };
        if let Some(&(_, cause)) = causes.iter().find(|(ended, _)| *ended == epoch) {
            return cause;
        }
        if self.epoch() != epoch {
            return seen;
        }
        if causes.len() == CAUSES_KEPT {
            causes.pop_front();
        }
        causes.push_back((epoch, seen));
        self.epoch.fetch_add(1, Ordering::SeqCst);
        drop(causes);
        self.ended.notify_waiters();
        seen
    }

    /// Records that the servers answered a request of ours sent at `sent` (or later).
    pub(crate) fn confirm(&self, sent: Instant) {
        let until = sent.saturating_duration_since(self.origin) + self.timeout;
        let until = u64::try_from(until.as_nanos()).unwrap_or(u64::MAX);
        // Whoever sees the confirmed time passed first ends the epoch, before moving it: a
        // hold of the old epoch never looks trusted again.
        if Instant::now() >= self.confirmed() {
            self.end(self.epoch(), Loss::Lapsed);
        }
        self.confirmed.fetch_max(until, Ordering::SeqCst);
    }
}

/// Confirms `client`'s session every third of its timeout while the client lives.
///
/// # Cancel safety
/// Cancel safe.
pub(crate) async fn keep_confirming(liveness: Arc<Liveness>, client: Weak<Client>) {
    let every = liveness.timeout / 3;
    loop {
        tokio::time::sleep(every).await;
        let Some(client) = client.upgrade() else {
            return;
        };
        let sent = Instant::now();
        let span = debug_span!("zk.session.confirm", session = %client.session_id());
        match client.check_stat("/").instrument(span).await {
            Ok(_) => liveness.confirm(sent),
            Err(err) => debug!(%err, "session not confirmed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_trusted_until_the_confirmed_time_only() {
        let timeout = Duration::from_secs(4);
        let liveness = Liveness::new(SessionId(1), Instant::now(), timeout);
        let epoch = liveness.epoch();
        assert!(liveness.trusts(epoch));
        let long_ago = Instant::now() - 2 * timeout;
        let lapsed = Liveness::new(SessionId(1), long_ago, timeout);
        assert!(!lapsed.trusts(lapsed.epoch()));
    }

    #[test]
    fn a_late_confirmation_never_revives_an_old_hold() {
        let timeout = Duration::from_secs(4);
        let liveness = Liveness::new(SessionId(1), Instant::now() - 2 * timeout, timeout);
        let old = liveness.epoch();
        liveness.confirm(Instant::now());
        assert!(
            !liveness.trusts(old),
            "a hold of the lapsed epoch is trusted again"
        );
        assert!(liveness.trusts(liveness.epoch()));
    }

    #[test]
    fn every_hold_of_an_epoch_reads_the_cause_that_ended_it_first() {
        let liveness = Liveness::new(SessionId(1), Instant::now(), Duration::from_secs(4));
        let epoch = liveness.epoch();
        assert_eq!(liveness.end(epoch, Loss::Suspended), Loss::Suspended);
        assert!(
            !liveness.trusts(epoch),
            "a hold of an ended epoch is trusted"
        );
        assert_eq!(liveness.end(epoch, Loss::Lapsed), Loss::Suspended);
        assert_eq!(liveness.end(epoch, Loss::SessionExpired), Loss::Suspended);
        let next = liveness.epoch();
        assert!(
            liveness.trusts(next),
            "a hold made after the end is not trusted"
        );
        assert_eq!(liveness.end(next, Loss::Closed), Loss::Closed);
    }
}
