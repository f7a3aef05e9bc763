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
//!
//! A root is looked up by its hash ([`root_hash`]), computed once per recipe value (a lock
//! per key makes one per acquisition) and used by the entry permits too: SipHash with keys
//! drawn once per process, so that no one can choose roots that collide.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

/// The most roots one session remembers.
pub(crate) const CAPACITY: usize = 4096;

/// The hash of a recipe root, as [`KnownRoots`] and the entry permits look it up: keyed
/// once per process.
pub(crate) fn root_hash(root: &str) -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new).hash_one(root)
}

/// The roots a session entered a queue under lately.
#[derive(Debug, Default)]
pub(crate) struct KnownRoots {
    known: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    /// By [`root_hash`]; two roots of one hash (never seen: 64 bits of a keyed SipHash)
    /// would only take turns being known.
    roots: HashMap<u64, Arc<str>, BuildHasherDefault<Hashed>>,
    /// The order they were remembered in (a forgotten root may still be listed here).
    order: VecDeque<(u64, Arc<str>)>,
}

impl Known {
    fn knows(&self, root: &str, hash: u64) -> bool {
        self.roots.get(&hash).is_some_and(|known| **known == *root)
    }

    fn forget(&mut self, root: &str, hash: u64) {
        if self.knows(root, hash) {
            self.roots.remove(&hash);
        }
    }
}

/// Hashes a [`root_hash`], hashed already, to itself.
#[derive(Default)]
struct Hashed(u64);

impl Hasher for Hashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64`s are hashed here (`write_u64`); any other key still hashes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
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

    /// Whether `root`, of hash `hash` ([`root_hash`]), was seen to exist lately.
    pub(crate) fn knows(&self, root: &str, hash: u64) -> bool {
        self.lock().knows(root, hash)
    }

    /// Remembers that `root` (of hash `hash`) exists, forgetting the oldest root once
    /// [`CAPACITY`] are kept.
    pub(crate) fn remember(&self, root: &Arc<str>, hash: u64) {
        let mut known = self.lock();
        if known.knows(root, hash) {
            return;
        }
        if known.order.len() >= CAPACITY {
            if let Some((oldest, path)) = known.order.pop_front() {
                known.forget(&path, oldest);
            }
        }
        known.roots.insert(hash, root.clone());
        known.order.push_back((hash, root.clone()));
    }

    /// Forgets `root` (of hash `hash`): it was found missing.
    pub(crate) fn forget(&self, root: &str, hash: u64) {
        self.lock().forget(root, hash);
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

    /// What the queue does: each call with the root's hash.
    impl KnownRoots {
        fn knows_path(&self, root: &str) -> bool {
            self.knows(root, root_hash(root))
        }

        fn remember_path(&self, root: &Arc<str>) {
            self.remember(root, root_hash(root))
        }

        fn forget_path(&self, root: &str) {
            self.forget(root, root_hash(root))
        }
    }

    #[test]
    fn sessions_to_one_target_share_a_set_while_one_lives() {
        let one = KnownRoots::of("127.0.0.1:1/shared");
        one.remember_path(&root("/locks/a"));
        assert!(KnownRoots::of("127.0.0.1:1/shared").knows_path("/locks/a"));
        assert!(!KnownRoots::of("127.0.0.1:1/other").knows_path("/locks/a"));
        drop(one);
        assert!(!KnownRoots::of("127.0.0.1:1/shared").knows_path("/locks/a"));
    }

    #[test]
    fn remembers_and_forgets() {
        let known = KnownRoots::default();
        assert!(!known.knows_path("/locks/a"));
        known.remember_path(&root("/locks/a"));
        assert!(known.knows_path("/locks/a"));
        known.forget_path("/locks/a");
        assert!(!known.knows_path("/locks/a"));
    }

    #[test]
    fn keeps_at_most_capacity_forgetting_the_oldest() {
        let known = KnownRoots::default();
        for k in 0..=CAPACITY {
            known.remember_path(&root(&format!("/locks/k{k}")));
        }
        assert!(!known.knows_path("/locks/k0"), "the oldest root was kept");
        assert!(known.knows_path("/locks/k1"));
        assert!(known.knows_path(&format!("/locks/k{CAPACITY}")));
        assert!(known.lock().roots.len() <= CAPACITY);
    }

    #[test]
    fn forgetting_and_remembering_again_stays_bounded() {
        let known = KnownRoots::default();
        for _ in 0..3 * CAPACITY {
            known.remember_path(&root("/locks/churn"));
            known.forget_path("/locks/churn");
        }
        known.remember_path(&root("/locks/churn"));
        assert!(known.lock().order.len() <= CAPACITY);
        assert!(known.knows_path("/locks/churn"));
    }

    #[test]
    fn roots_of_one_hash_take_turns_being_known() {
        let known = KnownRoots::default();
        known.remember(&root("/locks/a"), 7);
        assert!(known.knows("/locks/a", 7));
        assert!(
            !known.knows("/locks/b", 7),
            "another root of the hash is known"
        );
        known.forget("/locks/b", 7);
        assert!(
            known.knows("/locks/a", 7),
            "forgetting another root forgot this one"
        );
        known.remember(&root("/locks/b"), 7);
        assert!(known.knows("/locks/b", 7));
        assert!(!known.knows("/locks/a", 7));
    }
}
