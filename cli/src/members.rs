//! `zk-recipes members PATH`: the members of the group on PATH (Curator's `GroupMember`
//! layout: one node `PATH/<id>` per member, its data as payload), once or, with `--watch`,
//! now and on every change.
//!
//! * Once: one line and exit 0 (69 if ZooKeeper cannot be read).
//! * `--watch`: a line now and one on every change (a member joins or leaves, its data is
//!   set, its node is replaced by another of the same id), from one children watch on PATH
//!   and one data watch per member (no polling), until SIGINT, SIGTERM, SIGHUP or SIGQUIT or until stdout is closed (exit 0);
//!   69 if the session ends for good. While the connection is down the last line stands;
//!   what changed meanwhile is printed once it is back.
//! * Text: `members: ID=DATA ...` (`members: -` for none), an id or data that could forge a
//!   line or a pair quoted with escapes (`"web 1"="1.2.3.4\nmembers: x=9"`, `b=""`: see
//!   [`shown`]); `--json`: one object per line, `{"path": PATH, "members": [{"id":
//!   ID, "data": DATA}, ...]}`. Data is shown as UTF-8, with invalid bytes replaced. A
//!   member whose node this session may not read (its ACL) is shown without data: `ID`
//!   alone in text, `"data": null` in JSON.
//!
//! Nothing is joined: watching leaves no node.

use serde_json::json;
use zk_recipes::{Error, Group, Member, Session};

use crate::args::{Connection, Members};
use crate::output::{self, shown};
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;

impl OnSession for Members {
    fn connection(&self) -> &Connection {
        &self.connection
    }

    async fn run(&self, session: &Session, signals: &mut Signals) -> u8 {
        let group = match Group::new(session, &self.path) {
            Ok(group) => group,
            Err(err) => return status::report(&err),
        };
        let outcome = match self.watch {
            true => {
                signals
                    .or(output::until_closed(follow(&group, self.json)))
                    .await
            }
            false => signals.or(once(&group, self.json)).await,
        };
        match outcome {
            Err(signal) if !self.watch => status::of_signal(signal),
            Err(_) | Ok(Ok(())) => 0,
            Ok(Err(err)) => status::report(&err),
        }
    }
}

/// Prints the members once (a closed stdout is no failure).
async fn once(group: &Group, json: bool) -> Result<(), Error> {
    let members = group.members().await?;
    output::print(&line(group.path(), &members, json));
    Ok(())
}

/// Prints the members now and on every change; returns when stdout is closed.
async fn follow(group: &Group, json: bool) -> Result<(), Error> {
    let mut view = group.watch_members().await?;
    loop {
        let shown = line(group.path(), &view.borrow_and_update(), json);
        if !output::print(&shown) {
            return Ok(());
        }
        if view.changed().await.is_err() {
            return Err(Error::Closed);
        }
    }
}

/// The line for `members` of the group on `path`.
fn line(path: &str, members: &[Member], json: bool) -> String {
    let data = |member: &Member| {
        (member.data.as_deref()).map(|data| String::from_utf8_lossy(data).into_owned())
    };
    if json {
        let members: Vec<_> = members
            .iter()
            .map(|member| json!({"id": member.id, "data": data(member)}))
            .collect();
        return json!({"path": path, "members": members}).to_string();
    }
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
    fn lines_in_text_and_json() {
        let members = [member("a", b"10.0.0.1"), member("b", b"")];
        assert_eq!(line("/g", &members, false), r#"members: a=10.0.0.1 b="""#);
        let forged = [member("web 1", b"1.2.3.4\nmembers: x=9\x1b[2J\0")];
        assert_eq!(
            line("/g", &forged, false),
            r#"members: "web 1"="1.2.3.4\nmembers: x=9\u{1b}[2J\0""#
        );
        let parsed: serde_json::Value = serde_json::from_str(&line("/g", &forged, true)).unwrap();
        assert_eq!(parsed["members"][0]["id"], "web 1");
        assert_eq!(
            parsed["members"][0]["data"],
            "1.2.3.4\nmembers: x=9\x1b[2J\0"
        );
        let unreadable = Member {
            data: None,
            ..member("c", b"")
        };
        let members = [member("a", b"10.0.0.1"), unreadable];
        assert_eq!(line("/g", &members, false), "members: a=10.0.0.1 c");
        assert_eq!(line("/g", &[], false), "members: -");
        let parsed: serde_json::Value = serde_json::from_str(&line("/g", &members, true)).unwrap();
        assert_eq!(parsed["path"], "/g");
        assert_eq!(parsed["members"][0]["id"], "a");
        assert_eq!(parsed["members"][0]["data"], "10.0.0.1");
        assert_eq!(parsed["members"][1]["data"], serde_json::Value::Null);
        assert_eq!(parsed["members"].as_array().unwrap().len(), 2);
    }
}
