//! A queue of contenders (a lock's, a read/write lock's, an election's) or a semaphore's
//! leases and acquirers, in one line: who holds, then who waits (the formats: [`super`]).

use serde_json::{json, Value};
use zk_recipes::{Access, Contender};

use super::{Recipe, Seen};
use crate::output::shown;

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

/// A look told: its kind, every contender in order, and how many of the first hold.
struct Split<'a> {
    kind: &'static Kind,
    contenders: Vec<&'a Contender>,
    held: usize,
}

/// Tells `seen`; `None` if nothing is there.
fn split(seen: &Seen) -> Option<Split<'_>> {
    let (kind, contenders) = match seen {
        Seen::Queue(recipe, contenders) => {
            let first = contenders.first()?;
            let kind = match recipe {
                Recipe::Election => &ELECTION,
                Recipe::Lock => &LOCK,
                Recipe::RwLock if first.access == Access::Write => &WRITE,
                Recipe::RwLock => &READ,
            };
            (kind, contenders)
        }
        Seen::Semaphore { contenders, .. } => (&SEMAPHORE, contenders),
        Seen::Missing
        | Seen::Children(_)
        | Seen::Keyed(_)
        | Seen::Group(_)
        | Seen::Partitioner(_) => return None,
    };
    Some(Split {
        kind,
        held: contenders.iter().take_while(|c| c.holds).count(),
        contenders: contenders.iter().collect(),
    })
}

