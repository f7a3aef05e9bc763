//! The set-up most recipe tests share: a root of their own on some servers, a few recipe
//! sessions, an observer looking from outside, and, at the end, the check that nothing of
//! any contender is left under the root.

use std::time::Duration;

use zk_recipes::Session;
use zookeeper_client::Client;

use crate::clients::{observer, session};
use crate::ensemble::{unique_root, Ensemble};
use crate::znodes::await_empty;

/// A test's root on an ensemble, with `sessions` recipe sessions and an [`observer`].
///
/// End every test with [`Fixture::nothing_left`]: a fixture dropped without that check
/// fails the test (unless the test is failing already).
///
/// ```no_run
/// # async fn demo() {
/// use std::time::Duration;
/// use zk_harness::{Ensemble, Fixture};
/// use zk_recipes::Mutex;
///
/// let fx = Fixture::new(Ensemble::shared(1).await, "demo", 2, Duration::from_secs(4)).await;
/// let guard = Mutex::new(&fx.sessions[0], &fx.root).unwrap().lock().await.unwrap();
/// guard.release().await.unwrap();
/// fx.nothing_left().await;
/// # }
/// ```
pub struct Fixture {
    /// The test's own root ([`unique_root`]).
    pub root: String,
    /// The servers' connect string.
    pub hosts: String,
    /// The recipe sessions, each with the session timeout given.
    pub sessions: Vec<Session>,
    /// A plain client on a session of its own that looks from outside.
    pub observer: Client,
    /// Children of the root that a recipe keeps (persistent or container nodes), each
    /// checked to be empty in turn.
    kept: &'static [&'static str],
    checked: bool,
}

impl Fixture {
    /// A root named after `name` on `ensemble`, `sessions` recipe sessions with the given
    /// session timeout, and an observer.
    pub async fn new(ensemble: &Ensemble, name: &str, sessions: usize, timeout: Duration) -> Self {
        let hosts = ensemble.connect_string();
        let mut opened = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            opened.push(session(&hosts, timeout).await);
        }
        Fixture {
            root: unique_root(name),
            observer: observer(&hosts).await,
            hosts,
            sessions: opened,
            kept: &[],
            checked: false,
        }
    }

    /// The same fixture, for a recipe that keeps the children `kept` under its root (a
    /// semaphore: [`semaphore::NODES`](crate::semaphore::NODES)): the end check wants those empty, and nothing else.
    pub fn keeping(mut self, kept: &'static [&'static str]) -> Self {
        self.kept = kept;
        self
    }

    /// Waits until nothing is left under the root (but the empty children it keeps); fails
    /// the test after [`PATIENCE`](crate::PATIENCE). Then closes the sessions.
    pub async fn nothing_left(mut self) {
        self.checked = true;
        let kept = self.kept;
        crate::await_queue(
            &self.observer,
            &self.root,
            "only the nodes it keeps",
            |now| now.iter().all(|name| kept.contains(&name.as_str())),
        )
        .await;
        for child in kept {
            await_empty(&self.observer, &format!("{}/{child}", self.root)).await;
        }
        for session in &self.sessions {
            session.close();
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if !self.checked && !std::thread::panicking() {
            panic!(
                "the fixture of {} was dropped without `nothing_left()`",
                self.root
            );
        }
    }
}
