//! The assignment: which live member works which partition, as a pure function of the
//! partition names, the live members' ids and who owns what now (each member's claims, as
//! its node publishes them) — every member computes it alone, from its own view of the group,
//! and all members that see the same group compute the same assignment.
//!
//! **The function** has three steps, with `P` partitions and `N` members:
//!
//! 1. *Capacities.* `P mod N` members may own `⌈P/N⌉` partitions, the others `⌊P/N⌋`; the
//!    larger capacities go first to the members that own at least `⌈P/N⌉` now, so that as
//!    few partitions as possible must move, then in an order fixed by a hash of the ids (see
//!    [`capacities`] for why not to those that own most).
//! 2. *Keep.* Each member keeps what it owns, up to its capacity; a member over it keeps the
//!    partitions it wants most ([`score`]) and gives up the rest.
//! 3. *Deal.* Every partition nobody keeps (never owned, owned by a member that left, or given
//!    up in step 2) goes by rendezvous hashing with capacities: every pair of such a partition
//!    and a member with room gets a score, a 64-bit hash of both names; the pairs are taken
//!    highest first (ties by member id, then partition name), and a pair whose partition is
//!    not yet dealt goes to its member if the member still has room.
//!
//! So every member gets `⌊P/N⌋` or `⌈P/N⌉` partitions (the capacities add up to `P`, and
//! every partition is kept or dealt), and the assignment moves nothing it need not:
//! once owners match the assignment, a member that **leaves** gives up exactly its own
//! partitions (the others' capacities do not shrink, so they keep all theirs), and a member
//! that **joins** takes exactly its share, `⌊P/(N+1)⌋` or `⌈P/(N+1)⌉`, from the members over
//! their new capacity (`tests::stickiness` checks both over many groups). And an assignment
//! that owners match deals itself again: it is where the members settle.
//!
//! **Why owners are an input.** A function of the members' ids alone cannot be both balanced
//! and sticky: for a leave to move only the leaver's partitions in every group, each
//! partition's owner must be the member that ranks it first among those present (plain
//! rendezvous hashing), and then the counts spread around `P/N` by about `√(P/N)` (100
//! partitions on 10 members leave the busiest with 15 on average). Kafka's cooperative
//! assignor takes the current owners as input for the same reason. Here they are what the
//! members publish in their own nodes (see `record.rs`), so no leader is needed, and
//! there is no leader to lose, elect and fence: a member that sees the group the way the
//! others do computes the same answer, and the per-partition locks keep any two members
//! that disagree for a moment (their views trail the servers) from working one partition
//! at once.
//!
//! The hash ([`score`]) is FNV-1a folded through the SplitMix64 finaliser: a function of the
//! bytes alone, the same on every platform and every release. Changing it (or the steps)
//! changes every member's answer: it is part of the record members compare at join (the
//! member record, `v2`), so members of two versions refuse each other rather than disagree
//! for ever.

use std::cmp::Reverse;
use std::collections::BTreeMap;

