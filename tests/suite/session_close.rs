//! Shutting down: a process that drops its `run()` future, awaits `Session::close()` and
//! returns from `main` leaves nothing behind. Its leader node is gone when the close
//! returns, not a session timeout later, and the next candidate leads at once.
//!
//! The leader's process is a thread with a runtime of its own, dropped as `main`'s would
//! be when the close returns.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use zk_harness::semaphore::await_nothing_left;
use zk_harness::{
    await_empty, bounded, observer, session, session_id, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, Group, LeaderElection, Mutex, Semaphore};
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

/// A join that waits for a cut connection (the session still alive on the servers) ends
/// with `Error::Closed` at the close, as a lock's wait does; not once the connection is
/// back, nor never while it stays down.
#[tokio::test(flavor = "multi_thread")]
async fn a_close_ends_a_join_waiting_for_a_cut_connection() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("close-join");
    let admin = observer(&ensemble.connect_string()).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let group = Group::new(&s, &root).unwrap();
    proxy.cut();
    let joining = tokio::spawn(async move { group.join("a", b"data").await.map(drop) });
    // It waits for the connection: nothing it could do before the close.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(s.close());
    let joined = bounded("the join ends", PROMPTLY, joining).await.unwrap();
    assert!(matches!(joined, Err(Error::Closed)), "{joined:?}");
    proxy.restore();
    await_empty(&admin, &root).await;
}

/// A semaphore acquisition past its gate whose read of the leases is cut off (the
/// connection dropped with the request in flight, then cut) ends at the close, with
/// `Error::Closed`, if it had not been granted already.
#[tokio::test(flavor = "multi_thread")]
async fn a_close_ends_an_acquisition_whose_read_was_cut_off() {
    /// ZooKeeper's opcode of a data read.
    const GET_DATA: i32 = 4;
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("close-lease-read");
    let admin = observer(&ensemble.connect_string()).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let semaphore = Semaphore::new(&s, &root, 2).unwrap();
    drop(semaphore.acquire().await.unwrap());
    proxy.drop_requests(GET_DATA, 1);
    let acquiring = tokio::spawn(async move { semaphore.acquire().await.map(drop) });
    let sent = async {
        while proxy.dropped() == 0 {
            tokio::task::yield_now().await;
        }
    };
    bounded("the leases are read", PATIENCE, sent).await;
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(s.close());
    let acquired = bounded("the acquisition ends", PROMPTLY, acquiring)
        .await
        .unwrap();
    // Granted before the cut if the client was back in time to read again.
    assert!(
        matches!(acquired, Ok(()) | Err(Error::Closed)),
        "{acquired:?}"
    );
    proxy.restore();
    await_nothing_left(&admin, &root).await;
}

/// A lock's waiter whose watch on the holder is set, its connection then cut (the session
/// still alive on the servers), fails with `Error::Closed` at the close; not once its
/// client gave up reconnecting.
#[tokio::test(flavor = "multi_thread")]
async fn a_close_ends_a_wait_watching_its_blocker_on_a_cut_connection() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("close-watching");
    let admin = observer(&ensemble.connect_string()).await;
    let holder = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&s, &root).unwrap();
    let waiting = tokio::spawn(async move { mutex.lock().await.map(drop) });
    ensemble.await_watcher(guard.node(), &session_id(&s)).await;
    proxy.cut();
    drop(s.close());
    let waited = bounded("the wait ends", PROMPTLY, waiting).await.unwrap();
    assert!(matches!(waited, Err(Error::Closed)), "{waited:?}");
    proxy.restore();
    drop(guard);
    await_empty(&admin, &root).await;
    holder.close().await;
}
