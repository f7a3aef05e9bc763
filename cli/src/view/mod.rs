//! What `observe` and `status` print about a path: one line per look.
//!
//! A look ([`Seen`]) finds one of:
//!
//! * **A queue** of contenders directly under the path, in queue order, or a semaphore's
//!   leases and acquirers, as the library lists them (`Mutex::contenders`,
//!   `RwLock::contenders`, `Semaphore::contenders`), who holds included: in an election the
//!   first leads; in a lock the first holds; in a read/write lock a writer holds when first,
//!   readers hold when no writer is ahead; a semaphore's leases hold, in order, up to the
//!   maximum recorded in `PATH/leases` (all of them if none is recorded), and a lease beyond
//!   it is the acquirer passing in ([`queue`]).
//! * **The keys of a `KeyedMutex` root**, each with its lock's holder and waiters, or free
//!   ([`keyed`]); **the members of a group** ([`group`]); **a partitioner's members and
//!   partitions**, each partition's lock with its holder and waiters, or free
//!   ([`partitioner`]).
//! * **Nothing told**: the path's children as they are (none: `empty`), or no such path.
//!
//! Which it is comes from `--kind`, or else from the nodes ([`crate::look`]): a queue's
//! recipe from its contenders' names ([`recipe_of`]), never from a name that only looks like
//! one.
//!
//! * Text: `PATH: leader ID; followers: ID, ID`, `PATH: held by NAME; waiting: NAME`,
//!   `PATH: read by NAME, NAME; waiting: writer NAME, reader NAME`, `PATH: written by
//!   NAME; nobody waiting`, `PATH: 2 of 3 leases: NAME, NAME; waiting: NAME`, `PATH: KEY
//!   held by NAME (2 waiting), KEY free` (`PATH: no keys`), `PATH: members: ID=DATA ID`
//!   (`PATH: members: -`), `PATH: members: ID (N held), ID (N held); PARTITION held by ID
//!   (N waiting), PARTITION free` (a partitioner), `PATH: no contenders; children: CHILD, CHILD`, `PATH: empty`,
//!   or `PATH: no such path`. A contender is named by its id (its node's data: zk-recipes'
//!   default is `<host name>/<pid>`) or, without one (Curator's `InterProcessMutex`, a node
//!   this session may not read, a holder asked to let go), by its node's name. A name or
//!   path that could forge a line or a list is shown quoted with Rust's escapes (`"a\n/x:
//!   leader b"`; [`shown`] says which).
//! * `--json`: `{"path", "kind": "election", "leader", "participants"}` (participants
//!   include the leader), `{"path", "kind": "lock", "holder", "waiters"}`, `{"path", "kind":
//!   "rwlock", "holders", "waiters"}`, `{"path", "kind": "semaphore", "max", "leases",
//!   "waiting"}` (`max`: `null` if none is recorded), `{"path", "kind": "keyed", "keys":
//!   [{"key", "holder", "waiters"}]}` (`holder`: `null` if free), `{"path", "kind": "group",
//!   "members": [{"id", "data"}]}`, `{"path", "kind": "partitioner", "members": [{"id",
//!   "data", "held"}], "partitions": [{"key", "holder", "waiters"}]}`, `{"path", "kind":
//!   "unknown", "children"}` (names),
//!   `{"path", "kind": "empty"}` or `{"path", "kind": "missing"}`; each contender is `{"id",
//!   "node", "token", "revocation_requested"}` (`id`: `null` if not known: its node cannot
//!   be read, or it was asked to let go; `node`: full path; `token`: its fencing token;
//!   `revocation_requested`: someone asked it to let go), with `"mode": "read"|"write"` in a
//!   read/write lock.

mod group;
mod keyed;
mod partitioner;
mod queue;

use serde_json::json;
use zk_recipes::{Contender, Member, PartitionerStatus};

use crate::output::shown;

pub use group::{members_json, members_text};
pub use keyed::Key;

/// What a look at a path found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The path does not exist.
    Missing,
    /// No recipe told: the path's children, by name, sorted (none: it is empty).
    Children(Vec<String>),
    /// The contenders of the queue directly under the path, first first (none: empty), and
    /// whose queue it is.
    Queue(Recipe, Vec<Contender>),
    /// A semaphore: the maximum recorded, the leases then the acquirers, first first.
    Semaphore {
        max: Option<u32>,
        contenders: Vec<Contender>,
    },
    /// A `KeyedMutex` root: its keys, by name, each with its lock's contenders.
    Keyed(Vec<Key>),
    /// A group's members.
    Group(Vec<Member>),
    /// A partitioner's members, and its partitions with their locks' contenders.
    Partitioner(PartitionerStatus),
}

/// Whose queue is directly under a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipe {
    Election,
    Lock,
    RwLock,
}

/// What, after the prefix, names a leader's node (ours, Curator's `LeaderLatch`).
const ELECTION_MARKS: [&str; 1] = ["-latch-"];
/// ... a reader's or a writer's (ours and Curator's; kazoo's reader).
const RWLOCK_MARKS: [&str; 3] = ["__READ__", "__WRIT__", "__rlock__"];
/// ... a lock's (ours and Curator's; kazoo's lock and writer).
const LOCK_MARKS: [&str; 2] = ["-lock-", "__lock__"];

