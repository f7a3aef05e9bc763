//! [`expire_session`]: the expiry of a live session, forced from outside.

use std::time::{Duration, Instant};

use super::four_letter::four_letter_at;
use crate::wait::PATIENCE;

/// Forces expiry of a live session: a second client takes the session over with
/// its id and password, then closes it, until a take-over attempt is answered
/// "session expired" by the server; then waits until no server lists the session
/// among its connections any more.
///
/// ZooKeeper 3.8 drops the older connection of a session when another one takes
/// it over, so the owner reconnects and may take it back before the second
/// client's handshake finished: take-over attempts fail fast and are repeated.
pub async fn expire_session(connect_string: &str, session: &zookeeper_client::SessionInfo) {
    use zookeeper_client::{Client, Error, SessionState};

    let id = session.id();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let twin = Client::connector()
            .with_session(session.clone())
            .with_session_timeout(Duration::from_secs(2))
            .with_fail_eagerly()
            .connect(connect_string)
            .await;
        match twin {
            Ok(twin) => {
                let mut state = twin.state_watcher();
                drop(twin); // the last handle: the client sends CloseSession
                let closed = async {
                    loop {
                        match state.changed().await {
                            SessionState::Closed | SessionState::Expired => break,
                            _ => continue,
                        }
                    }
                };
                if tokio::time::timeout(Duration::from_secs(10), closed)
                    .await
                    .is_err()
                {
                    panic!("closing session {id} was not acknowledged within 10 s");
                }
                // The victim may have taken the session back before the close reached the
                // server (each takeover kicks the other connection): try again until the
                // server itself answers that the session is gone.
            }
            Err(Error::SessionExpired) => break, // already gone
            Err(e) if Instant::now() >= deadline => {
                panic!("cannot take over session {id} to expire it: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    // No server should list the session among its connections any more.
    let needle = format!("sid={id}");
    let deadline = Instant::now() + Duration::from_secs(5);
    'poll: while Instant::now() < deadline {
        for address in connect_string.split(',') {
            if four_letter_at(address.trim(), "cons")
                .await
                .contains(&needle)
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue 'poll;
            }
        }
        break;
    }
}
