//! The member record: what a partitioner member's node says about the partitions it works,
//! so that members made with different partitions refuse each other at join.
//!
//! A member's node (`<path>/members/<id>`) holds one line, `zk-recipes partitioner v1 <count>
//! partitions <fingerprint>`, then a newline and the member's own data. `v1` names the
//! assignment function (`assign.rs`), `<count>` how many partitions there are, and
//! `<fingerprint>` a 64-bit hash of the sorted names (joined by `/`, which no name holds),
//! in hex. Two members with the same record deal the same partitions by the same function.

use crate::error::Error;
use crate::recipes::group::Member;

use super::assign::digest;

/// What a member's node data starts with.
const PREFIX: &str = "zk-recipes partitioner ";

/// The version of the assignment function: a new function is a new version.
const VERSION: &str = "v1";

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

    /// A member node's data: the record's line, then `data`.
    pub(crate) fn data(&self, data: &[u8]) -> Vec<u8> {
        let mut line = format!("{PREFIX}{}\n", self.0).into_bytes();
        line.extend_from_slice(data);
        line
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

/// The record in a member node's data, if it holds one.
fn recorded(data: &[u8]) -> Option<&str> {
    let line = data.split(|&b| b == b'\n').next()?;
    std::str::from_utf8(line).ok()?.strip_prefix(PREFIX)
}

/// A member node's own data: what follows the record's line (all of it if there is none).
pub(crate) fn member_data(data: &[u8]) -> &[u8] {
    match (recorded(data), data.iter().position(|&b| b == b'\n')) {
        (Some(_), Some(end)) => &data[end + 1..],
        (Some(_), None) => &[],
        (None, _) => data,
    }
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
        assert!(ours.0.starts_with("v1 2 partitions "), "{ours:?}");
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
        let data = ours.data(b"10.0.0.7:8080\nmore");
        assert!(ours.is_in(&data));
        assert_eq!(member_data(&data), b"10.0.0.7:8080\nmore");
        assert_eq!(member_data(&ours.data(b"")), b"");
        assert_eq!(member_data(b"curator's data"), b"curator's data");
        assert!(!ours.is_in(b"curator's data"));
    }

    #[test]
    fn older_members_with_other_partitions_refuse_a_newer_one() {
        let ours = Record::of(&names(&["a", "b"]));
        let theirs = Record::of(&names(&["a", "b", "c"]));
        let members = [
            member("same", Some(&ours.data(b"")), 5),
            member("unreadable", None, 6),
            member("other", Some(&theirs.data(b"")), 7),
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
