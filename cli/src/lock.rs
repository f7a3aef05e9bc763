//! `zk-recipes lock PATH -- CMD`: waits for the lock (at most `--timeout`), runs CMD while
//! holding it (stopping CMD if the lock is lost), releases it when CMD exits, and exits
//! with CMD's status.
//!
//! The lock is a [`Mutex`]: first come, first served, shared with every zk-recipes
//! process, Rust service and Curator `InterProcessMutex` that locks the same path. With
//! `--semaphore N` it is a [`Semaphore`] of N leases instead (Curator's
//! `InterProcessSemaphoreV2`); a lease is held, lost and released as the lock is. Its node
//! carries `--id` (default `<host name>/<pid>`), shown by `status` and `observe`.

use std::time::Duration;

use zk_recipes::{Mutex, Result, Semaphore, Session};

use crate::args::{Connection, Lock, Run};
use crate::held;
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;

impl OnSession for Lock {
    fn connection(&self) -> &Connection {
        &self.connection
    }

    fn holding(&self) -> Option<&Run> {
        Some(&self.run)
    }

    async fn run(&self, session: &Session, signals: &mut Signals) -> u8 {
        match self.semaphore {
            Some(max) => shared(self, session, max, signals).await,
            None => exclusive(self, session, signals).await,
        }
    }
}

/// Holds the lock on the path while CMD runs.
async fn exclusive(args: &Lock, session: &Session, signals: &mut Signals) -> u8 {
    let mutex = with_id(Mutex::new(session, &args.path), args, Mutex::id);
    let mutex = match mutex {
        Ok(mutex) => mutex,
        Err(err) => return status::report(&err),
    };
    let acquiring = async {
        match Wait::of(args.timeout) {
            Wait::Forever => mutex.lock().await.map(Some),
            Wait::Never => mutex.try_lock().await,
            Wait::AtMost(timeout) => mutex.try_lock_for(timeout).await,
        }
    };
    held::acquire_and_run(acquiring, held::LOCK, &args.run, signals).await
}

/// Holds one of the `max` leases of the semaphore on the path while CMD runs.
async fn shared(args: &Lock, session: &Session, max: u32, signals: &mut Signals) -> u8 {
    let semaphore = with_id(
        Semaphore::new(session, &args.path, max),
        args,
        Semaphore::id,
    );
    let semaphore = match semaphore {
        Ok(semaphore) => semaphore,
        Err(err) => return status::report(&err),
    };
    let acquiring = async {
        match Wait::of(args.timeout) {
            Wait::Forever => semaphore.acquire().await.map(Some),
            Wait::Never => semaphore.try_acquire().await,
            Wait::AtMost(timeout) => semaphore.try_acquire_for(timeout).await,
        }
    };
    held::acquire_and_run(acquiring, held::LEASE, &args.run, signals).await
}

/// `recipe` carrying `--id` if it was given (`set`: `Mutex::id`, `Semaphore::id`).
fn with_id<T>(recipe: Result<T>, args: &Lock, set: fn(T, &str) -> Result<T>) -> Result<T> {
    match &args.id {
        Some(id) => set(recipe?, id),
        None => recipe,
    }
}

/// How long `--timeout` lets an acquisition wait.
enum Wait {
    /// No `--timeout`: as long as it takes.
    Forever,
    /// `--timeout 0s`: one try that does not wait, as `flock -w 0` (the library's `try_`
    /// methods).
    Never,
    /// At most this long.
    AtMost(Duration),
}

impl Wait {
    fn of(timeout: Option<Duration>) -> Wait {
        match timeout {
            None => Wait::Forever,
            Some(Duration::ZERO) => Wait::Never,
            Some(timeout) => Wait::AtMost(timeout),
        }
    }
}
