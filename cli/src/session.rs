//! The ZooKeeper session of one zk-recipes run: made from the command line in one place,
//! and closed so that nothing of ours outlives the process.
//!
//! Closing waits (briefly) until the servers have ended the session: its ephemeral nodes
//! are gone when zk-recipes exits, rather than when the session times out.

use std::time::Duration;

use tracing::{debug, info_span, Instrument};
use zk_recipes::Session;

use crate::args::Connection;
use crate::signals::Signals;
use crate::status;

/// How long closing waits for the servers to confirm.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Connects as the command line says. `tolerate_suspension`: see
/// [`zk_recipes::SessionBuilder::tolerate_suspension`].
///
/// Every setting of the session is made here (authentication and TLS go here too).
pub async fn connect(
    connection: &Connection,
    tolerate_suspension: bool,
) -> zk_recipes::Result<Session> {
    Session::builder()
        .session_timeout(connection.session_timeout)
        .connection_timeout(connection.connect_timeout)
        .tolerate_suspension(tolerate_suspension)
        .connect(&connection.hosts)
        .await
}

/// A command that works on a ZooKeeper session.
pub trait OnSession {
    /// How to reach ZooKeeper.
    fn connection(&self) -> &Connection;

    /// See [`zk_recipes::SessionBuilder::tolerate_suspension`].
    fn tolerate_suspension(&self) -> bool {
        false
    }

    /// Runs the command on `session`; returns zk-recipes' exit status. What it made on the
    /// session must be released or dropped when it returns.
    async fn run(&self, session: &Session, signals: &mut Signals) -> u8;
}

/// Connects (see [`connect`]) unless a signal comes first, runs `command`, and closes the
/// session; returns zk-recipes' exit status.
pub async fn run(command: &impl OnSession, signals: &mut Signals) -> u8 {
    let connecting = connect(command.connection(), command.tolerate_suspension());
    let session = match signals.or(connecting).await {
        Err(signal) => return status::of_signal(signal),
        Ok(Err(err)) => return status::report(&err),
        Ok(Ok(session)) => session,
    };
    let status = command.run(&session, signals).await;
    close(session).await;
    status
}

/// Closes `session` and waits, at most [`CLOSE_WAIT`], until the servers have ended it.
/// Everything made on it (guards, candidates) must be gone or released before.
pub async fn close(session: Session) {
    let states = session.client().map(|client| client.state_watcher());
    session.close();
    drop(session);
    let Some(mut states) = states else {
        return;
    };
    let closed = async {
        let mut state = states.state();
        while !state.is_terminated() {
            state = states.changed().await;
        }
        state
    };
    match tokio::time::timeout(CLOSE_WAIT, closed)
        .instrument(info_span!("zk.close"))
        .await
    {
        Ok(state) => debug!(?state, "session ended"),
        Err(_) => debug!("session not confirmed closed; the servers will expire it"),
    }
}
