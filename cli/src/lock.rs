//! `zk-recipes lock PATH -- CMD`: waits for the lock (at most `--timeout`), runs CMD while
//! holding it (stopping CMD if the lock is lost), releases it when CMD exits, and exits
//! with CMD's status.
//!
//! The lock is a [`Mutex`]: first come, first served, shared with every zk-recipes
//! process, Rust service and Curator `InterProcessMutex` that locks the same path.

use zk_recipes::{Loss, Mutex, MutexGuard, NodeAcl, Session};

use crate::args::{Connection, Lock};
use crate::held::{self, Held};
use crate::security;
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;

impl Held for MutexGuard {
    const WHAT: &'static str = "lock";

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ZK_LOCK_NODE", self.node().to_owned()),
            ("ZK_FENCING_TOKEN", self.fencing_token().to_string()),
        ]
    }

    async fn lost(&self) -> Loss {
        MutexGuard::lost(self).await
    }
}

impl OnSession for Lock {
    fn connection(&self) -> &Connection {
        &self.connection
    }

    fn tolerate_suspension(&self) -> bool {
        self.run.tolerate_suspension
    }

    fn node_acl(&self) -> NodeAcl {
        security::node_acl(self.run.node_acl)
    }

    async fn run(&self, session: &Session, signals: &mut Signals) -> u8 {
        let mutex = match Mutex::new(session, &self.path) {
            Ok(mutex) => mutex,
            Err(err) => return status::report(&err),
        };
        let acquiring = async {
            match self.timeout {
                Some(timeout) => mutex.try_lock_for(timeout).await,
                None => mutex.lock().await.map(Some),
            }
        };
        held::acquire_and_run(acquiring, MutexGuard::release, &self.run, signals).await
    }
}
