//! The member record: what a partitioner member's node says about the partitions it works,
//! so that members made with different partitions refuse each other at join.
//!
//! A member's node (`<path>/members/<id>`) holds two lines, then the member's own data:
//!
//! 1. `zk-recipes partitioner v2 <count> partitions <fingerprint>`: `v2` names the
//!    assignment function (`assign.rs`), `<count>` how many partitions there are, and
//!    `<fingerprint>` a 64-bit hash of the sorted names (joined by `/`, which no name holds),
//!    in hex. Two members with the same record deal the same partitions by the same function.
//! 2. `owns <index>:<token> …`: the partitions the member holds now (their indexes in the
//!    sorted names, with the fencing token of its hold), which the assignment keeps where it
//!    can. A partition two members claim (one let go and has not said so yet) is the
//!    claim's with the greater token: the newer hold.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::recipes::group::Member;

use super::assign::digest;

/// What a member's node data starts with.
const PREFIX: &str = "zk-recipes partitioner ";

/// The version of the assignment function: a new function is a new version.
const VERSION: &str = "v2";

/// What the claims' line starts with.
const OWNS: &str = "owns";

/// What [`Error::PartitionsConflict`] says of a member whose data holds no record.
const NO_RECORD: &str = "no partitioner record";

/// A member record without its prefix: `v1 <count> partitions <fingerprint>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record(String);

impl Record {
    /// The record of `names` (sorted, without repeats).
    pub(crate) fn of(names: &[String]) -> Record {
        let fingerprint = digest(names.join("/").as_bytes());
        Record(format!(
            "{VERSION} {} partitions {fingerprint:016x}",
            names.len()
        ))
    }

    /// A member node's data: the record's line, the line of the partitions it holds
    /// (`held`: index in the sorted names, and token), then `data`.
    pub(crate) fn data(&self, held: &[(usize, u64)], data: &[u8]) -> Vec<u8> {
        let mut lines = format!("{PREFIX}{}\n{OWNS}", self.0);
        for (index, token) in held {
            lines.push_str(&format!(" {index}:{token}"));
        }
        lines.push('\n');
        let mut lines = lines.into_bytes();
        lines.extend_from_slice(data);
        lines
    }

    /// The longest data a member node may need with `data`: every one of `partitions`
    /// held, with the longest token.
    pub(crate) fn max_len(&self, partitions: usize, data: &[u8]) -> usize {
        let claim = format!(" {}:{}", partitions.saturating_sub(1), u64::MAX).len();
        self.data(&[], data).len() + partitions * claim
    }

    /// Whether a member whose node holds `data` works the partitions of this record.
    fn is_in(&self, data: &[u8]) -> bool {
        recorded(data) == Some(self.0.as_str())
    }

    /// Whether `member` works the partitions of this record: its node, which this session
    /// may read, holds this record.
    pub(crate) fn counts(&self, member: &Member) -> bool {
        member.data.as_deref().is_some_and(|data| self.is_in(data))
    }

    /// The ids of the members that work the partitions of this record.
    pub(crate) fn members<'a>(&self, members: &'a [Member]) -> Vec<&'a str> {
        (members.iter())
            .filter(|m| self.counts(m))
            .map(|m| m.id.as_str())
            .collect()
    }

    /// Who holds which of `names` (sorted) now, by the claims of the members that work the
    /// partitions of this record: partition to member id. Of two claims of one partition,
    /// the one with the greater token (the newer hold) counts.
    pub(crate) fn owners<'a>(
        &self,
        names: &'a [String],
        members: &'a [Member],
    ) -> BTreeMap<&'a str, &'a str> {
        let mut owners: BTreeMap<&str, (&str, u64)> = BTreeMap::new();
        for member in members.iter().filter(|m| self.counts(m)) {
            let data = member.data.as_deref().unwrap_or_default();
            for (index, token) in claims(data) {
                let Some(name) = names.get(index) else {
                    continue;
                };
                let owner = owners.entry(name).or_insert((&member.id, token));
                if token > owner.1 {
                    *owner = (&member.id, token);
                }
            }
        }
        (owners.into_iter())
            .map(|(name, (member, _))| (name, member))
            .collect()
    }

    /// The first member that works other partitions than this record's: any such member,
    /// or (`before`: the zxid that created our own node) only one whose node is older than
    /// ours. A member whose node this session may not read is not judged.
    pub(crate) fn conflict<'a>(
        &self,
        members: &'a [Member],
        before: Option<u64>,
    ) -> Option<&'a Member> {
        members.iter().find(|m| {
            let other = m.data.as_deref().is_some_and(|data| !self.is_in(data));
            other && before.is_none_or(|ours| m.created < ours)
        })
    }

    /// The error that refuses a member with this record because of `member`.
    pub(crate) fn refused(&self, path: &str, member: &Member) -> Error {
        let data = member.data.as_deref().unwrap_or_default();
        Error::PartitionsConflict {
            path: path.to_owned(),
            member: member.id.clone(),
            ours: self.0.clone(),
            theirs: recorded(data).unwrap_or(NO_RECORD).to_owned(),
        }
    }
}

/// Whether `member`'s node holds a partitioner's record (of any partitions, any version).
pub(crate) fn is_member(member: &Member) -> bool {
    member
        .data
        .as_deref()
        .is_some_and(|data| data.starts_with(PREFIX.as_bytes()))
}

