//! What the `Mutex` alone promises: re-entrancy goes through the guard (a second guard on
//! the same hold), missing parents of the lock path are created as containers, and a
//! waiting `lock()` future stays small.
//!
//! The promises every recipe shares are in the files named by them: `exclusion.rs`,
//! `fairness.rs`, `no_herd.rs`, `handoff.rs`, `own_node.rs`, `cancellation.rs`, `loss.rs`,
//! `release.rs`, `bad_input.rs`, `bounded_waits.rs`, `through_faults.rs`.

use std::time::Duration;

use zk_harness::{await_empty, children, live_client, name, session, unique_root, Ensemble};
use zk_recipes::Mutex;

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Re-entrancy is explicit, through the guard: `reenter` shares the hold, and the node goes
/// with the last guard; a second `lock()` through the same value is another contender.
#[tokio::test(flavor = "multi_thread")]
async fn reentrancy_goes_through_the_guard() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("reentrant");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = live_client(&s);
    let mutex = Mutex::new(&s, &root).unwrap();
    let outer = mutex.lock().await.unwrap();
    let inner = outer.reenter();
    assert_eq!(inner.node(), outer.node());
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert!(mutex.try_lock().await.unwrap().is_none());
    assert!(mutex
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    inner.release().await.unwrap();
    assert_eq!(children(&observer, &root).await, [name(outer.node())]);
    outer.release().await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_parents_are_created_as_containers() {
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/a/b/lock", unique_root("parents"));
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let admin = live_client(&s);
    let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    let (_, stat) = admin.get_data(&root).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0);
    guard.release().await.unwrap();
    await_empty(&admin, &root).await;
}

/// A waiting `lock()` is stored by the task that awaits it, for as long as it waits: with
/// thousands of waiters its size is their memory. It holds the whole waiting state (the
/// ticket, the watch on its blocker): 688 bytes since the hold-core redesign (632 before
/// it: the wait now selects on the session's close at its top, where each of its requests
/// did before, and the acquisition keeps a record of itself for the metrics: 656; 688 once
/// the branches of the same change were merged, none of which touches this path — not
/// traced further; 624 in the bench's build, 648 once a waiter's hearing of its watches
/// was no longer boxed: it keeps only references, where its box took 520 bytes of heap). A
/// regression past the bound fails here, not only in the benchmark.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_lock_future_stays_small() {
    const BOUND: usize = 696;
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&s, &unique_root("size")).unwrap();
    let size = std::mem::size_of_val(&mutex.lock());
    eprintln!("lock() future: {size} bytes");
    assert!(size <= BOUND, "lock() future is {size} bytes, over {BOUND}");
}
