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
//!   [`shown`](crate::output::shown)); `--json`: one object per line, `{"path": PATH, "members": [{"id":
//!   ID, "data": DATA}, ...]}`. Data is shown as UTF-8, with invalid bytes replaced. A
//!   member whose node this session may not read (its ACL) is shown without data: `ID`
//!   alone in text, `"data": null` in JSON.
//!
//! Nothing is joined: watching leaves no node.

use serde_json::json;
use zk_recipes::{Error, Group, Member, Session};

use crate::args::{Connection, Members};
use crate::output;
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;
use crate::view;

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

/// The line for `members` of the group on `path` (see [`view`]).
fn line(path: &str, members: &[Member], json: bool) -> String {
    match json {
        true => json!({"path": path, "members": view::members_json(members)}).to_string(),
        false => view::members_text(members),
    }
}
