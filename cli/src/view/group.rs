//! A group's members in one line, for `members` and for `status --kind group`: text `ID=DATA
//! ID` (an id or data that could forge a line or a pair quoted with escapes, see
//! [`shown`]; a member whose node this session may not read shows its id alone), JSON
//! `{"id", "data"}` per member (`data`: `null` if it cannot be read). Data is shown as
//! UTF-8, invalid bytes replaced.

use serde_json::{json, Value};
use zk_recipes::Member;

use crate::output::shown;

/// `members: ID=DATA ...` (`members: -` for none).
pub fn members_text(members: &[Member]) -> String {
    if members.is_empty() {
        return "members: -".into();
    }
    let entries: Vec<String> = members
        .iter()
        .map(|member| match data(member) {
            Some(data) => format!("{}={}", shown(&member.id), shown(&data)),
            None => shown(&member.id).into_owned(),
        })
        .collect();
    format!("members: {}", entries.join(" "))
}

/// The members as a JSON list of `{"id", "data"}`.
pub fn members_json(members: &[Member]) -> Value {
    let listed = members.iter();
    listed
        .map(|member| json!({"id": member.id, "data": data(member)}))
        .collect()
}

/// `PATH: members: ID=DATA ...`; in JSON `{"path", "kind": "group", "members"}`.
pub(super) fn line(path: &str, members: &[Member], json: bool) -> String {
    match json {
        true => {
            let members = members_json(members);
            json!({"path": path, "kind": "group", "members": members}).to_string()
        }
        false => format!("{}: {}", shown(path), members_text(members)),
    }
}

/// A member's data as text, if it could be read.
fn data(member: &Member) -> Option<String> {
    let data = member.data.as_deref()?;
    Some(String::from_utf8_lossy(data).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, data: &[u8]) -> Member {
        Member {
            id: id.into(),
            data: Some(data.into()),
            created: 1,
        }
    }

    #[test]
    fn members_in_text_and_json() {
        let members = [member("a", b"10.0.0.1"), member("b", b"")];
        assert_eq!(members_text(&members), r#"members: a=10.0.0.1 b="""#);
        let forged = [member("web 1", b"1.2.3.4\nmembers: x=9\x1b[2J\0")];
        assert_eq!(
            members_text(&forged),
            r#"members: "web 1"="1.2.3.4\nmembers: x=9\u{1b}[2J\0""#
        );
        let listed = members_json(&forged);
        assert_eq!(listed[0]["id"], "web 1");
        assert_eq!(listed[0]["data"], "1.2.3.4\nmembers: x=9\x1b[2J\0");
        let unreadable = Member {
            data: None,
            ..member("c", b"")
        };
        let members = [member("a", b"10.0.0.1"), unreadable];
        assert_eq!(members_text(&members), "members: a=10.0.0.1 c");
        assert_eq!(members_text(&[]), "members: -");
        let listed = members_json(&members);
        assert_eq!(listed[0]["data"], "10.0.0.1");
        assert_eq!(listed[1]["data"], Value::Null);
        assert_eq!(listed.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn a_group_s_line_names_its_path() {
        let members = [member("replica-1", b"10.0.0.7:8080")];
        assert_eq!(
            line("/g", &members, false),
            "/g: members: replica-1=10.0.0.7:8080"
        );
        assert_eq!(line("/g", &[], false), "/g: members: -");
        let parsed: Value = serde_json::from_str(&line("/g", &members, true)).unwrap();
        assert_eq!(parsed["kind"], "group");
        assert_eq!(parsed["path"], "/g");
        assert_eq!(parsed["members"][0]["data"], "10.0.0.7:8080");
    }
}
