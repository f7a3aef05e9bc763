//! Shutting down: a process that drops its `run()` future, awaits `Session::close()` and
//! returns from `main` leaves nothing behind. Its leader node is gone when the close
//! returns, not a session timeout later, and the next candidate leads at once.
//!
//! The leader's process is a thread with a runtime of its own, dropped as `main`'s would
//! be when the close returns.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use zk_harness::{await_empty, bounded, observer, session, unique_root, Ensemble, PATIENCE};
use zk_recipes::LeaderElection;
use zookeeper_client::Client;

/// The leader's session timeout: far longer than the test lets the node stay.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the leader's node may stay after the close returned.
const PROMPTLY: Duration = Duration::from_secs(3);

/// A process that leads on `root` in `run()`, tells its node, then drops the `run()`
/// future, closes its session and returns (its runtime dropped); tells how long the close
/// took.
fn leader_process(
    hosts: String,
    root: String,
    leading: oneshot::Sender<String>,
) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        // As `#[tokio::main(flavor = "current_thread")]`: nothing runs once `main` is done.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let s = session(&hosts, SESSION_TIMEOUT).await;
            let election = LeaderElection::new(&s, &root, "leader").unwrap();
            let (led, node) = oneshot::channel();
            let mut led = Some(led);
            let run = election.run(|leadership| {
                let led = led.take();
                async move {
                    if let Some(led) = led {
                        let _ = led.send(leadership.node().to_owned());
                    }
                    std::future::pending::<()>().await
                }
            });
            tokio::select! {
                ended = run => panic!("run() ended: {ended:?}"),
                node = node => leading.send(node.unwrap()).unwrap(),
            }
            let closing = Instant::now();
            s.close().await;
            closing.elapsed()
        })
    })
}

/// Resolves once `node` is gone.
async fn deleted(client: &Client, node: &str) {
    loop {
        match client.check_and_watch_stat(node).await.unwrap() {
            (None, _) => return,
            (Some(_), watch) => {
                watch.changed().await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_leaders_node_is_gone_when_close_returns() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("close-after-run");
    let admin = observer(&hosts).await;
    let next = session(&hosts, SESSION_TIMEOUT).await;

    let (leading, node) = oneshot::channel();
    let leader = leader_process(hosts.clone(), root.clone(), leading);
    let node = bounded("the leader leads", PATIENCE, node).await.unwrap();
    let follower = LeaderElection::new(&next, &root, "next").unwrap();
    let candidate = follower.join().await.unwrap();

    let closed = tokio::task::spawn_blocking(move || leader.join().unwrap());
    let took = bounded("the leader's process returns", PATIENCE, closed)
        .await
        .unwrap();
    let returned = Instant::now();
    bounded(
        "the leader's node is gone",
        PROMPTLY,
        deleted(&admin, &node),
    )
    .await;
    let leadership = bounded("the next candidate leads", PROMPTLY, candidate.leadership())
        .await
        .unwrap();
    assert!(
        returned.elapsed() < PROMPTLY && took < SESSION_TIMEOUT,
        "close took {took:?}; the node went {:?} after it returned",
        returned.elapsed()
    );
    drop(leadership);
    candidate.resign().await.unwrap();
    await_empty(&admin, &root).await;
    next.close().await;
}

/// A close whose request cannot reach the servers (the connection is cut) still returns,
/// once they have certainly expired the session (1.5 session timeouts), and the node is
/// gone then; a second close returns at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_close_on_a_cut_connection_returns_once_the_session_is_gone() {
    const SHORT: Duration = Duration::from_secs(2);
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("close-cut");
    let admin = observer(&ensemble.connect_string()).await;
    let s = session(&proxy.address(), SHORT).await;
    let guard = zk_recipes::Mutex::new(&s, &root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let node = guard.node().to_owned();
    proxy.cut();
    let closing = Instant::now();
    bounded("the close returns", PATIENCE, s.close().into_future()).await;
    let took = closing.elapsed();
    assert!(took <= SHORT * 3 / 2 + PROMPTLY, "close took {took:?}");
    bounded("the node is gone", PROMPTLY, deleted(&admin, &node)).await;
    drop(guard);
    bounded("a second close", PROMPTLY, s.close().into_future()).await;
    await_empty(&admin, &root).await;
}