/// The FNV-1a offset basis and prime (64 bits).
const FNV_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a of `bytes`, starting from `state`.
fn fnv1a(bytes: &[u8], state: u64) -> u64 {
    bytes.iter().fold(state, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

/// The SplitMix64 finaliser: spreads every input bit over the whole word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How much `member` wants `partition`: the higher, the sooner the pair is dealt.
pub(crate) fn score(partition: &str, member: &str) -> u64 {
    let partition = mix(fnv1a(partition.as_bytes(), FNV_BASIS));
    mix(fnv1a(member.as_bytes(), partition))
}

/// A hash of `bytes` alone (the same function as [`score`]'s), for fingerprints.
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    mix(fnv1a(bytes, FNV_BASIS))
}

/// Deals `partitions` to `members` (see the module doc), given who owns what now (`owners`:
/// partition to member; owners that are not members, and partitions that are not in
/// `partitions`, count for nothing): each partition's member. Every partition is dealt once
/// there is a member; none when there is none. The order of either slice does not matter,
/// nor do repeated members.
pub(crate) fn assign<'a>(
    partitions: &'a [String],
    members: &[&'a str],
    owners: &BTreeMap<&str, &str>,
) -> BTreeMap<&'a str, &'a str> {
    let mut members: Vec<&'a str> = members.to_vec();
    members.sort_unstable();
    members.dedup();
    if members.is_empty() {
        return BTreeMap::new();
    }
    let owned = owned_by(partitions, &members, owners);
    let capacities = capacities(partitions.len(), &members, &owned);
    let mut dealt = BTreeMap::new();
    let mut room: BTreeMap<&'a str, usize> = BTreeMap::new();
    for (member, capacity) in capacities {
        let mut own = owned.get(member).cloned().unwrap_or_default();
        own.sort_unstable_by_key(|p| (Reverse(score(p, member)), *p));
        own.truncate(capacity);
        room.insert(member, capacity - own.len());
        dealt.extend(own.into_iter().map(|p| (p, member)));
    }
    let left: Vec<&'a str> = (partitions.iter().map(String::as_str))
        .filter(|p| !dealt.contains_key(p))
        .collect();
    let mut pairs: Vec<(Reverse<u64>, &'a str, &'a str)> = (left.iter())
        .flat_map(|p| {
            (room.iter())
                .filter(|(_, room)| **room > 0)
                .map(move |(m, _)| (Reverse(score(p, m)), *m, *p))
        })
        .collect();
    pairs.sort_unstable();
    for (_, member, partition) in pairs {
        let space = room.entry(member).or_default();
        if *space == 0 || dealt.contains_key(partition) {
            continue;
        }
        *space -= 1;
        dealt.insert(partition, member);
    }
    dealt
}

/// The partitions each member (of the sorted `members`) owns now, by `owners`.
fn owned_by<'a>(
    partitions: &'a [String],
    members: &[&'a str],
    owners: &BTreeMap<&str, &str>,
) -> BTreeMap<&'a str, Vec<&'a str>> {
    let mut owned: BTreeMap<&'a str, Vec<&'a str>> = BTreeMap::new();
    for partition in partitions {
        let owner = owners.get(partition.as_str());
        let member = owner.and_then(|o| members.binary_search(o).ok().map(|i| members[i]));
        if let Some(member) = member {
            owned.entry(member).or_default().push(partition);
        }
    }
    owned
}

/// Each member's capacity: `⌊P/N⌋`, and one more for `P mod N` members: first those that
/// own `⌈P/N⌉` or more now, then in an order fixed by a hash of their ids.
///
/// Why not "those that own most": while partitions move, who owns most changes from one
/// view to the next, and a capacity that moves with it would make members take and give up
/// partitions the settled assignment leaves where they were. Whether a member owns the
/// larger share already changes only for members that are meant to reach it (or to leave
/// it), so the capacities stay put while the members get there.
fn capacities<'a>(
    partitions: usize,
    members: &[&'a str],
    owned: &BTreeMap<&'a str, Vec<&'a str>>,
) -> Vec<(&'a str, usize)> {
    let (floor, extra) = (partitions / members.len(), partitions % members.len());
    let full = |m: &&str| owned.get(m).map_or(0, Vec::len) > floor;
    let mut ranked: Vec<&'a str> = members.to_vec();
    ranked.sort_by_key(|m| (Reverse(full(m)), digest(m.as_bytes()), *m));
    (ranked.into_iter().enumerate())
        .map(|(rank, member)| (member, floor + usize::from(rank < extra)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    fn refs(owned: &[String]) -> Vec<&str> {
        owned.iter().map(String::as_str).collect()
    }

    /// How many partitions each member got.
    fn counts<'a>(dealt: &BTreeMap<&str, &'a str>) -> BTreeMap<&'a str, usize> {
        let mut counts = BTreeMap::new();
        for member in dealt.values() {
            *counts.entry(*member).or_insert(0) += 1;
        }
        counts
    }

    /// The partitions whose member differs between two deals.
    fn moved(before: &BTreeMap<&str, &str>, after: &BTreeMap<&str, &str>) -> usize {
        before
            .iter()
            .filter(|(p, m)| after.get(*p) != Some(*m))
            .count()
    }

    #[test]
    fn the_hash_never_changes() {
        // Members of one group must agree: a change here is a new record version. (The
        // values were computed apart from this code, by a few lines of Python.)
        assert_eq!(score("p0", "m0"), 0x668a_ff5f_febd_1346);
        assert_eq!(digest(b""), 0xf52a_15e9_a9b5_e89b);
        assert_ne!(score("p0", "m1"), score("p1", "m0"));
        assert_ne!(score("ab", "c"), score("a", "bc"));
    }

    #[test]
    fn every_partition_is_dealt_and_every_member_gets_floor_or_ceil() {
        for p in [0, 1, 5, 12, 100, 257] {
            for n in [1, 2, 3, 7, 10, 16, 300] {
                let partitions = names("p", p);
                let members = names("m", n);
                let dealt = assign(&partitions, &refs(&members), &BTreeMap::new());
                assert_eq!(dealt.len(), p, "P={p} N={n}");
                let counts = counts(&dealt);
                let (floor, ceil) = (p / n, p.div_ceil(n));
                for member in &members {
                    let got = counts.get(member.as_str()).copied().unwrap_or(0);
                    assert!(
                        got == floor || got == ceil,
                        "P={p} N={n}: {member} got {got}"
                    );
                }
                let at_ceil = counts
                    .values()
                    .filter(|&&c| c == ceil && ceil > floor)
                    .count();
                assert_eq!(at_ceil, p % n, "P={p} N={n}");
            }
        }
    }

    #[test]
    fn no_members_no_deal() {
        assert!(assign(&names("p", 4), &[], &BTreeMap::new()).is_empty());
    }

    #[test]
    fn the_order_of_members_and_partitions_does_not_matter() {
        let partitions = names("p", 40);
        let members = names("replica-", 6);
        let dealt = assign(&partitions, &refs(&members), &BTreeMap::new());
        let mut shuffled_members = refs(&members);
        shuffled_members.reverse();
        shuffled_members.push("replica-2");
        let mut shuffled_partitions = partitions.clone();
        shuffled_partitions.rotate_left(17);
        let again = assign(&shuffled_partitions, &shuffled_members, &dealt);
        assert_eq!(dealt, again);
    }

    /// Once owners match the assignment, a join gives the newcomer exactly its share and
    /// moves nothing else, and a leave gives away exactly the leaver's partitions; counted
    /// over 200 random groups each, the members joining and leaving in turn.
    #[test]
    fn stickiness() {
        for (p, n) in [(100, 10), (100, 3), (12, 5), (64, 16), (5, 7), (1, 3)] {
            let partitions = names("partition-", p);
            for trial in 0..200 {
                let mut ids = names(&format!("m{trial}-"), n);
                ids.push(format!("new-{trial}"));
                let mut members: Vec<&str> = refs(&ids[..n]);
                let mut owners = assign(&partitions, &members, &BTreeMap::new());
                let newcomer = ids[n].as_str();
                members.push(newcomer);
                let after = assign(&partitions, &members, &owners);
                let taken = after.values().filter(|m| **m == newcomer).count();
                assert!(taken == p / (n + 1) || taken == p.div_ceil(n + 1));
                assert_eq!(moved(&owners, &after), taken, "P={p} N={n} join");
                owners = after;

                let leaver = members.remove(trial % (n + 1));
                let after = assign(&partitions, &members, &owners);
                let own = owners.values().filter(|m| **m == leaver).count();
                assert!(after.values().all(|m| *m != leaver));
                assert_eq!(moved(&owners, &after), own, "P={p} N={n} leave");
                assert_eq!(after, assign(&partitions, &members, &after));
            }
        }
    }

    /// From any owners (too many for one member, none for another, owners that left), the
    /// deal is balanced, keeps every partition whose owner has room, and deals itself again.
    #[test]
    fn any_owners_give_a_balanced_deal_that_keeps_what_fits() {
        let partitions = names("p", 30);
        let members = names("m", 4);
        let mut owners = BTreeMap::new();
        for (i, partition) in partitions.iter().enumerate() {
            let owner = ["m0", "m0", "m0", "m1", "gone"][i % 5];
            owners.insert(partition.as_str(), owner);
        }
        let dealt = assign(&partitions, &refs(&members), &owners);
        let counts = counts(&dealt);
        assert_eq!(counts.values().sum::<usize>(), 30);
        assert!(counts.values().all(|c| *c == 7 || *c == 8), "{counts:?}");
        // m0 owned 18 and may keep 8 (it owns most); m1 owned 6 and keeps them all.
        assert_eq!(counts["m0"], 8);
        let kept_m1 = (owners.iter())
            .filter(|(p, m)| **m == "m1" && dealt[*p] == "m1")
            .count();
        assert_eq!(kept_m1, 6);
        assert_eq!(dealt, assign(&partitions, &refs(&members), &dealt));
    }
}
