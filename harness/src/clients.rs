//! Connecting to the servers: recipe sessions, and plain clients that look from outside.

use std::time::Duration;

use zk_recipes::{Session, SessionBuilder};
use zookeeper_client::Client;

/// Session timeout of an [`observer`]: long, so that it rides out the faults a test causes.
pub const OBSERVER_TIMEOUT: Duration = Duration::from_secs(30);

/// A recipe [`Session`] on `hosts` with the given session timeout (the builder's other
/// settings at their defaults); fails the test if it cannot connect.
pub async fn session(hosts: &str, timeout: Duration) -> Session {
    connect(Session::builder().session_timeout(timeout), hosts).await
}

/// Like [`session`], but with `tolerate_suspension(true)`: a cut connection leaves its
/// locks and leaderships trusted for a while (a third of the session timeout), not lost at
/// once.
pub async fn tolerant_session(hosts: &str, timeout: Duration) -> Session {
    let builder = Session::builder()
        .session_timeout(timeout)
        .tolerate_suspension(true);
    connect(builder, hosts).await
}

/// Like [`session`], authenticated by digest as `user` (its nodes made with
/// `NodeAcl::CreatorOnly` are then that user's alone).
pub async fn digest_session(hosts: &str, timeout: Duration, user: &str, password: &str) -> Session {
    let builder = Session::builder()
        .session_timeout(timeout)
        .digest_auth(user, password);
    connect(builder, hosts).await
}

async fn connect(builder: SessionBuilder, hosts: &str) -> Session {
    builder
        .connect(hosts)
        .await
        .unwrap_or_else(|err| panic!("connect a session to {hosts}: {err}"))
}

/// A plain `zookeeper-client` [`Client`] on `hosts` with the given session timeout; fails
/// the test if it cannot connect.
pub async fn plain_client(hosts: &str, timeout: Duration) -> Client {
    Client::connector()
        .with_session_timeout(timeout)
        .connect(hosts)
        .await
        .unwrap_or_else(|err| panic!("connect a client to {hosts}: {err}"))
}

/// A plain client that looks at the servers from outside (an observer, an operator, a
/// reaper), on its own session of [`OBSERVER_TIMEOUT`].
pub async fn observer(hosts: &str) -> Client {
    plain_client(hosts, OBSERVER_TIMEOUT).await
}

/// Like [`observer`], authenticated by digest as `user` (an operator of a service whose
/// nodes are `CreatorOnly`, or someone else).
pub async fn digest_observer(hosts: &str, user: &str, password: &str) -> Client {
    Client::connector()
        .with_session_timeout(OBSERVER_TIMEOUT)
        .with_auth("digest", format!("{user}:{password}").as_bytes())
        .connect(hosts)
        .await
        .unwrap_or_else(|err| panic!("connect a digest client to {hosts}: {err}"))
}

/// The client of `session`'s live ZooKeeper session; fails the test if it has none (while
/// a new session is being made, or once closed).
pub fn live_client(session: &Session) -> Client {
    session.client().expect("a live session")
}

/// The ZooKeeper session id of `session`'s live session, as the servers' `wchp` prints it.
pub fn session_id(session: &Session) -> String {
    live_client(session).session_id().to_string()
}
