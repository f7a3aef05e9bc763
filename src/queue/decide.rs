//! The queue's decisions, in their one home: how contenders are ordered, who blocks a
//! contender and where a listing places it, when a semaphore's root is crowded, whether a
//! waiter holds on what it heard without a request, and whether leaving signals.
//!
//! Each is a pure function of names and of what was heard. The code calls them
//! ([`entering`](super::entering), [`contender`](super::contender),
//! [`handoff`](super::handoff), [`leaving`](super::leaving), the recipes through
//! [`Blockers`]), and so does the queue's model (`model`, test only), on names made in the
//! crate's format: a change to a decision here is explored by the model in `cargo test`.
//! Keep the decisions here, and the code around them to the requests and the waiting.

use std::cmp::Ordering;

use uuid::Uuid;

use crate::path;

/// Digits ZooKeeper appends to a sequential node's name (`%010d`).
pub(crate) const SEQUENCE_DIGITS: usize = 10;

/// The sequence number of a contender name: ZooKeeper appends `%010d` of a signed 32-bit
/// counter, so the suffix is 10 digits, `-` and 9 digits once the counter wrapped, or `-`
/// and 10 digits (told from a positive number by the separator before the sign).
pub(crate) fn sequence(name: &str) -> Option<i32> {
    split_sequence(name).map(|(_, seq)| seq)
}

/// A sequential node's name as what its creator named it (the part before the sequence
/// number) and its sequence number (see [`sequence`]).
pub(super) fn split_sequence(name: &str) -> Option<(&str, i32)> {
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let split = |n: usize| {
        let at = name.len().checked_sub(n)?;
        name.is_char_boundary(at).then(|| name.split_at(at))
    };
    if let Some((head, long)) = split(SEQUENCE_DIGITS + 1) {
        if head.ends_with(['-', '_']) && long.strip_prefix('-').is_some_and(all_digits) {
            return long.parse().ok().map(|seq| (head, seq));
        }
    }
    let (head, short) = split(SEQUENCE_DIGITS)?;
    if !all_digits(short.strip_prefix('-').unwrap_or(short)) {
        return None;
    }
    short.parse().ok().map(|seq| (head, seq))
}

/// Queue order of two sequence numbers, read as serial numbers: correct across the 32-bit
/// wrap as long as live contenders span less than 2^31 creations.
fn serial_order(a: i32, b: i32) -> Ordering {
    a.wrapping_sub(b).cmp(&0)
}

/// Sorts contender names into queue order, dropping children without a sequence suffix.
pub(crate) fn sort_contenders(names: &mut Vec<String>) {
    names.retain(|name| sequence(name).is_some());
    let Some(reference) = names.first().and_then(|name| sequence(name)) else {
        return;
    };
    names.sort_by_cached_key(|name| sequence(name).map(|s| s.wrapping_sub(reference)));
}

/// The child named with `uuid` (Curator's protected naming: `_c_<uuid>-…`).
pub(super) fn find_own<'a>(children: &'a [String], uuid: &Uuid) -> Option<&'a str> {
    let uuid = uuid.to_string();
    children.iter().map(String::as_str).find(|name| {
        name.strip_prefix("_c_")
            .is_some_and(|rest| rest.starts_with(&uuid))
    })
}

/// Whether a listing holds the node named `own`: a contender whose listing lacks it is out
/// of the queue.
pub(super) fn listed(own: &str, children: &[String]) -> bool {
    children.iter().any(|child| child == own)
}

/// Which contenders ahead keep a contender from holding.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Blockers {
    /// Every one: at most one holds (a mutex, a leader, a writer). A holder is first of
    /// the whole queue, and signals its successor as it leaves, unless `silent` says that
    /// contenders of its name never do (a reader, to a writer behind it).
    Every { silent: fn(&str) -> bool },
    /// Only those whose names this accepts (a reader: writers only). Several may hold at
    /// once, and a holder does not know whether it is first, so none signals.
    Only(fn(&str) -> bool),
    /// None by name: it holds while the root has at most this many children, itself
    /// included, whatever their order (a semaphore's lease, counted as Curator counts). It
    /// waits on a child watch of the root; several hold at once, and none signals.
    Crowd(u32),
}

impl Blockers {
    /// Every one ahead blocks, and every one signals (foreign contenders simply never do).
    pub(crate) const EVERY: Blockers = Blockers::Every { silent: none };

    /// A read/write lock's reader: only writers block it (ours, Curator's, kazoo's).
    pub(crate) const READER: Blockers = Blockers::Only(is_writer);

    /// A read/write lock's writer: every one blocks it, and readers never signal.
    pub(crate) const WRITER: Blockers = Blockers::Every { silent: is_reader };

    /// Which names ahead keep such a contender from holding.
    fn blocks(self) -> fn(&str) -> bool {
        fn every(_: &str) -> bool {
            true
        }
        match self {
            Blockers::Every { .. } => every,
            Blockers::Only(blocks) => blocks,
            Blockers::Crowd(_) => none,
        }
    }

