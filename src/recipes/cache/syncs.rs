//! The syncs callers of [`Cache::sync`](super::Cache::sync) asked for, and how far the
//! keeper answered them.
//!
//! Each call takes a ticket (a number one higher than the last); the keeper reads the last
//! ticket before it asks the servers for a `sync` (alone, or the one that starts a walk),
//! and once every notification sent before the sync's answer is read and taken in, it
//! marks every ticket up to that one done. A ticket taken after the keeper read the last
//! one waits for the next sync.

use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{watch, Notify};

use crate::error::{Error, Result};

/// Tickets taken and tickets done.
pub(super) struct Syncs {
    /// The last ticket taken.
    taken: AtomicU64,
    /// Every ticket up to this one is done.
    done: watch::Sender<u64>,
    /// Wakes the keeper when a ticket is taken.
    wake: Notify,
}

impl Default for Syncs {
    fn default() -> Syncs {
        Syncs {
            taken: AtomicU64::new(0),
            done: watch::channel(0).0,
            wake: Notify::new(),
        }
    }
}

impl Syncs {
    /// Takes a ticket, and wakes the keeper.
    pub(super) fn take(&self) -> u64 {
        let ticket = self.taken.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake.notify_waiters();
        ticket
    }

    /// The last ticket taken: a sync asked for after this read answers it.
    pub(super) fn last(&self) -> u64 {
        self.taken.load(Ordering::SeqCst)
    }

    /// Resolves with the last ticket taken once one is not done.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(super) async fn wanted(&self) -> u64 {
        loop {
            let mut woken = pin!(self.wake.notified());
            woken.as_mut().enable();
            let last = self.last();
            if last > *self.done.borrow() {
                return last;
            }
            woken.await;
        }
    }

    /// Every ticket up to `ticket` is done.
    pub(super) fn done(&self, ticket: u64) {
        self.done.send_if_modified(|done| {
            let later = ticket > *done;
            if later {
                *done = ticket;
            }
            later
        });
    }

    /// Resolves once `ticket` is done.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] never in practice: the sender lives as long as `self`.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(super) async fn reached(&self, ticket: u64) -> Result<()> {
        let mut done = self.done.subscribe();
        done.wait_for(|&done| done >= ticket)
            .await
            .map(drop)
            .map_err(|_| Error::Closed)
    }
}
