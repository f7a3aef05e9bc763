//! Recording what a [`Session`] publishes, and waiting for it.

use std::time::Duration;

use tokio::sync::watch;
use zk_recipes::{Session, SessionEvent};

/// Every event a session published since [`record_events`] started, oldest first.
pub type EventLog = watch::Receiver<Vec<SessionEvent>>;

/// Records the event `session` shows now, then every event it publishes, as soon as it is
/// published, until the session is closed. (A watch channel folds changes faster than the
/// recorder looks into the last one; the recorder is a task of its own, so it looks often.)
pub fn record_events(session: &Session) -> EventLog {
    let mut events = session.events();
    let (log, seen) = watch::channel(vec![*events.borrow_and_update()]);
    tokio::spawn(async move {
        while events.changed().await.is_ok() {
            let event = *events.borrow_and_update();
            log.send_modify(|all| all.push(event));
            if event == SessionEvent::Closed {
                return;
            }
        }
    });
    seen
}

/// Waits until `log` holds the events `wanted` in this order (others may lie before,
/// between and after them); fails the test, with what was seen, after `within`.
pub async fn await_events(log: &mut EventLog, wanted: &[SessionEvent], within: Duration) {
    let holds = |all: &Vec<SessionEvent>| {
        let mut rest = all.iter();
        wanted.iter().all(|want| rest.any(|e| e == want))
    };
    let seen = tokio::time::timeout(within, log.wait_for(holds))
        .await
        .is_ok_and(|waited| waited.is_ok());
    if !seen {
        panic!(
            "events {wanted:?} not seen in this order within {within:?}; saw {:?}",
            *log.borrow()
        );
    }
}
