//! No wait is longer than the caller asked: while no server can be reached, `try_lock` and
//! the observers answer at once, and `close()` ends every wait on its session.
//!
//! * Nothing waits while no server is reachable.
//! * `try_lock()` never waits behind acquisitions entering on a cut connection.
//! * `close()` stops what runs on the session: acquisitions entering on a cut connection
//!   fail with `Error::Closed`, as does a waiter whose request is in flight.

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zk_harness::{
    await_count, await_empty, await_watch, bounded, join_election, observer, session, session_id,
    tolerant_session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, LeaderElection, Loss, Mutex, Role, Session, SessionEvent};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Promptness required where the bug takes seconds or forever: generous on a loaded machine.
const PROMPT: Duration = Duration::from_secs(1);

/// How long a test lets a slow operation run to report what it finally did.
const MEASURE: Duration = Duration::from_secs(10);

/// With no server reachable, `try_lock()` and `participants()` fail with
/// `Disconnected` (nothing was sent) within a second; a tolerant session's `release()` while cut off for
/// good waits, at most until the session would have expired, and returns `Ok` with the
/// node gone with its session (never `ConnectionLoss`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_waits_while_no_server_is_reachable() {
    let ensemble = Ensemble::start(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("unreachable");
    let s = session(&hosts, Duration::from_secs(4)).await;
    let mutex = Mutex::new(&s, &root).unwrap();
    let election = LeaderElection::new(&s, &root, "observer").unwrap();
    let mut events = s.events();
    ensemble.stop(0);
    await_watch("the session is suspended", &mut events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;

    let started = Instant::now();
    let tried = tokio::time::timeout(MEASURE, mutex.try_lock()).await;
    let took = started.elapsed();
    assert!(
        matches!(tried, Ok(Err(Error::Disconnected))) && took <= PROMPT,
        "try_lock() with no server: {:?} after {took:?}; \
         required Err(Disconnected) within {PROMPT:?}",
        tried.map(|tried| tried.map(|taken| taken.map(|guard| guard.node().to_owned())))
    );
    let started = Instant::now();
    let listed = tokio::time::timeout(MEASURE, election.participants()).await;
    let took = started.elapsed();
    assert!(
        matches!(listed, Ok(Err(Error::Disconnected))) && took <= PROMPT,
        "participants() with no server: {listed:?} after {took:?}; \
         required Err(Disconnected) within {PROMPT:?}"
    );

    // A session that tolerates suspension, cut off for less than its timeout.
    ensemble.restart(0).await;
    let observer = observer(&hosts).await;
    let proxy = ensemble.proxy(0).await;
    const TOLERANT_TIMEOUT: Duration = Duration::from_secs(6);
    let tolerant = tolerant_session(&proxy.address(), TOLERANT_TIMEOUT).await;
    let mut events = tolerant.events();
    let guard = Mutex::new(&tolerant, &root).unwrap().lock().await.unwrap();
    proxy.cut();
    await_watch("the tolerant session is suspended", &mut events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;
    let started = Instant::now();
    let within = TOLERANT_TIMEOUT * 3 / 2 + PROMPT;
    let released = tokio::time::timeout(within, guard.release()).await;
    let took = started.elapsed();
    assert!(
        matches!(released, Ok(Ok(()))),
        "release() while cut off: {released:?} after {took:?}; required Ok within {within:?}"
    );
    await_empty(&observer, &root).await;
    proxy.restore();
}

/// How long acquisitions started on a cut connection get to take the session's entry
/// turns (16) before the test goes on: nothing outside the session shows that they did.
const SETTLE: Duration = Duration::from_millis(300);

/// A session whose connection is cut (it is suspended), with `n` `lock()`s started on it
/// after the cut, each in its task, given [`SETTLE`] to take their entry turns.
struct CutWithWaiters {
    ensemble: Ensemble,
    proxy: zk_harness::Proxy,
    root: String,
    session: Session,
    mutex: Mutex,
    waiters: Vec<JoinHandle<zk_recipes::Result<String>>>,
}

async fn cut_with_waiters(name_: &str, n: usize) -> CutWithWaiters {
    let ensemble = Ensemble::start(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root(name_);
    let session = session(&proxy.address(), Duration::from_secs(8)).await;
    let mutex = Mutex::new(&session, &root).unwrap();
    let mut events = session.events();
    proxy.cut();
    await_watch("the session is suspended", &mut events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;
    let waiters = (0..n)
        .map(|_| {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.lock().await.map(|guard| guard.node().to_owned()) })
        })
        .collect();
    tokio::time::sleep(SETTLE).await;
    CutWithWaiters {
        ensemble,
        proxy,
        root,
        session,
        mutex,
        waiters,
    }
}

/// Sixteen `lock()`s started while the connection is down take every entry turn of the
/// session, and their creates wait in the client for the connection. `try_lock()` must
/// still answer at once with `Disconnected`, not wait for a turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn try_lock_never_waits_behind_entries_while_disconnected() {
    let cut = cut_with_waiters("behind-entries", 16).await;
    let started = Instant::now();
    let tried = tokio::time::timeout(MEASURE, cut.mutex.try_lock()).await;
    let took = started.elapsed();
    assert!(
        matches!(tried, Ok(Err(Error::Disconnected))) && took <= PROMPT,
        "try_lock() behind 16 entries on a cut connection: {:?} after {took:?}; \
         required Err(Disconnected) within {PROMPT:?}",
        tried.map(|tried| tried.map(|taken| taken.map(|guard| guard.node().to_owned())))
    );
    cut.session.close();
    cut.proxy.restore();
    for waiter in cut.waiters {
        let _ = bounded("a waiter ends after close()", PATIENCE, waiter).await;
    }
    await_empty(&observer(&cut.ensemble.connect_string()).await, &cut.root).await;
}

/// `Session::close()` stops what runs on the session, within a second: a
/// waiting `lock()` returns `Err(Closed)`, a held guard is lost with `Loss::Closed`, a
/// leader steps down and its leadership is lost with `Loss::Closed`; the ZooKeeper session
/// is closed, so its nodes go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_the_session_stops_what_runs_on_it() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let lock_root = unique_root("close-lock");
    let election_root = unique_root("close-election");
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let observer = observer(&hosts).await;
    let guard = Mutex::new(&s, &lock_root).unwrap().lock().await.unwrap();
    let waiter = {
        let mutex = Mutex::new(&s, &lock_root).unwrap();
        tokio::spawn(async move { mutex.lock().await })
    };
    await_count(&observer, &lock_root, 2).await;
    let candidate = join_election(&s, &election_root, "leader").await;
    let leadership = bounded("the candidate leads", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    let mut roles = candidate.roles();

    s.close();
    let deadline = tokio::time::Instant::now() + PROMPT;
    match tokio::time::timeout_at(deadline, waiter).await {
        Ok(Ok(Err(Error::Closed))) => {}
        Ok(Ok(Ok(acquired))) => panic!(
            "the waiting lock() acquired after close(), is_lost() == {}",
            acquired.is_lost()
        ),
        Ok(other) => panic!("the waiting lock() after close(): {other:?}"),
        Err(_) => panic!("the waiting lock() did not return within {PROMPT:?} of close()"),
    }
    let loss = tokio::time::timeout_at(deadline, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("guard.lost() did not resolve within {PROMPT:?} of close()"));
    assert_eq!(loss, Loss::Closed);
    assert!(guard.is_lost());
    tokio::time::timeout_at(deadline, roles.wait_for(|role| *role == Role::Follower))
        .await
        .unwrap_or_else(|_| panic!("the leader still leads {PROMPT:?} after close()"))
        .unwrap();
    let loss = tokio::time::timeout_at(deadline, leadership.lost())
        .await
        .unwrap_or_else(|_| panic!("leadership.lost() did not resolve within {PROMPT:?}"));
    assert_eq!(loss, Loss::Closed);

    bounded("the closed session's nodes go", 2 * PROMPT, async {
        await_empty(&observer, &lock_root).await;
        await_empty(&observer, &election_root).await;
    })
    .await;
}

/// `lock()`s entering on a cut connection when the session is closed fail with
/// `Error::Closed` within a second, and never return a guard once the connection is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn close_fails_acquisitions_entering_on_a_cut_connection() {
    let cut = cut_with_waiters("close-entering", 4).await;
    cut.session.close();
    let closed = Instant::now();
    let mut outcomes = Vec::new();
    for waiter in cut.waiters {
        let left = PROMPT.saturating_sub(closed.elapsed());
        outcomes.push(match tokio::time::timeout(left, waiter).await {
            Ok(joined) => format!("{:?}", joined.expect("waiter task")),
            Err(_) => "still waiting".to_owned(),
        });
    }
    cut.proxy.restore();
    assert!(
        outcomes.iter().all(|o| o == "Err(Closed)"),
        "lock()s entering when the session was closed, {PROMPT:?} later: {outcomes:?}"
    );
    await_empty(&observer(&cut.ensemble.connect_string()).await, &cut.root).await;
}

