//! How a replica or candidate of the examples says what it does: one line on stdout,
//! `<ms since the epoch> [<id>] <what>` (tests/suite/master_follower.rs reads these lines).

use std::time::{SystemTime, UNIX_EPOCH};

/// Prints `what`, done by `id`, with the time.
pub fn say(id: &str, what: &str) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    println!("{now} [{id}] {what}");
}
