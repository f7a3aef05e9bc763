//! What `observe` and `status` print about a path: one line per look.
//!
//! A look ([`Seen`]) finds either a queue of contenders directly under the path, in queue
//! order, or a semaphore's leases and acquirers. A queue is an election's when its nodes
//! are named `…-latch-<seq>` (`LeaderElection`, Curator's `LeaderLatch`), a read/write
//! lock's when they are named `…__READ__<seq>`/`…__WRIT__<seq>` (`RwLock`, Curator's
//! `InterProcessReadWriteLock`) or kazoo's `…__rlock__<seq>` are among them (kazoo's
//! writers are `…__lock__<seq>`), else a lock's. In an election the first leads; in a lock
//! the first holds; in a read/write lock a writer holds when first, readers hold when no
//! writer is ahead. A semaphore's leases hold, in order, up to the maximum recorded in
//! `PATH/leases`' data (`zk-recipes max leases N`; all of them if none is recorded); a
//! lease beyond it is the acquirer passing in, waiting for the count, whose node is then
//! the first of `PATH/locks` (it is told once, by its lease); the acquirers in `PATH/locks`
//! wait in order.
//!
//! * Text: `PATH: leader ID; followers: ID, ID`, `PATH: held by NAME; waiting: NAME`,
//!   `PATH: read by NAME, NAME; waiting: writer NAME, reader NAME`, `PATH: written by
//!   NAME; nobody waiting`, `PATH: 2 of 3 leases: NAME, NAME; waiting: NAME`, or `PATH:
//!   empty`. A contender is named by its id (its node's data) or, without one (a
//!   `zk-recipes lock`), by its node's name. A name or path that holds anything but
//!   printable characters, or `,`, `;`, `"` or `\`, is shown quoted with Rust's escapes
//!   (`"a\n/x: leader b"`): node data is anyone's to write, and must not forge a line or
//!   a list.
//! * `--json`: `{"path", "kind": "election", "leader", "participants"}` (participants
//!   include the leader), `{"path", "kind": "lock", "holder", "waiters"}`, `{"path", "kind":
//!   "rwlock", "holders", "waiters"}`, `{"path", "kind": "semaphore", "max", "leases",
//!   "waiting"}` (`max`: `null` if none is recorded), or `{"path", "kind": "empty"}`; each
//!   contender is `{"id", "node"}` (`node`: full path), with `"mode": "read"|"write"` in a
//!   read/write lock.

use std::borrow::Cow;

use serde_json::{json, Value};
use zk_recipes::Participant;

/// What a look at a path found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The contenders of the queue directly under the path, first first (none: empty).
    Queue(Vec<Participant>),
    /// A semaphore: the maximum recorded, the leases and the acquirers, each first first.
    Semaphore {
        max: Option<u32>,
        leases: Vec<Participant>,
        acquirers: Vec<Participant>,
    },
}

/// How one kind of queue is told.
struct Kind {
    /// The JSON `kind`.
    kind: &'static str,
    /// The holders' role in text.
    held: &'static str,
    /// The others' role in text, and the text when there are none.
    rest: &'static str,
    no_rest: &'static str,
    /// The JSON key of the holders, and whether it is the first alone instead of a list.
    held_key: &'static str,
    one_holder: bool,
    /// The JSON key of the others, and whether that list holds the holders too.
    list_key: &'static str,
    list_has_held: bool,
    /// Whether contenders are readers and writers (`mode` in JSON, named so in text).
    modes: bool,
}

const ELECTION: Kind = Kind {
    kind: "election",
    held: "leader",
    rest: "followers",
    no_rest: "no followers",
    held_key: "leader",
    one_holder: true,
    list_key: "participants",
    list_has_held: true,
    modes: false,
};

const LOCK: Kind = Kind {
    kind: "lock",
    held: "held by",
    rest: "waiting",
    no_rest: "nobody waiting",
    held_key: "holder",
    one_holder: true,
    list_key: "waiters",
    list_has_held: false,
    modes: false,
};

const READ: Kind = Kind {
    kind: "rwlock",
    held: "read by",
    held_key: "holders",
    one_holder: false,
    modes: true,
    ..LOCK
};

const WRITE: Kind = Kind {
    held: "written by",
    ..READ
};

