//! The ZooKeeper session of one zk-recipes run: made from the command line in one place,
//! and closed so that nothing of ours outlives the process.
//!
//! Closing waits (briefly) until the servers have ended the session: its ephemeral nodes
//! are gone when zk-recipes exits, rather than when the session times out.

use std::time::Duration;

use tracing::{debug, info_span, Instrument};
use zk_recipes::{CloseReason, NodeAcl, Session, SessionBuilder};

use crate::args::{Connection, Run};
use crate::say::say;
use crate::security;
use crate::signals::Signals;
use crate::status;

/// How long closing waits for the servers to confirm.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The session's settings as the command line says: `connection`, `tolerate_suspension`
/// (see [`zk_recipes::SessionBuilder::tolerate_suspension`]) and the ACL of the nodes made.
///
/// Every setting of the session is made here, authentication and TLS included.
///
/// # Errors
/// A one-line message if a file of the security options cannot be used (exit 64).
pub fn settings(
    connection: &Connection,
    tolerate_suspension: bool,
    node_acl: NodeAcl,
) -> Result<SessionBuilder, String> {
    security::check_acl(&connection.security, node_acl)?;
    let builder = Session::builder()
        .session_timeout(connection.session_timeout)
        .connection_timeout(connection.connect_timeout)
        .tolerate_suspension(tolerate_suspension)
        .node_acl(node_acl);
    security::apply(&connection.security, builder)
}

/// A command that works on a ZooKeeper session.
pub trait OnSession {
    /// How to reach ZooKeeper.
    fn connection(&self) -> &Connection;

    /// The options of a command that holds something while CMD runs (`lock`, `elect`):
    /// whether to tolerate suspension, and the ACL of the nodes it creates. `None` (the
    /// observers): no tolerance, open ACLs.
    fn holding(&self) -> Option<&Run> {
        None
    }

    /// Runs the command on `session`; returns zk-recipes' exit status. What it made on the
    /// session must be released or dropped when it returns.
    async fn run(&self, session: &Session, signals: &mut Signals) -> u8;
}

/// Connects (see [`settings`]) unless a signal comes first, runs `command`, and closes the
/// session; returns zk-recipes' exit status.
pub async fn run(command: &impl OnSession, signals: &mut Signals) -> u8 {
    let connection = command.connection();
    let holding = command.holding();
    let builder = settings(
        connection,
        holding.is_some_and(|run| run.tolerate_suspension),
        holding.map_or(NodeAcl::Open, |run| security::node_acl(run.node_acl)),
    );
    let builder = match builder {
        Ok(builder) => builder,
        Err(message) => {
            say!("{message}");
            return status::USAGE;
        }
    };
    let connecting = builder.connect(&connection.hosts);
    let session = match signals.or(connecting).await {
        Err(signal) => return status::of_signal(signal),
        Ok(Err(err)) => return status::report(&err),
        Ok(Ok(session)) => session,
    };
    let status = command.run(&session, signals).await;
    // The session ended because a new one after expiry was refused for good: say why.
    if let Some(CloseReason::Refused(err)) = session.close_reason() {
        status::report(&err);
    }
    close(session).await;
    status
}

/// Closes `session` and waits, at most [`CLOSE_WAIT`], until the servers have ended it.
/// Everything made on it (guards, candidates) must be gone or released before.
pub async fn close(session: Session) {
    let closing = session.close();
    drop(session);
    let waited = tokio::time::timeout(CLOSE_WAIT, closing)
        .instrument(info_span!("zk.close"))
        .await;
    if waited.is_err() {
        debug!("session not confirmed closed; the servers will expire it");
    }
}
