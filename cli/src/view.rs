//! What `observe` and `status` print about a path: one line per look.
//!
//! The path's contenders, in queue order, are an election's when their nodes are named
//! `…-latch-<seq>` (`LeaderElection`, Curator's `LeaderLatch`), else a lock's. For a lock
//! the first holds and the rest wait; in an election the first leads.
//!
//! * Text: `PATH: leader ID; followers: ID, ID`, `PATH: held by NAME; waiting: NAME`, or
//!   `PATH: empty`. A contender is named by its id (its node's data) or, without one (a
//!   `zk-recipes lock`), by its node's name.
//! * `--json`: `{"path", "kind": "election", "leader", "participants"}` (participants
//!   include the leader), `{"path", "kind": "lock", "holder", "waiters"}`, or
//!   `{"path", "kind": "empty"}`; each contender is `{"id", "node"}` (`node`: full path).

use serde_json::{json, Value};
use zk_recipes::Participant;

/// How one kind of queue is told.
struct Kind {
    /// The JSON `kind`.
    kind: &'static str,
    /// The first's role in text, and its JSON key.
    first: &'static str,
    first_key: &'static str,
    /// The others' role in text, the text when there are none, and the JSON key of the
    /// list.
    rest: &'static str,
    no_rest: &'static str,
    list_key: &'static str,
    /// Whether the JSON list holds the first too.
    list_has_first: bool,
}

const ELECTION: Kind = Kind {
    kind: "election",
    first: "leader",
    first_key: "leader",
    rest: "followers",
    no_rest: "no followers",
    list_key: "participants",
    list_has_first: true,
};

const LOCK: Kind = Kind {
    kind: "lock",
    first: "held by",
    first_key: "holder",
    rest: "waiting",
    no_rest: "nobody waiting",
    list_key: "waiters",
    list_has_first: false,
};

/// Renders what `participants` (in queue order) say about `path`.
pub fn line(path: &str, participants: &[Participant], json: bool) -> String {
    let Some((first, rest)) = participants.split_first() else {
        return match json {
            true => json!({"path": path, "kind": "empty"}).to_string(),
            false => format!("{path}: empty"),
        };
    };
    let election = participants.iter().any(|p| p.node.contains("-latch-"));
    let kind = if election { ELECTION } else { LOCK };
    if json {
        let listed = if kind.list_has_first {
            participants
        } else {
            rest
        };
        let mut line = json!({"path": path, "kind": kind.kind});
        line[kind.first_key] = object(first);
        line[kind.list_key] = listed.iter().map(object).collect();
        return line.to_string();
    }
    let rest = match rest.is_empty() {
        true => kind.no_rest.to_owned(),
        false => {
            let names: Vec<&str> = rest.iter().map(name).collect();
            format!("{}: {}", kind.rest, names.join(", "))
        }
    };
    format!("{path}: {} {}; {rest}", kind.first, name(first))
}

/// The id, or the node's name if the id is empty.
fn name(participant: &Participant) -> &str {
    match participant.id.as_str() {
        "" => participant
            .node
            .rsplit('/')
            .next()
            .unwrap_or(&participant.node),
        id => id,
    }
}

fn object(participant: &Participant) -> Value {
    json!({"id": participant.id, "node": participant.node})
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
            line("/e", std::slice::from_ref(&a), false),
            "/e: leader node-a; no followers"
        );
        assert_eq!(
            line("/e", &[a.clone(), b.clone()], false),
            "/e: leader node-a; followers: node-b"
        );
        let parsed: Value = serde_json::from_str(&line("/e", &[a, b], true)).unwrap();
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
            line("/l", &[a.clone(), b.clone(), c], false),
            "/l: held by _c_1-lock-0000000001; waiting: _c_2-lock-0000000002, _c_3-lock-0000000003"
        );
        let parsed: Value = serde_json::from_str(&line("/l", &[a, b], true)).unwrap();
        assert_eq!(parsed["kind"], "lock");
        assert_eq!(parsed["holder"]["node"], "/l/_c_1-lock-0000000001");
        assert_eq!(parsed["waiters"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn empty() {
        assert_eq!(line("/x", &[], false), "/x: empty");
        assert_eq!(line("/x", &[], true), r#"{"kind":"empty","path":"/x"}"#);
    }
}
