//! Metrics (feature `metrics`): what the crate records through the `metrics` facade, read
//! back from a recorder installed by the test — acquisitions by outcome, wait and hold
//! times, losses by reason, removals pending, sessions by state.

use std::collections::HashMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use zk_harness::{bounded, Ensemble, Fixture, PATIENCE};
use zk_recipes::{Loss, Mutex};

/// Session timeout of the recipe sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// What was recorded so far: the debugging recorder hands out what changed since its last
/// snapshot (counters and gauges are reset by each), so the test adds them up.
#[derive(Default)]
struct Recorded {
    values: HashMap<String, f64>,
    samples: HashMap<String, usize>,
}

impl Recorded {
    fn take(&mut self, snapshotter: &Snapshotter) {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let mut labels: Vec<String> = key
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let name = format!("{}{{{}}}", key.key().name(), labels.join(","));
            match value {
                DebugValue::Counter(n) => *self.values.entry(name).or_default() += n as f64,
                DebugValue::Gauge(v) => *self.values.entry(name).or_default() += v.into_inner(),
                DebugValue::Histogram(xs) => *self.samples.entry(name).or_default() += xs.len(),
            }
        }
    }

    fn value(&self, name: &str) -> f64 {
        self.values.get(name).copied().unwrap_or_default()
    }

    fn samples(&self, name: &str) -> usize {
        self.samples.get(name).copied().unwrap_or_default()
    }
}

/// Waits until `name` reads `expected`, taking snapshots as they come.
async fn until_value(
    recorded: &mut Recorded,
    snapshotter: &Snapshotter,
    name: &str,
    expected: f64,
) {
    let what = format!("{name} = {expected}");
    bounded(&what, PATIENCE, async {
        loop {
            recorded.take(snapshotter);
            if recorded.value(name) == expected {
                return;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// One test: the recorder is the process's global one.
#[tokio::test(flavor = "multi_thread")]
async fn acquisitions_holds_losses_removals_and_sessions_are_recorded() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let mut recorded = Recorded::default();

    let fx = Fixture::new(Ensemble::shared(1).await, "metrics", 2, SESSION_TIMEOUT).await;
    recorded.take(&snapshotter);
    assert_eq!(recorded.value("zk_recipes_sessions{state=connected}"), 2.0);

    let a = Mutex::new(&fx.sessions[0], &fx.root).unwrap();
    let b = Mutex::new(&fx.sessions[1], &fx.root).unwrap();
    let guard = a.lock().await.unwrap();
    assert!(b.try_lock().await.unwrap().is_none());
    guard.release().await.unwrap();

    // A loss: the node deleted by someone else.
    let guard = a.lock().await.unwrap();
    fx.observer.delete(guard.node(), None).await.unwrap();
    assert_eq!(guard.lost().await, Loss::NodeDeleted);
    drop(guard);

    let lost = "zk_recipes_losses_total{kind=lock,reason=node_deleted}";
    until_value(&mut recorded, &snapshotter, lost, 1.0).await;
    until_value(
        &mut recorded,
        &snapshotter,
        "zk_recipes_removals_pending{}",
        0.0,
    )
    .await;
    let acquired = "zk_recipes_acquisitions_total{kind=lock,outcome=acquired}";
    assert_eq!(recorded.value(acquired), 2.0);
    let not_acquired = "zk_recipes_acquisitions_total{kind=lock,outcome=not_acquired}";
    assert_eq!(recorded.value(not_acquired), 1.0);
    assert_eq!(
        recorded.samples("zk_recipes_acquire_wait_seconds{kind=lock}"),
        2
    );
    assert_eq!(recorded.samples("zk_recipes_hold_seconds{kind=lock}"), 2);

    // A closed session counts in no state.
    fx.sessions[1].close().await;
    let connected = "zk_recipes_sessions{state=connected}";
    until_value(&mut recorded, &snapshotter, connected, 1.0).await;
    fx.nothing_left().await;
}