/// Whose queue the nodes `names` are, told only by the names of contenders among them
/// (named as zk-recipes, Curator or kazoo name theirs: [`Contender::is_node_name`]): an
/// election if one is a leader's, else a read/write lock if one is a reader's or a writer's
/// (kazoo's writer alone is a lock's), else a lock if one is a lock's. `None` if no name is
/// a lock's, a leader's, a reader's or a writer's (a semaphore's leases are no queue of
/// their own).
pub fn recipe_of<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<Recipe> {
    let contenders: Vec<&str> = names
        .into_iter()
        .filter(|name| Contender::is_node_name(name))
        .collect();
    // A contender's name holds its mark once, after a prefix of hex digits and dashes.
    let marked = |marks: &[&str]| {
        (contenders.iter()).any(|name| marks.iter().any(|mark| name.contains(mark)))
    };
    if marked(&ELECTION_MARKS) {
        Some(Recipe::Election)
    } else if marked(&RWLOCK_MARKS) {
        Some(Recipe::RwLock)
    } else if marked(&LOCK_MARKS) {
        Some(Recipe::Lock)
    } else {
        None
    }
}

/// Whose queue `contenders` (a lock's listing of a path) are, if their nodes' names tell
/// (see [`recipe_of`]).
pub fn told(contenders: &[Contender]) -> Option<Recipe> {
    let names = contenders
        .iter()
        .map(|c| c.node.rsplit('/').next().unwrap_or(&c.node));
    recipe_of(names)
}

/// Renders what a look at `path` saw.
pub fn line(path: &str, seen: &Seen, json: bool) -> String {
    match seen {
        Seen::Queue(..) | Seen::Semaphore { .. } => queue::line(path, seen, json),
        Seen::Keyed(keys) => keyed::line(path, keys, json),
        Seen::Group(members) => group::line(path, members, json),
        Seen::Partitioner(status) => partitioner::line(path, status, json),
        Seen::Children(children) if children.is_empty() => said(path, "empty", "empty", json),
        Seen::Children(children) => match json {
            true => json!({"path": path, "kind": "unknown", "children": children}).to_string(),
            false => {
                let names: Vec<_> = children.iter().map(|name| shown(name)).collect();
                let children = names.join(", ");
                format!("{}: no contenders; children: {children}", shown(path))
            }
        },
        Seen::Missing => said(path, "missing", "no such path", json),
    }
}

/// The line of a look that found nothing to list: `kind` in JSON, `text` in text.
fn said(path: &str, kind: &str, text: &str, json: bool) -> String {
    match json {
        true => json!({"path": path, "kind": kind}).to_string(),
        false => format!("{}: {text}", shown(path)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    const UUID: &str = "0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b";
    const HEX: &str = "0f8e2c1a3b4d4e5f8a9b0c1d2e3f4a5b";

    #[test]
    fn the_recipe_is_told_by_contenders_names_only() {
        let told = |names: &[String]| recipe_of(names.iter().map(String::as_str));
        let ours = |mark: &str| format!("_c_{UUID}-{mark}0000000001");
        assert_eq!(told(&[ours("latch-")]), Some(Recipe::Election));
        assert_eq!(told(&[ours("lock-")]), Some(Recipe::Lock));
        assert_eq!(told(&[ours("__WRIT__")]), Some(Recipe::RwLock));
        assert_eq!(
            told(&[ours("__READ__"), ours("lock-")]),
            Some(Recipe::RwLock)
        );
        // kazoo's reader and writer; a queue of kazoo's writers alone is a lock.
        let kazoo = [
            format!("{HEX}__rlock__0000000001"),
            format!("{HEX}__lock__0000000002"),
        ];
        assert_eq!(told(&kazoo), Some(Recipe::RwLock));
        assert_eq!(told(&kazoo[1..]), Some(Recipe::Lock));
        // Names that only look like a contender's, or a recipe's parts, tell nothing.
        let keys = ["order-1234567890", "locks", "leases", "x-latch-0000000001"];
        assert_eq!(told(&keys.map(String::from)), None);
        let fake = "_c_not-a-uuid-lock-0000000001".to_owned();
        assert_eq!(told(&[fake, "a__READ__0000000001".into()]), None);
        // A semaphore's leases are no queue of their own.
        assert_eq!(told(&[ours("lease-")]), None);
    }

    #[test]
    fn what_is_no_recipe_is_shown_as_it_is() {
        let children = Seen::Children(vec!["locks".into(), "order-1234567890".into()]);
        assert_eq!(
            line("/sched", &children, false),
            "/sched: no contenders; children: locks, order-1234567890"
        );
        let parsed: Value = serde_json::from_str(&line("/sched", &children, true)).unwrap();
        assert_eq!(parsed["kind"], "unknown");
        assert_eq!(parsed["children"][1], "order-1234567890");
        let forged = Seen::Children(vec!["a, b".into(), "c\n/d: held by x".into()]);
        assert_eq!(
            line("/p", &forged, false),
            r#"/p: no contenders; children: "a, b", "c\n/d: held by x""#
        );
        assert_eq!(line("/p", &Seen::Children(Vec::new()), false), "/p: empty");
        assert_eq!(
            line("/p", &Seen::Children(Vec::new()), true),
            r#"{"kind":"empty","path":"/p"}"#
        );
    }

    #[test]
    fn a_missing_path_says_so() {
        assert_eq!(line("/typo", &Seen::Missing, false), "/typo: no such path");
        assert_eq!(
            line("/typo", &Seen::Missing, true),
            r#"{"kind":"missing","path":"/typo"}"#
        );
    }
}
