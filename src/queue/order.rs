//! Queue names: which nodes are contenders' (ours, Curator's, kazoo's). Their order and who
//! is ahead are [`decide`](super::decide)'s.

use uuid::Uuid;

use super::decide::split_sequence;

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

#[cfg(test)]
mod tests {
    use super::*;

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
