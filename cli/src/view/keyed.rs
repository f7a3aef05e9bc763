//! The keys of a `KeyedMutex` root in one line, each with its lock's holder and how many
//! wait, or free (the formats: [`super`]).

use serde_json::{json, Value};
use zk_recipes::Contender;

use super::queue::{name, object};
use crate::output::shown;

/// A key of a `KeyedMutex` root and the contenders of its lock, first first (the first
/// holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// The key: the name of its lock's path under the root.
    pub name: String,
    /// Its lock's contenders, as `Mutex::contenders` lists them.
    pub contenders: Vec<Contender>,
}

impl Key {
    /// Its holder, if it is held.
    pub(super) fn holder(&self) -> Option<&Contender> {
        self.contenders.first().filter(|first| first.holds)
    }

    /// Those that wait for it.
    fn waiters(&self) -> &[Contender] {
        let held = usize::from(self.holder().is_some());
        &self.contenders[held..]
    }
}

/// `PATH: KEY held by NAME (N waiting), KEY free`, or `PATH: no keys`; in JSON, `{"path",
/// "kind": "keyed", "keys": [{"key", "holder", "waiters"}]}`.
pub(super) fn line(path: &str, keys: &[Key], json: bool) -> String {
    if json {
        let keys: Vec<Value> = keys.iter().map(key_object).collect();
        return json!({"path": path, "kind": "keyed", "keys": keys}).to_string();
    }
    if keys.is_empty() {
        return format!("{}: no keys", shown(path));
    }
    let keys: Vec<String> = keys.iter().map(key_text).collect();
    format!("{}: {}", shown(path), keys.join(", "))
}

/// `KEY held by NAME`, with ` (N waiting)` if any wait; `KEY free`.
pub(super) fn key_text(key: &Key) -> String {
    let waiting = match key.waiters().len() {
        0 => String::new(),
        n => format!(" ({n} waiting)"),
    };
    match key.holder() {
        Some(holder) => format!(
            "{} held by {}{waiting}",
            shown(&key.name),
            shown(name(holder))
        ),
        None => format!("{} free{waiting}", shown(&key.name)),
    }
}

pub(super) fn key_object(key: &Key) -> Value {
    let object = |contender: &Contender| object(contender, false);
    json!({
        "key": key.name,
        "holder": key.holder().map(object),
        "waiters": key.waiters().iter().map(object).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use zk_recipes::Access;

    use super::*;

    fn key(name: &str, ids: &[&str]) -> Key {
        let contenders = ids
            .iter()
            .enumerate()
            .map(|(i, id)| Contender {
                node: format!("/jobs/{name}/_c_{i}-lock-000000000{i}"),
                token: 10 + i as u64,
                holds: i == 0,
                access: Access::Exclusive,
                id: Some((*id).into()),
                revocation_requested: false,
            })
            .collect();
        Key {
            name: name.into(),
            contenders,
        }
    }

    #[test]
    fn keys_with_their_holders_or_free() {
        let keys = [
            key("job-1", &["vm/17", "vm/18", "vm/19"]),
            key("job-2", &[]),
            key("order-1234567890", &["worker 7"]),
        ];
        assert_eq!(
            line("/jobs", &keys, false),
            r#"/jobs: job-1 held by vm/17 (2 waiting), job-2 free, order-1234567890 held by "worker 7""#
        );
        assert_eq!(line("/jobs", &[], false), "/jobs: no keys");
        let parsed: Value = serde_json::from_str(&line("/jobs", &keys, true)).unwrap();
        assert_eq!(parsed["kind"], "keyed");
        assert_eq!(parsed["keys"][0]["key"], "job-1");
        assert_eq!(parsed["keys"][0]["holder"]["id"], "vm/17");
        assert_eq!(parsed["keys"][0]["holder"]["token"], 10);
        assert_eq!(parsed["keys"][0]["waiters"][1]["id"], "vm/19");
        assert_eq!(parsed["keys"][1]["holder"], Value::Null);
        assert_eq!(
            parsed["keys"][1]["waiters"].as_array().map(Vec::len),
            Some(0)
        );
    }

    #[test]
    fn a_key_that_could_forge_a_list_is_quoted() {
        let keys = [key("a, b free", &[]), key("c", &["x, d held by y"])];
        assert_eq!(
            line("/k", &keys, false),
            r#"/k: "a, b free" free, c held by "x, d held by y""#
        );
    }
}