    /// Whether a blocker named `blocker` of such a contender signals when it leaves first.
    pub(super) fn signalled_by(self, blocker: &str) -> bool {
        match self {
            Blockers::Every { silent } => !silent(blocker),
            // Only writers block a reader, and writers signal.
            Blockers::Only(_) => true,
            Blockers::Crowd(_) => false,
        }
    }

    /// Whether a root with `children` children, such a contender's among them, has too
    /// many for it to hold.
    pub(super) fn crowded(self, children: usize) -> bool {
        match self {
            Blockers::Crowd(max) => usize::try_from(max).is_ok_and(|max| children > max),
            Blockers::Every { .. } | Blockers::Only(_) => false,
        }
    }

    /// Whether such a contender, leaving, signals its successor: an exclusive one (it
    /// excludes every other holder) that is `first`, whether it entered first or not (see
    /// [`taken`]).
    pub(super) fn signals(self, first: bool) -> bool {
        matches!(self, Blockers::Every { .. }) && first
    }
}

fn none(_: &str) -> bool {
    false
}

/// Whether a contender is a writer: ours and Curator's `…__WRIT__<seq>`, kazoo's
/// `<hex>__lock__<seq>` (kazoo's readers are `<hex>__rlock__<seq>`).
pub(crate) fn is_writer(name: &str) -> bool {
    name.contains("__WRIT__") || name.contains("__lock__")
}

/// Whether a contender is a reader. A reader never leaves a left-first signal (it does not
/// know whether it is first), so a writer behind one waits for none.
fn is_reader(name: &str) -> bool {
    !is_writer(name)
}

/// What a listing says about the contenders ahead of the one with sequence number `own`.
#[derive(Debug, PartialEq, Eq)]
struct Ahead<'a> {
    /// The closest one ahead that blocks it (see [`Ahead::of`]).
    blocker: Option<&'a str>,
    /// Whether that blocker is the first of the queue: then nothing is ahead of it, and
    /// nothing can ever be again (sequence numbers only grow).
    blocker_first: bool,
}

impl<'a> Ahead<'a> {
    /// Reads `children`; `blocks` says which names keep `own` from holding (every one, for
    /// a mutex).
    fn of(children: &'a [String], own: i32, blocks: impl Fn(&str) -> bool) -> Ahead<'a> {
        let mut lowest = None;
        let mut closest: Option<(i32, &str)> = None;
        for name in children {
            let Some(seq) = sequence(name) else { continue };
            if serial_order(seq, own) != Ordering::Less {
                continue;
            }
            if lowest.is_none_or(|lowest| serial_order(seq, lowest).is_lt()) {
                lowest = Some(seq);
            }
            let closer = closest.is_none_or(|(closest, _)| serial_order(seq, closest).is_gt());
            if blocks(name) && closer {
                closest = Some((seq, name));
            }
        }
        Ahead {
            blocker: closest.map(|(_, name)| name),
            blocker_first: closest.is_some_and(|(seq, _)| Some(seq) == lowest),
        }
    }
}

/// Where a contender stands, as far as it knows.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// No one ahead blocks it.
    First,
    /// The root has more children than it may have (see [`Blockers::Crowd`]).
    Crowded,
    /// Behind `blocker` (a full path), which was first when last looked if `blocker_first`.
    Behind {
        blocker: Box<str>,
        blocker_first: bool,
    },
}

impl Place {
    /// Where a listing of `root`, `children`, puts the contender named `own` that `blockers`
    /// keep from holding; `None` if the listing lacks it.
    pub(super) fn of(
        root: &str,
        own: &str,
        children: &[String],
        blockers: Blockers,
    ) -> Option<Place> {
        if !listed(own, children) {
            return None;
        }
        let seq = sequence(own).unwrap_or_default();
        let ahead = Ahead::of(children, seq, blockers.blocks());
        Some(match ahead.blocker {
            None if blockers.crowded(children.len()) => Place::Crowded,
            None => Place::First,
            Some(name) => Place::Behind {
                blocker: path::join(root, name).into_boxed_str(),
                blocker_first: ahead.blocker_first,
            },
        })
    }
}

