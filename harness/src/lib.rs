//! The test harness of zk-recipes: real ZooKeeper servers started by the tests themselves,
//! and the helpers the tests share to look at them.
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
//! This crate is a workspace member that is never published: the root package's tests
//! and benchmark use it as a dev-dependency.

mod ensemble;
pub mod history;
mod launcher;
mod proxy;
mod znodes;

pub use ensemble::{expire_session, four_letter_at, unique_root, Ensemble};
pub use proxy::Proxy;
pub use znodes::{await_children, await_count, await_empty, children, name, observe};
