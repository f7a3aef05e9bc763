//! Entry permits: how many queue entries (a create and the listing sent with it) one session
//! has in flight at once, per root.
//!
//! A listing holds the whole queue of its root. A burst of waiters on one root would
//! otherwise send all its creates and listings together: every listing holds the whole
//! queue (names in flight grow with the square of the burst), and the client's buffers and
//! the entering states all grow with the burst and stay grown. So a root has at most
//! [`PER_ROOT`] entries in flight on a session; the others wait for a permit, in order.
//!
//! Entries on different roots do not wait for each other (a lock per key, many tasks):
//! their listings are small. Roots share permits by stripe (the root's hash,
//! [`root_hash`](super::roots::root_hash), picks one of [`STRIPES`] groups of [`PER_ROOT`]
//! permits), so no map of roots is kept and the bound
//! holds for every root: names listed at once stay below `PER_ROOT` × the queued
//! contenders, as with one group for the whole session.

use tokio::sync::Semaphore;

/// Entries one root has in flight on a session at most; sixteen keep the server's pipeline
/// full.
pub(crate) const PER_ROOT: usize = 16;

/// Groups of permits: roots whose hashes pick different groups never wait for each other.
const STRIPES: usize = 64;

/// A session's entry permits.
#[derive(Debug)]
pub(crate) struct EntryPermits {
    stripes: Box<[Semaphore]>,
}

impl EntryPermits {
    pub(crate) fn new() -> EntryPermits {
        EntryPermits {
            stripes: (0..STRIPES).map(|_| Semaphore::new(PER_ROOT)).collect(),
        }
    }

    /// No more permits: waits end, and later ones fail at once.
    pub(crate) fn close(&self) {
        self.stripes.iter().for_each(Semaphore::close);
    }

    /// The permits of the root of hash `root` ([`root_hash`](super::roots::root_hash)):
    /// an entry acquires one, waiting while [`PER_ROOT`] entries of its stripe are under
    /// way (in order: a dropped wait takes none); acquiring fails once
    /// [`close`](Self::close)d.
    pub(crate) fn stripe(&self, root: u64) -> &Semaphore {
        // The remainder is below STRIPES: it fits.
        let i = usize::try_from(root % STRIPES as u64).unwrap_or_default();
        &self.stripes[i]
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::{pin, Pin};
    use std::task::{Context, Poll, Waker};

    use tokio::sync::SemaphorePermit;

    use super::super::roots::root_hash;
    use super::*;

    /// Polls `future` once.
    fn poll<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// `PER_ROOT` permits on `root`, each given at once.
    fn fill<'t>(turns: &'t EntryPermits, root: &str) -> Vec<SemaphorePermit<'t>> {
        (0..PER_ROOT)
            .map(
                |_| match poll(Box::pin(turns.stripe(root_hash(root)).acquire()).as_mut()) {
                    Poll::Ready(Ok(permit)) => permit,
                    other => panic!("turn on {root}: {other:?}"),
                },
            )
            .collect()
    }

    #[test]
    fn a_burst_on_one_root_has_at_most_per_root_entries_in_flight() {
        let turns = EntryPermits::new();
        let held = fill(&turns, "/locks/one");
        let mut next = pin!(turns.stripe(root_hash("/locks/one")).acquire());
        assert!(
            poll(next.as_mut()).is_pending(),
            "one entry too many went ahead"
        );
        drop(held);
        assert!(
            poll(next.as_mut()).is_ready(),
            "a freed turn was not handed on"
        );
    }

    #[test]
    fn entries_on_other_roots_do_not_wait() {
        let turns = EntryPermits::new();
        let _held = fill(&turns, "/locks/busy");
        let busy = turns.stripe(root_hash("/locks/busy"));
        let other = (0..)
            .map(|k| format!("/locks/jobs/k{k}"))
            .find(|root| !std::ptr::eq(turns.stripe(root_hash(root)), busy))
            .unwrap_or_default();
        let mut turn = pin!(turns.stripe(root_hash(&other)).acquire());
        assert!(
            poll(turn.as_mut()).is_ready(),
            "an entry on another root waited"
        );
    }

    #[test]
    fn closed_turns_end_waits() {
        let turns = EntryPermits::new();
        turns.close();
        let mut turn = pin!(turns.stripe(root_hash("/locks/one")).acquire());
        assert!(matches!(poll(turn.as_mut()), Poll::Ready(Err(_))));
    }
}
