//! Metrics, through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`): the
//! crate records, the service installs the exporter of its choice (Prometheus, StatsD, …).
//! Without the feature every function here is empty and the facade is not a dependency.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `zk_recipes_acquisitions_total` | counter | `kind`, `outcome` | acquisitions that ended: `outcome` is `acquired`, `not_acquired` (a `try_*` that found the lock held, or whose deadline passed), `failed` (an error) or `cancelled` (the acquiring future was dropped) |
//! | `zk_recipes_acquire_wait_seconds` | histogram | `kind` | from the call to holding, for acquisitions that held |
//! | `zk_recipes_hold_seconds` | histogram | `kind` | from holding to the end of the hold (released, dropped, lost and let go) |
//! | `zk_recipes_losses_total` | counter | `kind`, `reason` | holds that could no longer be trusted, by [`Loss`] (`session_expired`, `suspended`, `node_deleted`, `closed`, `lapsed`, `unwatched`); a hold released or dropped is no loss |
//! | `zk_recipes_removals_pending` | gauge | — | deletions of our nodes under way (a release, a give-up, a dropped guard), waiting for the servers or the connection |
//! | `zk_recipes_sessions` | gauge | `state` | sessions of this process by state: `connected`, `suspended`, `renewing` (expired, a new one being made); a closed session counts in none |
//!
//! `kind` is what the node is: `lock` (a `Mutex`, a `KeyedMutex`'s key, a semaphore's
//! gate), `read`, `write` (an `RwLock`), `lease` (a `Semaphore`), `latch` (a leadership).

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::loss::Loss;

/// What a node is: a lock's, a reader's, a writer's, a lease's or a candidate's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeKind {
    Lock,
    Read,
    Write,
    Lease,
    Latch,
}

impl NodeKind {
    /// The kind of a contender named `name` (`lock-`, `__READ__`, …).
    pub(crate) fn of(name: &str) -> NodeKind {
        match name {
            "__READ__" => NodeKind::Read,
            "__WRIT__" => NodeKind::Write,
            "latch-" => NodeKind::Latch,
            "lease-" => NodeKind::Lease,
            _ => NodeKind::Lock,
        }
    }

    /// Its label.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn label(self) -> &'static str {
        match self {
            NodeKind::Lock => "lock",
            NodeKind::Read => "read",
            NodeKind::Write => "write",
            NodeKind::Lease => "lease",
            NodeKind::Latch => "latch",
        }
    }
}

/// How an acquisition ended.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Outcome {
    Acquired,
    NotAcquired,
    Failed,
    Cancelled,
}

/// An acquisition under way: records how it ended when dropped ([`Outcome::Cancelled`]
/// unless told otherwise), and for those that held, how long they waited.
pub(crate) struct Acquisition {
    started: Instant,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    kind: NodeKind,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    outcome: Outcome,
}

impl Acquisition {
    /// An acquisition of `kind` starting now.
    pub(crate) fn start(kind: NodeKind) -> Acquisition {
        Acquisition {
            started: Instant::now(),
            kind,
            outcome: Outcome::Cancelled,
        }
    }

    /// How long it has waited so far.
    pub(crate) fn waited(&self) -> Duration {
        self.started.elapsed()
    }

    /// It ended as `outcome`.
    pub(crate) fn ended(&mut self, outcome: Outcome) {
        self.outcome = outcome;
    }

    /// `result`, taking note that the acquisition failed if it is an error.
    pub(crate) fn check<T>(&mut self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            self.outcome = Outcome::Failed;
        }
        result
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        {
            let (kind, outcome) = (self.kind.label(), self.outcome);
            let label = match outcome {
                Outcome::Acquired => "acquired",
                Outcome::NotAcquired => "not_acquired",
                Outcome::Failed => "failed",
                Outcome::Cancelled => "cancelled",
            };
            ::metrics::counter!("zk_recipes_acquisitions_total", "kind" => kind, "outcome" => label)
                .increment(1);
            if matches!(outcome, Outcome::Acquired) {
                ::metrics::histogram!("zk_recipes_acquire_wait_seconds", "kind" => kind)
                    .record(self.waited().as_secs_f64());
            }
        }
    }
}

/// A hold of `kind` ended after `held`.
pub(crate) fn hold_ended(kind: NodeKind, held: Duration) {
    #[cfg(feature = "metrics")]
    ::metrics::histogram!("zk_recipes_hold_seconds", "kind" => kind.label())
        .record(held.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, held);
}

/// A hold of `kind` was lost for `loss`.
pub(crate) fn lost(kind: NodeKind, loss: Loss) {
    #[cfg(feature = "metrics")]
    {
        let reason = match loss {
            Loss::SessionExpired => "session_expired",
            Loss::Suspended => "suspended",
            Loss::NodeDeleted => "node_deleted",
            Loss::Closed => "closed",
            Loss::Lapsed => "lapsed",
            Loss::Unwatched => "unwatched",
        };
        ::metrics::counter!("zk_recipes_losses_total", "kind" => kind.label(), "reason" => reason)
            .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, loss);
}

/// A removal under way: counted in `zk_recipes_removals_pending` while it lives, however
/// it ends (its future done or dropped).
pub(crate) struct PendingRemoval(());

impl PendingRemoval {
    pub(crate) fn start() -> PendingRemoval {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!("zk_recipes_removals_pending").increment(1.0);
        PendingRemoval(())
    }
}

impl Drop for PendingRemoval {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!("zk_recipes_removals_pending").decrement(1.0);
    }
}

/// A session went from the state `from` (`None`: it was just made, or was closed) to `to`
/// (`None`: it is closed): `connected`, `suspended` or `renewing`.
pub(crate) fn session_moved(from: Option<&'static str>, to: Option<&'static str>) {
    #[cfg(feature = "metrics")]
    {
        if let Some(state) = from {
            ::metrics::gauge!("zk_recipes_sessions", "state" => state).decrement(1.0);
        }
        if let Some(state) = to {
            ::metrics::gauge!("zk_recipes_sessions", "state" => state).increment(1.0);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (from, to);
}
