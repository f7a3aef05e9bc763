//! Queue names and order: whose a node is, sequence numbers, their order across the 32-bit
//! wrap, and who is ahead.

use std::cmp::Ordering;

use uuid::Uuid;

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
fn split_sequence(name: &str) -> Option<(&str, i32)> {
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

/// What the recipes name a contender after Curator's protected prefix `_c_<uuid>-`, ours
/// and Curator's alike: a lock's (and a semaphore's lock), a leader's, a reader's, a
/// writer's, a semaphore lease's.
const PROTECTED_NAMES: [&str; 5] = ["lock-", "latch-", "__READ__", "__WRIT__", "lease-"];

/// What kazoo names a contender after its prefix of a uuid's 32 hex digits: a `Lock`'s
/// (and so an `Election`'s, a `Semaphore`'s lock), a `WriteLock`'s; a `ReadLock`'s.
const KAZOO_NAMES: [&str; 2] = ["__lock__", "__rlock__"];

/// Whether `name` is what a queue recipe names a contender: `_c_<uuid>-` then one of
/// [`PROTECTED_NAMES`] (ours, Curator's), or 32 hex digits then one of [`KAZOO_NAMES`];
/// then the sequence number, read as the queue reads it.
pub(crate) fn is_contender_name(name: &str) -> bool {
    let Some((head, _)) = split_sequence(name) else {
        return false;
    };
    if let Some(protected) = head.strip_prefix("_c_") {
        let uuid = protected
            .get(..36)
            .is_some_and(|uuid| Uuid::try_parse(uuid).is_ok());
        let named = protected.get(36..).and_then(|rest| rest.strip_prefix('-'));
        return uuid && named.is_some_and(|named| PROTECTED_NAMES.contains(&named));
    }
    KAZOO_NAMES.iter().any(|kazoo| {
        head.strip_suffix(kazoo)
            .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    })
}

/// Queue order of two sequence numbers, read as serial numbers: correct across the 32-bit
/// wrap as long as live contenders span less than 2^31 creations.
pub(crate) fn serial_order(a: i32, b: i32) -> Ordering {
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

/// What a listing says about the contenders ahead of the one with sequence number `own`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ahead<'a> {
    /// The closest one ahead that blocks it (see [`Ahead::of`]).
    pub(crate) blocker: Option<&'a str>,
    /// Whether that blocker is the first of the queue: then nothing is ahead of it, and
    /// nothing can ever be again (sequence numbers only grow).
    pub(crate) blocker_first: bool,
    /// How many are ahead, blocking or not.
    pub(crate) count: usize,
}

impl<'a> Ahead<'a> {
    /// Reads `children`; `blocks` says which names keep `own` from holding (every one, for
    /// a mutex).
    pub(crate) fn of(children: &'a [String], own: i32, blocks: impl Fn(&str) -> bool) -> Ahead<'a> {
        let mut count = 0;
        let mut lowest = None;
        let mut closest: Option<(i32, &str)> = None;
        for name in children {
            let Some(seq) = sequence(name) else { continue };
            if serial_order(seq, own) != Ordering::Less {
                continue;
            }
            count += 1;
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
            count,
        }
    }
}

/// The child named with `uuid` (Curator's protected naming: `_c_<uuid>-…`).
pub(super) fn find_own<'a>(children: &'a [String], uuid: &Uuid) -> Option<&'a str> {
    let uuid = uuid.to_string();
    children.iter().map(String::as_str).find(|name| {
        name.strip_prefix("_c_")
            .is_some_and(|rest| rest.starts_with(&uuid))
    })
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
                count: 3
            }
        );
        assert_eq!(
            Ahead::of(&list, 2147483646, every),
            Ahead {
                blocker: None,
                blocker_first: false,
                count: 0
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
        assert_eq!(ahead.count, 2);
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
        let writers = |name: &str| name.contains("__WRIT__");
        let ahead = Ahead::of(&list, 4, writers);
        assert_eq!(ahead.blocker, Some("_c_a-__WRIT__0000000001"));
        assert_eq!(ahead.count, 3);
        assert!(ahead.blocker_first);
        let ahead = Ahead::of(&list[1..], 4, writers);
        assert_eq!(ahead.blocker, None);
    }

    #[test]
    fn contenders_are_told_by_what_the_recipes_create() {
        let uuid = "0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b";
        for name in PROTECTED_NAMES {
            assert!(
                is_contender_name(&format!("_c_{uuid}-{name}0000000007")),
                "{name}"
            );
            assert!(
                is_contender_name(&format!("_c_{uuid}-{name}-000000001")),
                "{name}"
            );
        }
        let hex = "9f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e";
        assert!(is_contender_name(&format!("{hex}__lock__0000000003")));
        assert!(is_contender_name(&format!("{hex}__rlock__0000000004")));
        assert!(is_contender_name(&format!("{hex}__lock__-2147483648")));
        for other in [
            "member-0000000001".to_owned(),
            "web-1700000000".to_owned(),
            "0000000001".to_owned(),
            format!("_c_{uuid}-member-0000000001"),
            format!("_c_{uuid}lock-0000000001"),
            "_c_not-a-uuid-at-all-not-a-uuid-at-al-lock-0000000001".to_owned(),
            format!("_c_{uuid}-lock-"),
            format!("x{hex}__lock__0000000003"),
            format!("{}__lock__0000000003", &hex[1..]),
            format!("{hex}__wlock__0000000003"),
            hex.to_owned(),
            "leases".to_owned(),
        ] {
            assert!(!is_contender_name(&other), "{other}");
        }
    }
}
