//! `zk-recipes join PATH --id ID [--data D] [-- CMD]`: a member of the group on PATH while
//! CMD runs.
//!
//! * **Member.** The node `PATH/ID` (ephemeral, D as its data: Curator's `GroupMember`
//!   layout) is made before CMD starts, kept while CMD runs — made again after a session
//!   expiry — and deleted once CMD has exited; zk-recipes exits with CMD's status. CMD gets
//!   `ZK_MEMBER_NODE` and `ZK_MEMBER_ZXID` (the zxid that created the node).
//! * **Taken.** An ID held by another live session is refused before CMD starts (exit 69,
//!   nothing created); with `--wait D`, once its node is still there after D
//!   ([`Group::join_within`]: a restart waits for its previous session's node to go). If another session takes the ID while this member's session had
//!   expired, the membership is over: CMD is stopped as `lock` stops it on a loss (exit 79),
//!   and the taker's node is never written or deleted. A membership is no
//!   [`Hold`](zk_recipes::Hold): it runs CMD as a [`held::Member`].
//! * **Signals, CMD's group, no CMD.** As `lock` and `elect` ([`held`]): without CMD, the
//!   member's node and zxid are printed and it stays a member until a signal.

use zk_recipes::{Group, Session};

use crate::args::{Connection, Join, Run};
use crate::held;
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;

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
            let joined = match self.wait {
                Some(wait) => group.join_within(&self.id, data, wait).await,
                None => group.join(&self.id, data).await,
            };
            joined.map(|membership| Some(held::Member(membership)))
        };
        held::acquire_and_run(joining, held::MEMBERSHIP, &self.run, signals).await
    }
}