const SEMAPHORE: Kind = Kind {
    kind: "semaphore",
    held: "leases",
    held_key: "leases",
    one_holder: false,
    list_key: "waiting",
    ..LOCK
};

/// Node name parts that make a queue a read/write lock's.
const RWLOCK_MARKS: [&str; 3] = ["__READ__", "__WRIT__", "__rlock__"];
/// Node name parts of writers: ours and Curator's, kazoo's.
const WRITER_MARKS: [&str; 2] = ["__WRIT__", "__lock__"];

/// A look told: its kind, every contender in order, and how many of the first hold.
struct Split<'a> {
    kind: &'static Kind,
    contenders: Vec<&'a Participant>,
    held: usize,
}

/// Tells `seen`; `None` if nothing is there.
fn split(seen: &Seen) -> Option<Split<'_>> {
    match seen {
        Seen::Queue(participants) => {
            let first = participants.first()?;
            let marked = |marks: &[&str]| {
                participants
                    .iter()
                    .any(|p| marks.iter().any(|mark| node_name(p).contains(mark)))
            };
            let (kind, held) = if marked(&["-latch-"]) {
                (&ELECTION, 1)
            } else if !marked(&RWLOCK_MARKS) {
                (&LOCK, 1)
            } else if writes(first) {
                (&WRITE, 1)
            } else {
                let readers = participants.iter().position(writes);
                (&READ, readers.unwrap_or(participants.len()))
            };
            let contenders = participants.iter().collect();
            Some(Split {
                kind,
                contenders,
                held,
            })
        }
        Seen::Semaphore {
            max,
            leases,
            acquirers,
        } => {
            let max = max.map_or(usize::MAX, |max| usize::try_from(max).unwrap_or(usize::MAX));
            let held = leases.len().min(max);
            // A lease beyond the maximum is the first acquirer's, passing in.
            let passing = usize::from(held < leases.len());
            let contenders = leases.iter().chain(acquirers.iter().skip(passing));
            Some(Split {
                kind: &SEMAPHORE,
                contenders: contenders.collect(),
                held,
            })
        }
    }
}

/// Renders what a look at `path` saw.
pub fn line(path: &str, seen: &Seen, json: bool) -> String {
    let Some(Split {
        kind,
        contenders,
        held,
    }) = split(seen)
    else {
        return match json {
            true => json!({"path": path, "kind": "empty"}).to_string(),
            false => format!("{}: empty", shown(path)),
        };
    };
    let (holders, rest) = contenders.split_at(held);
    let max = match seen {
        Seen::Semaphore { max, .. } => Some(*max),
        Seen::Queue(_) => None,
    };
    if json {
        let object = |p: &&Participant| object(p, kind.modes);
        let listed = if kind.list_has_held {
            &contenders
        } else {
            rest
        };
        let mut line = json!({"path": path, "kind": kind.kind});
        line[kind.held_key] = match kind.one_holder {
            true => holders.first().map(object).into(),
            false => holders.iter().map(object).collect(),
        };
        line[kind.list_key] = listed.iter().map(object).collect();
        if let Some(max) = max {
            line["max"] = max.into();
        }
        return line.to_string();
    }
    let names = |list: &[&Participant], modes: bool| -> String {
        let names: Vec<String> = list
            .iter()
            .map(|p| match modes {
                true if writes(p) => format!("writer {}", shown(name(p))),
                true => format!("reader {}", shown(name(p))),
                false => shown(name(p)).into_owned(),
            })
            .collect();
        names.join(", ")
    };
    let head = match max {
        None => format!("{} {}", kind.held, names(holders, false)),
        Some(max) => {
            let count = match max {
                Some(max) => format!("{held} of {max} {}", kind.held),
                None if held == 1 => "1 lease".to_owned(),
                None => format!("{held} {}", kind.held),
            };
            match holders.is_empty() {
                true => count,
                false => format!("{count}: {}", names(holders, false)),
            }
        }
    };
    let rest = match rest.is_empty() {
        true => kind.no_rest.to_owned(),
        false => format!("{}: {}", kind.rest, names(rest, kind.modes)),
    };
    format!("{}: {head}; {rest}", shown(path))
}

