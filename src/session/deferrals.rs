//! Deferrals: work that a session's holds put off by a fixed delay ([`DELAY`]), done by
//! one task per session rather than a task (and a timer) per hold. A hold that ends before
//! its delay passed costs a place in a queue, no task, no timer and no wake-up.
//!
//! The delay is the same for every entry, so the queue is a FIFO of deadlines. Its task
//! runs while the queue holds entries and ends once it is empty (the next entry starts it
//! again); it wakes at most once per delay, whatever the rate of holds (a wake-up per hold
//! would cost what a task per hold did), so an entry is done between [`DELAY`] and
//! 2 × [`DELAY`] after it was queued. An entry is held weakly: one whose owner is gone by
//! then is skipped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// How long an entry waits before it is done (at most twice as long).
pub(crate) const DELAY: Duration = Duration::from_millis(10);

/// Work put off by [`DELAY`].
pub(crate) trait Due: Send + Sync {
    /// Does the work, on the session's runtime; it must not wait.
    fn due(&self);
}

/// A session's queue of deferred work, and whether its task runs.
#[derive(Debug, Default)]
pub(crate) struct Deferrals(Mutex<Queue>);

#[derive(Default)]
struct Queue {
    entries: VecDeque<(Instant, Weak<dyn Due>)>,
    /// Whether a task runs the queue.
    running: bool,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("entries", &self.entries.len())
            .field("running", &self.running)
            .finish()
    }
}

impl Deferrals {
    /// Queues `entry` to be done after [`DELAY`], starting the queue's task on `runtime` if
    /// none runs.
    pub(crate) fn push(self: &Arc<Self>, runtime: &tokio::runtime::Handle, entry: Weak<dyn Due>) {
        let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        queue.entries.push_back((Instant::now() + DELAY, entry));
        if !std::mem::replace(&mut queue.running, true) {
            drop(queue);
            drop(runtime.spawn(self.clone().run()));
        }
    }

    /// Does every entry whose deadline passed, then sleeps until the next one (at least a
    /// delay); ends once the queue is empty.
    async fn run(self: Arc<Self>) {
        loop {
            let next = {
                let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                while let Some((_, entry)) = queue.entries.front().filter(|(at, _)| *at <= now) {
                    if let Some(entry) = entry.upgrade() {
                        entry.due();
                    }
                    queue.entries.pop_front();
                }
                match queue.entries.front() {
                    Some(&(at, _)) => at.max(now + DELAY),
                    None => {
                        queue.running = false;
                        return;
                    }
                }
            };
            tokio::time::sleep_until(next.into()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use tokio::sync::Notify;

    use super::*;

    /// Records that it was done, and tells.
    #[derive(Default)]
    struct Entry {
        done: AtomicBool,
        told: Notify,
    }

    impl Due for Entry {
        fn due(&self) {
            self.done.store(true, Ordering::SeqCst);
            self.told.notify_one();
        }
    }

    #[tokio::test]
    async fn an_entry_is_done_after_the_delay_and_a_gone_one_skipped() {
        let deferrals = Arc::new(Deferrals::default());
        let runtime = tokio::runtime::Handle::current();
        let gone = Arc::new(Entry::default());
        let kept = Arc::new(Entry::default());
        let queued = Instant::now();
        deferrals.push(&runtime, Arc::downgrade(&gone) as Weak<dyn Due>);
        deferrals.push(&runtime, Arc::downgrade(&kept) as Weak<dyn Due>);
        // Its owner is gone before its delay passed: skipped.
        drop(gone);
        tokio::time::timeout(Duration::from_secs(5), kept.told.notified())
            .await
            .expect("the entry is done");
        assert!(queued.elapsed() >= DELAY, "done before its delay");
        assert!(kept.done.load(Ordering::SeqCst));
        // The queue is empty: its task ended, and the next entry starts another.
        let next = Arc::new(Entry::default());
        deferrals.push(&runtime, Arc::downgrade(&next) as Weak<dyn Due>);
        tokio::time::timeout(Duration::from_secs(5), next.told.notified())
            .await
            .expect("an entry after the queue emptied is done");
    }
}
