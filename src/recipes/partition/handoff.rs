//! Letting go when the successor waits: a hold whose partition moved away is asked to let go
//! once another contender waits in the partition's lock queue, so that the release hands the
//! lock over in one notification (as a mutex hands off) instead of leaving the partition
//! unowned while the next owner's view of the group catches up and it enters the queue.

use std::time::Duration;

use tracing::debug;

use crate::queue::is_contender_name;
use crate::session::Session;

/// How long a hold whose partition moved away goes on before it is asked to let go while no
/// successor waits (the next owner's view trails, or it died, or it never comes): a few
/// round trips under load, far below any session timeout.
pub(crate) const SUCCESSOR_WAIT: Duration = Duration::from_secs(1);

/// Resolves once a contender other than our node `ours` waits in the lock queue `lock`,
/// after [`SUCCESSOR_WAIT`], or at once if the connection is down or the queue cannot be
/// listed. One children watch on `lock` while it waits, removed when it ends.
///
/// # Cancel safety
/// Cancel safe: a dropped wait removes its watch.
pub(crate) async fn successor_waits(session: Session, lock: String, ours: String) {
    let waiting = async {
        loop {
            let Ok(client) = session.connected() else {
                return;
            };
            let Ok((children, watcher)) = client.list_and_watch_children(&lock).await else {
                return;
            };
            drop(client);
            if (children.iter()).any(|child| *child != ours && is_contender_name(child)) {
                return;
            }
            watcher.changed().await;
        }
    };
    if tokio::time::timeout(SUCCESSOR_WAIT, waiting).await.is_err() {
        debug!(%lock, "no successor waits; letting go all the same");
    }
}