/// `text` as printed in a line: as it is if it can neither forge a line nor a list, else
/// quoted, with escapes.
fn shown(text: &str) -> Cow<'_, str> {
    let plain = |c: char| c.escape_debug().len() == 1 && !matches!(c, ',' | ';' | '"' | '\\');
    match !text.is_empty() && text.chars().all(plain) {
        true => Cow::Borrowed(text),
        false => Cow::Owned(format!("{text:?}")),
    }
}

/// The id, or the node's name if the id is empty.
fn name(participant: &Participant) -> &str {
    match participant.id.as_str() {
        "" => node_name(participant),
        id => id,
    }
}

/// The last part of the node's path.
fn node_name(participant: &Participant) -> &str {
    participant
        .node
        .rsplit('/')
        .next()
        .unwrap_or(&participant.node)
}

/// Whether a read/write lock's contender is a writer.
fn writes(participant: &Participant) -> bool {
    WRITER_MARKS
        .iter()
        .any(|mark| node_name(participant).contains(mark))
}

fn object(participant: &Participant, modes: bool) -> Value {
    let mut object = json!({"id": participant.id, "node": participant.node});
    if modes {
        object["mode"] = match writes(participant) {
            true => "write",
            false => "read",
        }
        .into();
    }
    object
}
#[cfg(test)]
mod tests {
    use super::*;

    fn participant(id: &str, node: &str) -> Participant {
        Participant {
            id: id.into(),
            node: node.into(),
        }
    }

    #[test]
    fn election() {
        let a = participant("node-a", "/e/_c_1-latch-0000000001");
        let b = participant("node-b", "/e/_c_2-latch-0000000002");
        assert_eq!(
            line("/e", &Seen::Queue(vec![a.clone()]), false),
            "/e: leader node-a; no followers"
        );
        assert_eq!(
            line("/e", &Seen::Queue(vec![a.clone(), b.clone()]), false),
            "/e: leader node-a; followers: node-b"
        );
        let parsed: Value =
            serde_json::from_str(&line("/e", &Seen::Queue(vec![a, b]), true)).unwrap();
        assert_eq!(parsed["kind"], "election");
        assert_eq!(parsed["leader"]["id"], "node-a");
        assert_eq!(
            parsed["participants"][1]["node"],
            "/e/_c_2-latch-0000000002"
        );
    }

