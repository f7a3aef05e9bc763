//! The watches a queue of exclusive contenders should hold on the servers, awaited.

use std::collections::BTreeMap;

use crate::ensemble::Ensemble;

/// Waits until the server's watches under `root` are exactly: the holder (`queue[0]`) on its
/// own node; every waiter on its predecessor and on its own node; and every waiter from
/// `queue[signalled]` on also on its predecessor's left-first signal (one whose predecessor
/// was first when it entered needs none). Returns their number. Watches are set in the
/// background after a hand-off and the server offers no event for them, so this polls.
pub async fn settle_watches(
    ensemble: &Ensemble,
    root: &str,
    queue: &[String],
    signalled: usize,
) -> usize {
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for (i, node) in queue.iter().enumerate() {
        *expected.entry(node.clone()).or_default() += 1;
        if let Some(predecessor) = i.checked_sub(1).map(|p| &queue[p]) {
            *expected.entry(predecessor.clone()).or_default() += 1;
            if i >= signalled {
                expected.insert(format!("{predecessor}.left-first"), 1);
            }
        }
    }
    ensemble.await_watched_under(root, &expected).await;
    expected.values().sum()
}
