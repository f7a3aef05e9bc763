//! Roots known to exist: the recipe roots the sessions of this process to one ensemble
//! (the same connect string and chroot) entered a queue under lately.
//!
//! A root is a container node: the servers delete it some time after its last contender
//! left, and a lock per key makes many roots that come and go. An entry under a root this
//! session does not know sends the root's create first, in the round trip of the node's
//! create and listing, so that a missing root costs no round trip of its own (a root that
//! is there after all refuses that create, one request in vain). An entry under a known
//! root sends the create and listing only; should the root be gone meanwhile, the create
//! finds it missing, the root is forgotten and made in the next round trip.
//!
//! The set is bounded ([`CAPACITY`] roots, the oldest remembered forgotten first): a
//! root it no longer holds only costs the create in vain. Sessions of one process to the
//! same connect string share one set (a pool of sessions learns a path once), kept while
//! one of them lives.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

/// The most roots one session remembers.
pub(crate) const CAPACITY: usize = 4096;

/// The roots a session entered a queue under lately.
#[derive(Debug, Default)]
pub(crate) struct KnownRoots {
    known: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    roots: HashSet<Arc<str>>,
    /// The order they were remembered in (a forgotten root may still be listed here).
    order: VecDeque<Arc<str>>,
}

/// The sets of the live sessions, by connect string (with the chroot).
static SHARED: OnceLock<Mutex<HashMap<String, Weak<KnownRoots>>>> = OnceLock::new();

impl KnownRoots {
    /// The set of the sessions to `target` (a connect string with its chroot): the one
    /// another live session to it uses, or a new one.
    pub(crate) fn of(target: &str) -> Arc<KnownRoots> {
        let shared = SHARED.get_or_init(Mutex::default);
        let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = shared.get(target).and_then(Weak::upgrade) {
            return known;
        }
        // The sets of sessions that are gone, with this insertion: as many entries as live
        // connect strings.
        shared.retain(|_, known| known.strong_count() > 0);
        let known = Arc::new(KnownRoots::default());
        shared.insert(target.to_owned(), Arc::downgrade(&known));
        known
    }

    /// Whether `root` was seen to exist lately.
    pub(crate) fn knows(&self, root: &str) -> bool {
        self.lock().roots.contains(root)
    }

    /// Remembers that `root` exists, forgetting the oldest root once [`CAPACITY`] are kept.
    pub(crate) fn remember(&self, root: &Arc<str>) {
        let mut known = self.lock();
        if known.roots.contains(&**root) {
            return;
        }
        if known.order.len() >= CAPACITY {
            if let Some(oldest) = known.order.pop_front() {
                known.roots.remove(&oldest);
            }
        }
        known.roots.insert(root.clone());
        known.order.push_back(root.clone());
    }

    /// Forgets `root`: it was found missing.
    pub(crate) fn forget(&self, root: &str) {
        self.lock().roots.remove(root);
    }

    /// A set left behind by a panic is still a set: only a hint is lost.
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn sessions_to_one_target_share_a_set_while_one_lives() {
        let one = KnownRoots::of("127.0.0.1:1/shared");
        one.remember(&root("/locks/a"));
        assert!(KnownRoots::of("127.0.0.1:1/shared").knows("/locks/a"));
        assert!(!KnownRoots::of("127.0.0.1:1/other").knows("/locks/a"));
        drop(one);
        assert!(!KnownRoots::of("127.0.0.1:1/shared").knows("/locks/a"));
    }

    #[test]
    fn remembers_and_forgets() {
        let known = KnownRoots::default();
        assert!(!known.knows("/locks/a"));
        known.remember(&root("/locks/a"));
        assert!(known.knows("/locks/a"));
        known.forget("/locks/a");
        assert!(!known.knows("/locks/a"));
    }

    #[test]
    fn keeps_at_most_capacity_forgetting_the_oldest() {
        let known = KnownRoots::default();
        for k in 0..=CAPACITY {
            known.remember(&root(&format!("/locks/k{k}")));
        }
        assert!(!known.knows("/locks/k0"), "the oldest root was kept");
        assert!(known.knows("/locks/k1"));
        assert!(known.knows(&format!("/locks/k{CAPACITY}")));
        assert!(known.lock().roots.len() <= CAPACITY);
    }

    #[test]
    fn forgetting_and_remembering_again_stays_bounded() {
        let known = KnownRoots::default();
        for _ in 0..3 * CAPACITY {
            known.remember(&root("/locks/churn"));
            known.forget("/locks/churn");
        }
        known.remember(&root("/locks/churn"));
        assert!(known.lock().order.len() <= CAPACITY);
        assert!(known.knows("/locks/churn"));
    }
}
