//! The root crate's integration tests, one test binary: each module is the tests of one
//! promise (CONTRIBUTING.md maps them), named `MODULE::TEST` (`cargo test --test suite
//! exclusion::`, or `scripts/soak.sh N suite::exclusion`).
//!
//! One binary builds and links once where a binary per file re-instantiated the crate's
//! generics and linked its own copy of everything; its tests also share one process, so
//! they share what a process holds once: the harness's shared ensembles (each test under a
//! root of its own), the compiled Curator and kazoo peers, the crate's known roots (per
//! connect string). Tests that stop or kill a process run a child of this binary
//! (`zk_harness::child_test`, named by its module path).
//!
//! Two test files keep a binary of their own, for what they install in the process:
//! `tests/metrics.rs` a global `metrics` recorder (every test here would record into it),
//! `tests/loss_published_first.rs` a global tracing subscriber that panics on warnings.

mod bad_input;
mod bounded_waits;
mod cache;
mod cancellation;
mod contenders;
mod counter;
mod election;
mod end_of_hold;
mod exclusion;
mod fairness;
mod fenced;
mod first_touch;
mod group;
mod handoff;
mod hold;
mod interop;
mod lock;
mod loss;
mod loss_after_pause;
mod loss_same_cause;
mod master_follower;
mod multi_lock;
mod no_herd;
mod notification_order;
mod own_node;
mod partition;
mod per_key;
mod release;
mod revoke;
#[cfg(all(feature = "tls", feature = "sasl"))]
mod security;
mod session;
mod session_close;
mod session_end;
mod through_faults;