    #[test]
    fn lock() {
        let a = participant("", "/l/_c_1-lock-0000000001");
        let b = participant("", "/l/_c_2-lock-0000000002");
        let c = participant("", "/l/_c_3-lock-0000000003");
        assert_eq!(
            line("/l", &Seen::Queue(vec![a.clone(), b.clone(), c]), false),
            "/l: held by _c_1-lock-0000000001; waiting: _c_2-lock-0000000002, _c_3-lock-0000000003"
        );
        let parsed: Value =
            serde_json::from_str(&line("/l", &Seen::Queue(vec![a, b]), true)).unwrap();
        assert_eq!(parsed["kind"], "lock");
        assert_eq!(parsed["holder"]["node"], "/l/_c_1-lock-0000000001");
        assert_eq!(parsed["waiters"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn text_that_could_forge_a_line_or_a_list_is_quoted() {
        let forged = participant("a\n/t/x: leader forged", "/t/_c_1-latch-0000000001");
        let listed = participant("b, c; d", "/t/_c_2-latch-0000000002");
        let plain = participant("host-1.example émoji ✓", "/t/_c_3-latch-0000000003");
        let hidden = participant("x\u{202e}y", "/t/_c_4-latch-0000000004");
        let seen = Seen::Queue(vec![forged, listed, plain, hidden]);
        assert_eq!(
            line("/t", &seen, false),
            r#"/t: leader "a\n/t/x: leader forged"; followers: "b, c; d", host-1.example émoji ✓, "x\u{202e}y""#
        );
        let parsed: Value = serde_json::from_str(&line("/t", &seen, true)).unwrap();
        assert_eq!(parsed["leader"]["id"], "a\n/t/x: leader forged");
    }

    #[test]
    fn empty() {
        let nothing = Seen::Queue(Vec::new());
        assert_eq!(line("/x", &nothing, false), "/x: empty");
        assert_eq!(
            line("/x", &nothing, true),
            r#"{"kind":"empty","path":"/x"}"#
        );
    }

    #[test]
    fn rwlock() {
        let r1 = participant("", "/rw/_c_1-__READ__0000000001");
        let r2 = participant("", "/rw/_c_2-__READ__0000000002");
        let w3 = participant("", "/rw/_c_3-__WRIT__0000000003");
        let r4 = participant("", "/rw/_c_4-__READ__0000000004");
        let read = Seen::Queue(vec![r1.clone(), r2.clone(), w3.clone(), r4.clone()]);
        assert_eq!(
            line("/rw", &read, false),
            "/rw: read by _c_1-__READ__0000000001, _c_2-__READ__0000000002; \
             waiting: writer _c_3-__WRIT__0000000003, reader _c_4-__READ__0000000004"
        );
        let parsed: Value = serde_json::from_str(&line("/rw", &read, true)).unwrap();
        assert_eq!(parsed["kind"], "rwlock");
        assert_eq!(parsed["holders"][1]["mode"], "read");
        assert_eq!(parsed["waiters"][0]["mode"], "write");
        assert_eq!(parsed["waiters"].as_array().map(Vec::len), Some(2));

        let written = Seen::Queue(vec![w3, r4]);
        assert_eq!(
            line("/rw", &written, false),
            "/rw: written by _c_3-__WRIT__0000000003; waiting: reader _c_4-__READ__0000000004"
        );
        // kazoo's reader and writer; a queue of kazoo's writers alone is a lock.
        let kazoo = Seen::Queue(vec![
            participant("", "/k/ab__rlock__0000000001"),
            participant("", "/k/cd__lock__0000000002"),
        ]);
        assert_eq!(
            line("/k", &kazoo, false),
            "/k: read by ab__rlock__0000000001; waiting: writer cd__lock__0000000002"
        );
        let kazoo_lock = Seen::Queue(vec![participant("", "/k/cd__lock__0000000002")]);
        assert!(line("/k", &kazoo_lock, true).contains(r#""kind":"lock""#));
    }

    #[test]
    fn semaphore() {
        let lease = |n: u32| participant("", &format!("/s/leases/_c_{n}-lease-000000000{n}"));
        let acquirer = |n: u32| participant("", &format!("/s/locks/_c_{n}-lock-000000000{n}"));
        let seen = |max, leases: &[u32], acquirers: &[u32]| Seen::Semaphore {
            max,
            leases: leases.iter().map(|&n| lease(n)).collect(),
            acquirers: acquirers.iter().map(|&n| acquirer(n)).collect(),
        };
        assert_eq!(
            line("/s", &seen(Some(3), &[1, 2], &[3, 4]), false),
            "/s: 2 of 3 leases: _c_1-lease-0000000001, _c_2-lease-0000000002; \
             waiting: _c_3-lock-0000000003, _c_4-lock-0000000004"
        );
        // The lease beyond the maximum is the first acquirer's, passing in.
        assert_eq!(
            line("/s", &seen(Some(2), &[1, 2, 3], &[3, 4]), false),
            "/s: 2 of 2 leases: _c_1-lease-0000000001, _c_2-lease-0000000002; \
             waiting: _c_3-lease-0000000003, _c_4-lock-0000000004"
        );
        assert_eq!(
            line("/s", &seen(None, &[1], &[]), false),
            "/s: 1 lease: _c_1-lease-0000000001; nobody waiting"
        );
        assert_eq!(
            line("/s", &seen(Some(2), &[], &[]), false),
            "/s: 0 of 2 leases; nobody waiting"
        );
        let parsed: Value =
            serde_json::from_str(&line("/s", &seen(Some(2), &[1, 2, 3], &[3]), true)).unwrap();
        assert_eq!(parsed["kind"], "semaphore");
        assert_eq!(parsed["max"], 2);
        assert_eq!(parsed["leases"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            parsed["waiting"][0]["node"],
            "/s/leases/_c_3-lease-0000000003"
        );
        let parsed: Value = serde_json::from_str(&line("/s", &seen(None, &[], &[]), true)).unwrap();
        assert_eq!(parsed["max"], Value::Null);
    }
}