/// Renders a queue or a semaphore a look at `path` saw (`PATH: empty` if nobody is there).
pub(super) fn line(path: &str, seen: &Seen, json: bool) -> String {
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
        _ => None,
    };
    if json {
        let object = |p: &&Contender| object(p, kind.modes);
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
    let names = |list: &[&Contender], modes: bool| -> String {
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

/// The id, or the node's name if the id is empty or not known (its node cannot be read).
pub(super) fn name(contender: &Contender) -> &str {
    match contender.id.as_deref() {
        None | Some("") => node_name(contender),
        Some(id) => id,
    }
}

/// The last part of the node's path.
fn node_name(contender: &Contender) -> &str {
    contender.node.rsplit('/').next().unwrap_or(&contender.node)
}

/// Whether a read/write lock's contender is a writer.
fn writes(contender: &Contender) -> bool {
    contender.access == Access::Write
}

/// A contender in JSON; with its `mode` in a read/write lock.
pub(super) fn object(contender: &Contender, modes: bool) -> Value {
    let mut object = json!({
        "id": contender.id,
        "node": contender.node,
        "token": contender.token,
        "revocation_requested": contender.revocation_requested,
    });
    if modes {
        object["mode"] = match writes(contender) {
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

    fn contender(id: &str, node: &str, holds: bool, access: Access) -> Contender {
        Contender {
            node: node.into(),
            token: 1,
            holds,
            access,
            id: Some(id.into()),
            revocation_requested: false,
        }
    }

    /// An election's or a lock's contenders: the first holds.
    fn queue(recipe: Recipe, ids_and_nodes: &[(&str, &str)]) -> Seen {
        let contenders = ids_and_nodes
            .iter()
            .enumerate()
            .map(|(i, (id, node))| contender(id, node, i == 0, Access::Exclusive))
            .collect();
        Seen::Queue(recipe, contenders)
    }

    #[test]
    fn election() {
        let a = ("node-a", "/e/_c_1-latch-0000000001");
        let b = ("node-b", "/e/_c_2-latch-0000000002");
        assert_eq!(
            line("/e", &queue(Recipe::Election, &[a]), false),
            "/e: leader node-a; no followers"
        );
        assert_eq!(
            line("/e", &queue(Recipe::Election, &[a, b]), false),
            "/e: leader node-a; followers: node-b"
        );
        let parsed: Value =
            serde_json::from_str(&line("/e", &queue(Recipe::Election, &[a, b]), true)).unwrap();
        assert_eq!(parsed["kind"], "election");
        assert_eq!(parsed["leader"]["id"], "node-a");
        assert_eq!(parsed["leader"]["token"], 1);
        assert_eq!(
            parsed["participants"][1]["node"],
            "/e/_c_2-latch-0000000002"
        );
    }

    #[test]
    fn lock() {
        let a = ("", "/l/_c_1-lock-0000000001");
        let b = ("vm/17", "/l/_c_2-lock-0000000002");
        let c = ("", "/l/_c_3-lock-0000000003");
        assert_eq!(
            line("/l", &queue(Recipe::Lock, &[a, b, c]), false),
            "/l: held by _c_1-lock-0000000001; waiting: vm/17, _c_3-lock-0000000003"
        );
        let parsed: Value =
            serde_json::from_str(&line("/l", &queue(Recipe::Lock, &[a, b]), true)).unwrap();
        assert_eq!(parsed["kind"], "lock");
        assert_eq!(parsed["holder"]["node"], "/l/_c_1-lock-0000000001");
        assert_eq!(parsed["holder"]["revocation_requested"], false);
        assert_eq!(parsed["waiters"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn text_that_could_forge_a_line_or_a_list_is_quoted() {
        let seen = queue(
            Recipe::Election,
            &[
                ("a\n/t/x: leader forged", "/t/_c_1-latch-0000000001"),
                ("b, c; d", "/t/_c_2-latch-0000000002"),
                ("host-1.example/émoji✓", "/t/_c_3-latch-0000000003"),
                ("x\u{202e}y", "/t/_c_4-latch-0000000004"),
            ],
        );
        assert_eq!(
            line("/t", &seen, false),
            r#"/t: leader "a\n/t/x: leader forged"; followers: "b, c; d", host-1.example/émoji✓, "x\u{202e}y""#
        );
        let parsed: Value = serde_json::from_str(&line("/t", &seen, true)).unwrap();
        assert_eq!(parsed["leader"]["id"], "a\n/t/x: leader forged");
    }

    #[test]
    fn empty() {
        let nothing = Seen::Queue(Recipe::Lock, Vec::new());
        assert_eq!(line("/x", &nothing, false), "/x: empty");
        assert_eq!(
            line("/x", &nothing, true),
            r#"{"kind":"empty","path":"/x"}"#
        );
    }

    #[test]
    fn rwlock() {
        let r1 = contender("", "/rw/_c_1-__READ__0000000001", true, Access::Read);
        let r2 = contender("", "/rw/_c_2-__READ__0000000002", true, Access::Read);
        let w3 = contender("", "/rw/_c_3-__WRIT__0000000003", false, Access::Write);
        let r4 = contender("", "/rw/_c_4-__READ__0000000004", false, Access::Read);
        let read = Seen::Queue(Recipe::RwLock, vec![r1, r2, w3.clone(), r4.clone()]);
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

        let written = Seen::Queue(Recipe::RwLock, vec![Contender { holds: true, ..w3 }, r4]);
        assert_eq!(
            line("/rw", &written, false),
            "/rw: written by _c_3-__WRIT__0000000003; waiting: reader _c_4-__READ__0000000004"
        );
    }

    #[test]
    fn semaphore() {
        let lease = |n: u32, holds| {
            let node = format!("/s/leases/_c_{n}-lease-000000000{n}");
            contender("", &node, holds, Access::Lease)
        };
        let acquirer = |n: u32| {
            let node = format!("/s/locks/_c_{n}-lock-000000000{n}");
            contender("", &node, false, Access::Lease)
        };
        let seen = |max, contenders: Vec<Contender>| Seen::Semaphore { max, contenders };
        assert_eq!(
            line(
                "/s",
                &seen(Some(3), vec![lease(1, true), lease(2, true), acquirer(3)]),
                false
            ),
            "/s: 2 of 3 leases: _c_1-lease-0000000001, _c_2-lease-0000000002; \
             waiting: _c_3-lock-0000000003"
        );
        // The lease beyond the maximum is the first acquirer's, passing in.
        let passing = vec![lease(1, true), lease(2, true), lease(3, false), acquirer(4)];
        assert_eq!(
            line("/s", &seen(Some(2), passing.clone()), false),
            "/s: 2 of 2 leases: _c_1-lease-0000000001, _c_2-lease-0000000002; \
             waiting: _c_3-lease-0000000003, _c_4-lock-0000000004"
        );
        assert_eq!(
            line("/s", &seen(None, vec![lease(1, true)]), false),
            "/s: 1 lease: _c_1-lease-0000000001; nobody waiting"
        );
        assert_eq!(
            line("/s", &seen(Some(2), Vec::new()), false),
            "/s: 0 of 2 leases; nobody waiting"
        );
        let parsed: Value =
            serde_json::from_str(&line("/s", &seen(Some(2), passing), true)).unwrap();
        assert_eq!(parsed["kind"], "semaphore");
        assert_eq!(parsed["max"], 2);
        assert_eq!(parsed["leases"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            parsed["waiting"][0]["node"],
            "/s/leases/_c_3-lease-0000000003"
        );
        let parsed: Value =
            serde_json::from_str(&line("/s", &seen(None, Vec::new()), true)).unwrap();
        assert_eq!(parsed["max"], Value::Null);
    }
}
