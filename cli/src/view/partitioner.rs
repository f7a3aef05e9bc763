//! A partitioner's path in one line: its members with how many partitions each holds, then
//! each partition with its holder (a member id) and how many wait, or free (the formats:
//! [`super`]).

use serde_json::{json, Value};
use zk_recipes::{Contender, PartitionOwner, PartitionerStatus};

use super::group::members_json;
use super::keyed::{key_object, key_text, Key};
use crate::output::shown;

/// `PATH: members: ID (N held) ...; PARTITION held by ID (N waiting), PARTITION free`; in
/// JSON `{"path", "kind": "partitioner", "members": [{"id", "data", "held"}], "partitions":
/// [{"key", "holder", "waiters"}]}`.
pub(super) fn line(path: &str, status: &PartitionerStatus, json: bool) -> String {
    let keys: Vec<Key> = status.partitions.iter().map(key).collect();
    let held = |id: &str| {
        (keys.iter())
            .filter(|key| key.holder().and_then(|h| h.id.as_deref()) == Some(id))
            .count()
    };
    if json {
        let mut members = members_json(&status.members);
        if let Value::Array(members) = &mut members {
            for member in members {
                let id = member["id"].as_str().unwrap_or_default().to_owned();
                member["held"] = json!(held(&id));
            }
        }
        let partitions: Vec<Value> = keys.iter().map(key_object).collect();
        let line = json!({"path": path, "kind": "partitioner", "members": members,
                          "partitions": partitions});
        return line.to_string();
    }
    let members: Vec<String> = (status.members.iter())
        .map(|m| format!("{} ({} held)", shown(&m.id), held(&m.id)))
        .collect();
    let members = match members.is_empty() {
        true => "-".to_owned(),
        false => members.join(", "),
    };
    let partitions: Vec<String> = keys.iter().map(key_text).collect();
    let partitions = match partitions.is_empty() {
        true => "no partitions held".to_owned(),
        false => partitions.join(", "),
    };
    format!("{}: members: {members}; {partitions}", shown(path))
}

/// A partition as a key: its lock's contenders, the holder first.
fn key(owner: &PartitionOwner) -> Key {
    let contenders: Vec<Contender> = (owner.holder.iter().cloned())
        .chain(owner.waiting.iter().cloned())
        .collect();
    Key {
        name: owner.partition.clone(),
        contenders,
    }
}
