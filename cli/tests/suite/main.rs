//! The `zk-recipes` binary run as a shell would, one test binary: each module is the tests
//! of one command or concern, named `MODULE::TEST` (`cargo test -p zk-recipes-cli --test
//! suite lock::`, or `scripts/soak.sh N cli:suite::lock`), and `support` starts the binary
//! and reads what it prints.
//!
//! One binary builds and links once where a binary per file re-instantiated its generics
//! and linked its own copy of everything; its tests share one process, and so the harness's
//! shared server (each test under a root of its own, `support::Test`).

mod arguments;
mod contenders;
mod elect;
mod group;
mod lock;
mod loss;
mod members;
mod observe;
mod output;
mod revoke;
mod security;
mod semaphore;
mod session;
mod status;
mod support;
