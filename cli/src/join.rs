//! `zk-recipes join PATH --id ID [--data D] [-- CMD]`: a member of the group on PATH while
//! CMD runs.
//!
//! * **Member.** The node `PATH/ID` (ephemeral, D as its data: Curator's `GroupMember`
//!   layout) is made before CMD starts, kept while CMD runs — made again after a session
//!   expiry — and deleted once CMD has exited; zk-recipes exits with CMD's status.
//! * **Taken.** An ID held by another live session is refused before CMD starts (exit 69,
//!   nothing created). If another session takes the ID while this member's session had
//!   expired, the membership is over: CMD is stopped as `lock` stops it on a loss (exit 79).
//! * **Signals, CMD's group, no CMD.** As `lock` and `elect` ([`held`]): without CMD, the
//!   member's node and id are printed and it stays a member until a signal.

use zk_recipes::{Group, Loss, Membership, Presence, Session};

use crate::args::{Connection, Join, Run};
use crate::held::{self, Held};
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;

impl Held for Membership {
    const WHAT: &'static str = "membership";

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ZK_MEMBER_NODE", self.node().to_owned()),
            ("ZK_MEMBER_ID", self.id().to_owned()),
        ]
    }

    /// Only a taken id, or the end of the session, ends a membership: it outlives expiry.
    async fn lost(&self) -> Loss {
        let mut presences = self.presences();
        let taken = presences
            .wait_for(|presence| *presence == Presence::Taken)
            .await;
        match taken.map(|_| ()) {
            Ok(()) => Loss::NodeDeleted,
            Err(_) => Loss::Closed,
        }
    }
}

impl OnSession for Join {
    fn connection(&self) -> &Connection {
        &self.connection
    }

    fn holding(&self) -> Option<&Run> {
        Some(&self.run)
    }

    async fn run(&self, session: &Session, signals: &mut Signals) -> u8 {
        let group = match Group::new(session, &self.path) {
            Ok(group) => group,
            Err(err) => return status::report(&err),
        };
        let joining = async {
            let data = self.data.as_bytes();
            group.join(&self.id, data).await.map(Some)
        };
        held::acquire_and_run(joining, Membership::leave, &self.run, signals).await
    }
}
