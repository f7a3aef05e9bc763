//! The test harness of zk-recipes: real ZooKeeper servers started by the tests themselves,
//! and the helpers the tests share to connect to them and look at them.
//!
//! `Ensemble::start(1)` runs a standalone server, `Ensemble::start(3)` a 3-server
//! ensemble, all on free 127.0.0.1 ports, from Debian's `zookeeper` package
//! (`/usr/share/java/zookeeper.jar`; override the class path with `ZK_CLASSPATH`
//! and the java binary with `ZK_JAVA`). Servers are spawned by one long-lived
//! launcher thread with `PR_SET_PDEATHSIG = SIGKILL`, so no server outlives the
//! test binary, even when a test panics or a shared ensemble is never dropped.
//!
//! A test that stops, kills or pauses servers must use its own [`Ensemble::start`],
//! never [`Ensemble::shared`].
//!
//! What the tests share:
//! * waiting: [`PATIENCE`] bounds every wait, [`bounded`] applies a bound to a future,
//!   [`await_watch`] waits for the value of a watch channel, [`unless_stopped`] for a
//!   future unless told to stop;
//! * a test's set-up: a [`Fixture`] (a root of its own, recipe sessions, an observer) that
//!   checks at the end that nothing is left under the root;
//! * connecting: [`session`], [`tolerant_session`], [`plain_client`], [`observer`],
//!   [`live_client`], [`session_id`];
//! * a recipe root from outside: [`children`] in queue order, [`await_queue`],
//!   [`await_children`], [`await_count`], [`await_empty`], [`name`], [`sequence`]; a
//!   semaphore's nodes: [`semaphore`];
//! * session events: [`record_events`] and [`await_events`];
//! * watches: [`settle_watches`] awaits those a queue of exclusive contenders should hold;
//! * elections: [`join_election`], [`leaders`], [`await_one_leader`], [`participant_ids`];
//! * secured servers: [`ServerConfig`] for [`Ensemble::start_with`] and
//!   [`Ensemble::shared_with`] (extra `zoo.cfg` lines, JVM options, files, a TLS port,
//!   SASL users), with key material made at test time by [`pki`];
//! * faults: [`Ensemble`]'s `stop`, `kill`, `pause`, `restart`, a [`Proxy`] to cut one
//!   client off, a [`Forwarder`] to send its next connection to another server,
//!   [`expire_session`];
//! * [`history`]: critical sections recorded and checked for mutual exclusion (also the work
//!   processes printed, under the faults done to them);
//! * [`peers`]: Curator and kazoo peers driven as real processes;
//! * [`nemesis`]: contenders looping under a nemesis that deletes waiters' nodes and writes
//!   into any contender node, checked against the recipe's rule.
//!
//! This crate is a workspace member that is never published: the root package's tests
//! and benchmark use it as a dev-dependency.

mod candidates;
mod child;
mod clients;
mod config;
mod ensemble;
mod events;
mod fixture;
mod forwarder;
pub mod history;
mod launcher;
pub mod nemesis;
pub mod peers;
pub mod pki;
mod proxy;
mod reps;
pub mod semaphore;
mod wait;
mod watches;
mod znodes;

pub use candidates::{await_one_leader, join_election, leaders, participant_ids, Seat};
pub use child::{child_test, signal};
pub use clients::{
    digest_observer, digest_session, live_client, observer, plain_client, session, session_id,
    tolerant_session, OBSERVER_TIMEOUT,
};
pub use config::ServerConfig;
pub use ensemble::{expire_session, four_letter_at, unique_root, Ensemble};
pub use events::{await_events, record_events, EventLog};
pub use fixture::Fixture;
pub use forwarder::Forwarder;
pub use proxy::Proxy;
pub use reps::reps_from_args;
pub use wait::{await_watch, bounded, now_ms, unless_stopped, PATIENCE, WORK};
pub use watches::settle_watches;
pub use znodes::{
    all_but, await_children, await_count, await_empty, await_queue, children, name, observe,
    persistent, sequence,
};