/// Whether a waiter that heard its blocker's deletion holds without a request (the rule of
/// the queue's module doc, "Waiting and hand-off"): its connection is the same since it
/// armed (`same_connection`: the order of notifications holds within one connection only),
/// its own node is still watched, heard neither deleted nor written (`own_watched`), and it
/// heard the blocker's left-first signal (`signalled`). Even a blocker that was first when
/// the waiter looked must signal: a deletion of the waiter's node in the same transaction as
/// the blocker's, after it (`zkCli deleteall`), is heard only after the blocker's, while the
/// blocker's own transaction never deletes the waiter's node.
pub(super) fn taken(same_connection: bool, own_watched: bool, signalled: bool) -> bool {
    same_connection && own_watched && signalled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_own_node_by_uuid() {
        let ours = Uuid::new_v4();
        let list = vec![
            "_c_aaa-lock-0000000001".to_owned(),
            format!("_c_{ours}-lock-0000000002"),
        ];
        assert_eq!(find_own(&list, &ours), Some(list[1].as_str()));
        assert_eq!(find_own(&list, &Uuid::new_v4()), None);
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn every(_: &str) -> bool {
        true
    }

    #[test]
    fn parses_sequence_suffixes() {
        assert_eq!(sequence("_c_1b2c-lock-0000000007"), Some(7));
        assert_eq!(sequence("_c_1b2c-latch-2147483647"), Some(i32::MAX));
        assert_eq!(sequence("_c_1b2c-lock--000000001"), Some(-1));
        assert_eq!(sequence("_c_1b2c-lock--2147483648"), Some(i32::MIN));
        assert_eq!(sequence("_c_1b2c-lock--2147483647"), Some(-2147483647));
        assert_eq!(sequence("_c_1b2c-lock--1000000000"), Some(-1000000000));
        assert_eq!(sequence("_c_1b2c-lock-2147483647"), Some(i32::MAX));
        assert_eq!(sequence("b7__lock__-2147483647"), Some(-2147483647));
        assert_eq!(sequence("b7__lock__-000000005"), Some(-5));
        assert_eq!(sequence("a3f9e0__lock__0000000042"), Some(42));
        assert_eq!(sequence("lock-0000000003"), Some(3));
        assert_eq!(sequence("lock-+000000003"), None);
        assert_eq!(sequence("lock-00000003"), None);
        assert_eq!(sequence("config"), None);
        assert_eq!(sequence(""), None);
        assert_eq!(sequence("lock-2147483648"), None);
        assert_eq!(sequence("é0000000001"), Some(1));
        assert_eq!(sequence("éééééé"), None);
        assert_eq!(
            split_sequence("_c_1b2c-lock-0000000007"),
            Some(("_c_1b2c-lock-", 7))
        );
        assert_eq!(
            split_sequence("_c_1b2c-lock--000000001"),
            Some(("_c_1b2c-lock-", -1))
        );
        assert_eq!(
            split_sequence("b7__lock__-2147483647"),
            Some(("b7__lock__", -2147483647))
        );
        assert_eq!(split_sequence("member-0000000001"), Some(("member-", 1)));
    }

    #[test]
    fn orders_numerically_not_as_strings() {
        let mut list = names(&[
            "_c_b-lock-0000000010",
            "_c_a-lock-0000000009",
            "_c_c-lock-0000000100",
        ]);
        sort_contenders(&mut list);
        assert_eq!(
            list,
            names(&[
                "_c_a-lock-0000000009",
                "_c_b-lock-0000000010",
                "_c_c-lock-0000000100"
            ])
        );
    }

    #[test]
    fn orders_across_the_32_bit_wrap() {
        let mut list = names(&[
            "_c_x-lock--2147483647",
            "_c_y-lock-2147483646",
            "_c_z-lock--2147483648",
            "_c_w-lock-2147483647",
        ]);
        sort_contenders(&mut list);
        assert_eq!(
            list,
            names(&[
                "_c_y-lock-2147483646",
                "_c_w-lock-2147483647",
                "_c_z-lock--2147483648",
                "_c_x-lock--2147483647",
            ])
        );
        assert_eq!(
            Ahead::of(&list, i32::MIN + 1, every),
            Ahead {
                blocker: Some("_c_z-lock--2147483648"),
                blocker_first: false,
            }
        );
        assert_eq!(
            Ahead::of(&list, 2147483646, every),
            Ahead {
                blocker: None,
                blocker_first: false,
            }
        );
    }

    #[test]
    fn foreign_prefixes_take_part_and_other_children_do_not() {
        let mut list = names(&[
            "_c_ours-lock-0000000008",
            "9f1c2d__lock__0000000007",
            "_c_java-latch-0000000009",
            "readme",
        ]);
        sort_contenders(&mut list);
        assert_eq!(
            list,
            names(&[
                "9f1c2d__lock__0000000007",
                "_c_ours-lock-0000000008",
                "_c_java-latch-0000000009"
            ])
        );
        let ahead = Ahead::of(&list, 9, every);
        assert_eq!(ahead.blocker, Some("_c_ours-lock-0000000008"));
        assert!(!ahead.blocker_first);
        let ahead = Ahead::of(&list, 8, every);
        assert_eq!(ahead.blocker, Some("9f1c2d__lock__0000000007"));
        assert!(ahead.blocker_first);
    }

    #[test]
    fn only_blocking_names_are_waited_on() {
        let list = names(&[
            "_c_a-__WRIT__0000000001",
            "_c_b-__READ__0000000002",
            "_c_c-__READ__0000000003",
        ]);
        let ahead = Ahead::of(&list, 4, is_writer);
        assert_eq!(ahead.blocker, Some("_c_a-__WRIT__0000000001"));
        assert!(ahead.blocker_first);
        let ahead = Ahead::of(&list[1..], 4, is_writer);
        assert_eq!(ahead.blocker, None);
    }

    #[test]
    fn tells_writers_from_readers() {
        assert!(is_writer("_c_0f8e-__WRIT__0000000003"));
        assert!(is_writer("9b1d2c__lock__0000000004"));
        assert!(!is_writer("_c_0f8e-__READ__0000000005"));
        assert!(!is_writer("9b1d2c__rlock__0000000006"));
    }
}
