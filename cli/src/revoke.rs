//! `zk-recipes revoke PATH` asks whoever holds the lock (or leads) at PATH now to let go,
//! and `--on-revoke` (of `lock` and `elect`) says what a holder does when asked.
//!
//! Asking writes Curator's revoke marker (`__REVOKE__`) into each holder's node, as
//! Curator's `Revoker.attemptRevoke` does: a `zk-recipes lock --on-revoke=release` (or
//! `elect`), a Rust holder awaiting `revocation_requested()` and a Curator holder made
//! revocable all hear it. It is a request: the holder decides. Holders are told as
//! `status` tells them (see [`view`](crate::view)): the writer or every reader of a
//! read/write lock, the first of a lock or an election; nobody in a semaphore (its path or its `leases`). Exits 0 having asked at least one
//! holder (each node asked is printed on stdout), [`NOBODY`](crate::status::NOBODY) if
//! nobody holds PATH. Only a contender's node is written, by the library's rule
//! ([`zk_recipes::revoke`]): a group member, even one whose id ends in ten digits, is never
//! asked.

use zk_recipes::{Mutex, Result, RwLock, Session};

use crate::args::{Connection, Revoke};
use crate::output;
use crate::say::say;
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;
use crate::view::{told, Recipe};

impl OnSession for Revoke {
    fn connection(&self) -> &Connection {
        &self.connection
    }

    async fn run(&self, session: &Session, signals: &mut Signals) -> u8 {
        match signals.or(ask(session, &self.path)).await {
            Err(signal) => status::of_signal(signal),
            Ok(Err(err)) => status::report(&err),
            Ok(Ok(asked)) if asked.is_empty() => {
                say!("nobody holds {}: nobody was asked", self.path);
                status::NOBODY
            }
            Ok(Ok(asked)) => {
                // A reader that has gone is no failure: every holder was asked already.
                for node in asked {
                    if !output::print(&output::shown(&node)) {
                        break;
                    }
                }
                0
            }
        }
    }
}

/// Asks the holders of `path`; the nodes asked. Nobody unless the contenders' names tell a
/// lock, a read/write lock or an election: a semaphore's leases (`SEM/leases`) are no
/// queue whose first holds, and are not asked.
async fn ask(session: &Session, path: &str) -> Result<Vec<String>> {
    let mutex = Mutex::new(session, path)?;
    match told(&mutex.contenders().await?) {
        Some(Recipe::RwLock) => RwLock::new(session, path)?.revoke_holders().await,
        Some(Recipe::Lock | Recipe::Election) => mutex.revoke_holders().await,
        None => Ok(Vec::new()),
    }
}