/// `close()` ends at once a waiter whose hand-off request is in flight on a connection
/// that answers nothing (its proxy holds back what it sends): the waiting `lock()` fails
/// with `Closed` within a second, and the node goes with the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn close_ends_a_waiter_whose_request_is_in_flight() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("close-in-flight");
    let observer = observer(&ensemble.connect_string()).await;
    let holding = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let proxy = ensemble.proxy(0).await;
    let waiting = session(&proxy.address(), Duration::from_secs(4)).await;
    let guard = Mutex::new(&holding, &root).unwrap().lock().await.unwrap();
    let waiter = tokio::spawn({
        let mutex = Mutex::new(&waiting, &root).unwrap();
        async move { mutex.lock().await.map(|guard| guard.node().to_owned()) }
    });
    await_count(&observer, &root, 2).await;
    ensemble
        .await_watcher(guard.node(), &session_id(&waiting))
        .await;
    // The waiter hears the holder's node deleted by someone (no left-first signal), and
    // asks the servers: its request never reaches them.
    proxy.mute();
    observer.delete(guard.node(), None).await.unwrap();
    drop(guard); // its node is gone already
                 // Nothing outside the client shows that it sent its request: give it the time.
    tokio::time::sleep(SETTLE).await;
    let closed_at = Instant::now();
    waiting.close();
    let ended = bounded("the waiter ends", PROMPT, waiter).await.unwrap();
    assert!(matches!(ended, Err(Error::Closed)), "lock(): {ended:?}");
    assert!(closed_at.elapsed() <= PROMPT);
    proxy.restore();
    await_empty(&observer, &root).await;
}