/// The record in a member node's data, if it holds one.
fn recorded(data: &[u8]) -> Option<&str> {
    let line = data.split(|&b| b == b'\n').next()?;
    std::str::from_utf8(line).ok()?.strip_prefix(PREFIX)
}

/// The lines of a member node's data that follow the record's line, if it holds one.
fn after_record(data: &[u8]) -> Option<&[u8]> {
    recorded(data)?;
    let end = data.iter().position(|&b| b == b'\n');
    Some(end.map_or(&[][..], |end| &data[end + 1..]))
}

/// The claims line and what follows it, of data after the record.
fn split_claims(rest: &[u8]) -> (&[u8], &[u8]) {
    match rest.iter().position(|&b| b == b'\n') {
        Some(end) => (&rest[..end], &rest[end + 1..]),
        None => (rest, &[]),
    }
}

/// A member node's own data: what follows the record's and the claims' lines (all of it if
/// there is no record).
pub(crate) fn member_data(data: &[u8]) -> &[u8] {
    after_record(data).map_or(data, |rest| split_claims(rest).1)
}

/// The partitions a member node's data says it holds: index in the sorted names, and
/// token. Nothing for a line that is not well formed (a member of another version is not
/// counted anyway).
pub(crate) fn claims(data: &[u8]) -> Vec<(usize, u64)> {
    let line = after_record(data).map(|rest| split_claims(rest).0);
    let Some(line) = line.and_then(|line| std::str::from_utf8(line).ok()) else {
        return Vec::new();
    };
    let mut words = line.split(' ');
    if words.next() != Some(OWNS) {
        return Vec::new();
    }
    let claim = |word: &str| {
        let (index, token) = word.split_once(':')?;
        Some((index.parse().ok()?, token.parse().ok()?))
    };
    words.map(claim).collect::<Option<_>>().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn member(id: &str, data: Option<&[u8]>, created: u64) -> Member {
        Member {
            id: id.to_owned(),
            data: data.map(<[u8]>::to_vec),
            created,
        }
    }

    #[test]
    fn a_record_names_the_count_and_the_names() {
        let ours = Record::of(&names(&["a", "b"]));
        assert!(ours.0.starts_with("v2 2 partitions "), "{ours:?}");
        assert_ne!(ours, Record::of(&names(&["a", "c"])));
        assert_ne!(ours, Record::of(&names(&["a/b"])));
        assert_ne!(
            Record::of(&names(&["ab", "c"])),
            Record::of(&names(&["a", "bc"]))
        );
    }

    #[test]
    fn the_data_carries_the_record_then_the_members_own() {
        let ours = Record::of(&names(&["a", "b"]));
        let data = ours.data(&[(1, 7), (0, 90)], b"10.0.0.7:8080\nmore");
        assert!(ours.is_in(&data));
        assert_eq!(member_data(&data), b"10.0.0.7:8080\nmore");
        assert_eq!(claims(&data), [(1, 7), (0, 90)]);
        assert_eq!(member_data(&ours.data(&[], b"")), b"");
        assert!(claims(&ours.data(&[], b"x")).is_empty());
        assert!(ours.data(&[(1, u64::MAX)], b"d").len() <= ours.max_len(2, b"d"));
        assert_eq!(member_data(b"curator's data"), b"curator's data");
        assert!(!ours.is_in(b"curator's data"));
        assert!(claims(b"curator's data").is_empty());
        let bad = b"zk-recipes partitioner v2 2 partitions 0\nowns 1:x 0:3\n";
        assert!(claims(bad).is_empty());
    }

    #[test]
    fn owners_are_the_claims_of_members_with_this_record_the_newer_hold_first() {
        let partitions = names(&["a", "b", "c"]);
        let ours = Record::of(&partitions);
        let theirs = Record::of(&names(&["a", "b"]));
        let members = [
            member("m1", Some(&ours.data(&[(0, 10), (1, 30)], b"")), 1),
            member("m2", Some(&ours.data(&[(1, 20), (2, 40), (9, 50)], b"")), 2),
            member("other", Some(&theirs.data(&[(2, 90)], b"")), 3),
        ];
        let owners = ours.owners(&partitions, &members);
        let expected = BTreeMap::from([("a", "m1"), ("b", "m1"), ("c", "m2")]);
        assert_eq!(owners, expected);
    }

    #[test]
    fn older_members_with_other_partitions_refuse_a_newer_one() {
        let ours = Record::of(&names(&["a", "b"]));
        let theirs = Record::of(&names(&["a", "b", "c"]));
        let members = [
            member("same", Some(&ours.data(&[], b"")), 5),
            member("unreadable", None, 6),
            member("other", Some(&theirs.data(&[], b"")), 7),
            member("foreign", Some(b"x"), 9),
        ];
        assert_eq!(ours.members(&members), ["same"]);
        assert_eq!(ours.conflict(&members, None).map(|m| &*m.id), Some("other"));
        assert_eq!(ours.conflict(&members, Some(7)), None);
        assert_eq!(
            ours.conflict(&members, Some(8)).map(|m| &*m.id),
            Some("other")
        );
        let refused = ours.refused("/p", &members[3]);
        assert!(
            matches!(&refused, Error::PartitionsConflict { member, theirs, .. }
                if member == "foreign" && theirs == NO_RECORD),
            "{refused:?}"
        );
    }
}
