//! `zk-recipes elect PATH --id ID -- CMD`: joins the election and runs CMD only while
//! leading.
//!
//! * **Leading.** CMD starts when this candidate leads, and is stopped (SIGTERM, then
//!   SIGKILL after `--kill-after`) as soon as leadership is lost; the candidate stays in
//!   the election and runs CMD again when it leads again.
//! * **CMD ends by itself.** The candidate resigns, so that another may lead, waits
//!   `--restart-after` and joins again, at the end of the queue.
//! * **`--once`.** Leads once: exits with CMD's status, or 79 if leadership was lost.
//! * **Signals.** SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to a running CMD (as
//!   [`held`] says); zk-recipes then
//!   resigns and exits with CMD's status (128+N if CMD was not running).
//!
//! The election is a [`LeaderElection`]: candidates lead in order of arrival, shared with
//! Rust services and Curator `LeaderLatch` on the same path.

use std::ops::ControlFlow;

use tracing::{info_span, warn, Instrument};
use zk_recipes::{Candidate, Error, LeaderElection, Session};

use crate::args::{Connection, Elect, Run};
use crate::held::{self, Outcome};
use crate::say::say;
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;

impl OnSession for Elect {
    fn connection(&self) -> &Connection {
        &self.connection
    }

    fn holding(&self) -> Option<&Run> {
        Some(&self.run)
    }

    async fn run(&self, session: &Session, signals: &mut Signals) -> u8 {
        match LeaderElection::new(session, &self.path, self.id.as_str()) {
            Ok(election) => campaign(&election, self, signals).await,
            Err(err) => status::report(&err),
        }
    }
}

/// Joins, leads, and joins again after CMD ended by itself, until zk-recipes is to exit.
async fn campaign(election: &LeaderElection, args: &Elect, signals: &mut Signals) -> u8 {
    loop {
        let candidate = match signals.or(election.join()).await {
            Err(signal) => return status::of_signal(signal),
            Ok(Err(err)) => return status::report(&err),
            Ok(Ok(candidate)) => candidate,
        };
        let led = lead(&candidate, args, signals).await;
        resign(candidate).await;
        if let ControlFlow::Break(status) = led {
            return status;
        }
        if let Err(signal) = signals.or(tokio::time::sleep(args.restart_after)).await {
            return status::of_signal(signal);
        }
    }
}

/// Runs CMD each time `candidate` leads. Continues when CMD ended by itself (resign and
/// join again); breaks with zk-recipes' exit status when it is to exit.
async fn lead(candidate: &Candidate, args: &Elect, signals: &mut Signals) -> ControlFlow<u8> {
    loop {
        let leadership = match signals.or(candidate.leadership()).await {
            Err(signal) => return ControlFlow::Break(status::of_signal(signal)),
            Ok(Err(err)) => return ControlFlow::Break(status::report(&err)),
            Ok(Ok(leadership)) => leadership,
        };
        let span = info_span!("leading", term = leadership.term());
        let outcome = held::hold(&leadership, held::LEADERSHIP, &args.run, signals)
            .instrument(span)
            .await;
        match outcome {
            Outcome::Lost if !args.once => {
                say!("waiting to lead again");
            }
            Outcome::Finished(exit) if !args.once => {
                let after = args.restart_after;
                say!("CMD ended ({exit}); resigning, joining again after {after:?}");
                return ControlFlow::Continue(());
            }
            outcome => return ControlFlow::Break(outcome.status()),
        }
    }
}

/// Leaves the election, waiting until the node is gone.
async fn resign(candidate: Candidate) {
    match candidate.resign().await {
        Ok(()) | Err(Error::Lost { .. } | Error::Closed) => {}
        Err(err) => warn!(%err, "resignation not confirmed; the node goes with the session"),
    }
}
