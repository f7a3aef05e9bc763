//! The counting semaphore against real ZooKeeper servers started by the harness.
//!
//! Every test ends with nothing left under its path: no lease under `<path>/leases`, no
//! node of the internal mutex under `<path>/locks`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zk_harness::nemesis::{under_nemesis, Arena, Entrant, Rule, Tally, Waits};
use zk_harness::{
    await_count, await_empty, bounded, children, expire_session, live_client, name, observer,
    session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, Loss, Semaphore, Session};
use zookeeper_client::Client;

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

fn leases(path: &str) -> String {
    format!("{path}/leases")
}

fn locks(path: &str) -> String {
    format!("{path}/locks")
}

/// Waits until neither leases nor the internal mutex's nodes are left under `path`.
async fn await_nothing_left(outside: &Client, path: &str) {
    await_empty(outside, &leases(path)).await;
    await_empty(outside, &locks(path)).await;
}

/// 12 acquirers over 4 sessions, `rounds` leases each, on a semaphore of 3: never more than 3
/// holders at once, and 3 at some moment.
async fn at_most_max(ensemble: &Ensemble, rounds: usize) {
    const SESSIONS: usize = 4;
    const PER_SESSION: usize = 3;
    const MAX: u32 = 3;
    let path = unique_root("sem-max");
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut sessions = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..SESSIONS {
        let session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
        for _ in 0..PER_SESSION {
            let semaphore = Semaphore::new(&session, &path, MAX).unwrap();
            let (inside, most) = (inside.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..rounds {
                    let lease = semaphore.acquire().await.expect("acquire");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= MAX as usize, "{now} leases held at once");
                    // Longer than an acquisition takes, so that the semaphore fills up.
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    assert!(!lease.is_lost(), "lease lost without a fault");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lease.release().await.expect("release");
                }
            }));
        }
        sessions.push(session);
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(240), task)
            .await
            .expect("acquirers finished")
            .expect("acquirer panicked");
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        MAX as usize,
        "the semaphore never filled up"
    );
    await_nothing_left(&live_client(&sessions[0]), &path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_max_leases_on_standalone() {
    at_most_max(Ensemble::shared(1).await, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_max_leases_on_ensemble() {
    at_most_max(Ensemble::shared(3).await, 5).await;
}

/// A full semaphore: `held` leases on one session, the same semaphore on another.
struct Full {
    path: String,
    sessions: (Session, Session),
    outside: Client,
    held: Vec<zk_recipes::Lease>,
    other: Semaphore,
}

async fn full(name: &str, max: u32) -> Full {
    let ensemble = Ensemble::shared(1).await;
    let path = unique_root(name);
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let semaphore = Semaphore::new(&a, &path, max).unwrap();
    let mut held = Vec::new();
    for _ in 0..max {
        held.push(semaphore.acquire().await.unwrap());
    }
    Full {
        outside: live_client(&a),
        other: Semaphore::new(&b, &path, max).unwrap(),
        held,
        path,
        sessions: (a, b),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn try_and_timeout_leave_no_lease_and_no_mutex_node() {
    let Full {
        path,
        sessions: _sessions,
        outside,
        mut held,
        other,
    } = full("sem-try", 2).await;
    let tried = bounded("try_acquire()", PATIENCE, other.try_acquire()).await;
    assert!(tried.unwrap().is_none());
    assert_eq!(children(&outside, &leases(&path)).await.len(), 2);
    assert!(children(&outside, &locks(&path)).await.is_empty());

    let started = Instant::now();
    let timed = other.try_acquire_for(Duration::from_millis(300)).await;
    assert!(timed.unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(children(&outside, &leases(&path)).await.len(), 2);
    assert!(children(&outside, &locks(&path)).await.is_empty());

    // A free lease is taken by both forms.
    held.pop().unwrap().release().await.unwrap();
    let lease = other.try_acquire().await.unwrap().expect("a free lease");
    lease.release().await.unwrap();
    let lease = other
        .try_acquire_for(PATIENCE)
        .await
        .unwrap()
        .expect("free");
    lease.release().await.unwrap();
    for lease in held {
        lease.release().await.unwrap();
    }
    await_nothing_left(&outside, &path).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelled_acquisitions_leave_no_lease_and_no_mutex_node() {
    let Full {
        path,
        sessions: _sessions,
        outside,
        held,
        other,
    } = full("sem-cancel", 1).await;
    let other = Arc::new(other);

    // Dropped at every stage: entering the mutex, holding it, creating the lease, waiting
    // on the lease list.
    for micros in (0..6000).step_by(300) {
        let attempt = tokio::time::timeout(Duration::from_micros(micros), other.acquire()).await;
        assert!(attempt.is_err(), "acquired a lease of a full semaphore");
    }
    // Dropped by select! while one waits on the lease list and another at the mutex.
    let (cancel, cancelled) = tokio::sync::watch::channel(false);
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let (other, mut cancelled) = (other.clone(), cancelled.clone());
        waiters.push(tokio::spawn(async move {
            tokio::select! {
                _ = other.acquire() => panic!("acquired a lease of a full semaphore"),
                _ = cancelled.wait_for(|&c| c) => {}
            }
        }));
    }
    await_count(&outside, &leases(&path), 2).await;
    await_count(&outside, &locks(&path), 2).await;
    cancel.send_replace(true);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    await_empty(&outside, &locks(&path)).await;
    await_count(&outside, &leases(&path), 1).await;
    for lease in held {
        lease.release().await.unwrap();
    }
    await_nothing_left(&outside, &path).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_holders_lease_is_freed() {
    let ensemble = Ensemble::shared(1).await;
    let path = unique_root("sem-expiry");
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let outside = live_client(&b);
    let lease = Semaphore::new(&a, &path, 1)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let next = Semaphore::new(&b, &path, 1).unwrap();
    let waiter = tokio::spawn(async move { next.acquire().await });
    await_count(&outside, &leases(&path), 2).await;

    expire_session(&ensemble.connect_string(), live_client(&a).session()).await;
    let loss = bounded("the lease's loss", PATIENCE, lease.lost()).await;
    assert!(
        matches!(loss, Loss::SessionExpired | Loss::Suspended),
        "{loss:?}"
    );
    let next = bounded("the waiter got the freed lease", PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(next.fencing_token() > lease.fencing_token());
    match lease.release().await {
        Err(Error::Lost { .. }) => {}
        other => panic!("release after expiry: {other:?}"),
    }
    assert!(!next.is_lost(), "the late release harmed the next holder");
    next.release().await.unwrap();
    await_nothing_left(&outside, &path).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_when_the_lease_node_is_deleted() {
    let ensemble = Ensemble::shared(1).await;
    let path = unique_root("sem-deleted");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let lease = Semaphore::new(&s, &path, 2)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let admin = observer(&ensemble.connect_string()).await;
    admin.delete(lease.node(), None).await.unwrap();
    let loss = bounded("the lease's loss", PATIENCE, lease.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    match lease.release().await {
        Err(Error::Lost { .. }) => {}
        other => panic!("release of a lost lease: {other:?}"),
    }
    await_nothing_left(&admin, &path).await;
}

/// Participants that disagree about the maximum: the one that comes second fails with
/// `MaxLeasesConflict` and leaves nothing; once every lease is returned, the other maximum
/// may take over.
#[tokio::test(flavor = "multi_thread")]
async fn a_different_maximum_is_refused_while_leases_are_held() {
    let ensemble = Ensemble::shared(1).await;
    let path = unique_root("sem-conflict");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let outside = live_client(&s);
    let three = Semaphore::new(&s, &path, 3).unwrap();
    let five = Semaphore::new(&s, &path, 5).unwrap();
    let lease = three.acquire().await.unwrap();
    let (data, _) = outside.get_data(&leases(&path)).await.unwrap();
    assert_eq!(data, b"zk-recipes max leases 3");
    for attempt in [
        five.acquire().await.map(Some),
        five.try_acquire().await,
        five.try_acquire_for(PATIENCE).await,
    ] {
        match attempt {
            Err(Error::MaxLeasesConflict {
                ours: 5,
                recorded: 3,
                path: p,
            }) => assert_eq!(p, path),
            other => panic!("a second maximum: {other:?}"),
        }
        assert_eq!(
            children(&outside, &leases(&path)).await,
            [name(lease.node())]
        );
        assert!(children(&outside, &locks(&path)).await.is_empty());
    }
    lease.release().await.unwrap();
    // A stale record with no lease held: the newcomer records its own.
    let lease = five.acquire().await.unwrap();
    let (data, _) = outside.get_data(&leases(&path)).await.unwrap();
    assert_eq!(data, b"zk-recipes max leases 5");
    assert!(matches!(
        three.try_acquire().await,
        Err(Error::MaxLeasesConflict {
            ours: 3,
            recorded: 5,
            ..
        })
    ));
    lease.release().await.unwrap();
    await_nothing_left(&outside, &path).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_and_sends_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    match Semaphore::new(&s, &unique_root("sem-zero"), 0) {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("a maximum of 0: {other:?}"),
    }
    for path in ["", "sem", "/sem/", "/a//b", "/zookeeper/sem"] {
        match Semaphore::new(&s, path, 3) {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }
}

/// Waiters queue at the internal mutex, each watching its predecessor there (with its own
/// node and the predecessor's left-first signal); only the one inside (which
/// also watches its own mutex node, as every holder does after 10 ms) watches the lease list.
#[tokio::test(flavor = "multi_thread")]
async fn one_watch_on_the_lease_list_and_waiters_only_on_their_neighbours() {
    const WAITERS: usize = 5;
    let ensemble = Ensemble::start(1).await;
    let path = unique_root("sem-herd");
    let holder_session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let outside = live_client(&holder_session);
    let lease = Semaphore::new(&holder_session, &path, 1)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let sessions = [
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    ];
    let (acquired_tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let semaphore = Semaphore::new(&sessions[i % 2], &path, 1).unwrap();
        let acquired = acquired_tx.clone();
        waiters.push(tokio::spawn(async move {
            let lease = semaphore.acquire().await.unwrap();
            acquired.send(i).unwrap();
            lease.release().await.unwrap();
        }));
        await_count(&outside, &locks(&path), i + 1).await;
    }
    let gate = children(&outside, &locks(&path)).await;
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    expected.insert(lease.node().to_owned(), 1);
    expected.insert(format!("{}/{}", locks(&path), gate[0]), 1);
    for (i, waiter) in gate.iter().enumerate().skip(1) {
        let predecessor = format!("{}/{}", locks(&path), gate[i - 1]);
        *expected
            .entry(format!("{}/{waiter}", locks(&path)))
            .or_default() += 1;
        expected.insert(format!("{predecessor}.left-first"), 1);
        *expected.entry(predecessor).or_default() += 1;
    }
    ensemble.await_watched_under(&path, &expected).await;
    ensemble.await_child_watch_count(1).await;
    lease.release().await.unwrap();
    let mut order = Vec::new();
    for _ in 0..WAITERS {
        let next = bounded("the next lease", PATIENCE, acquired.recv()).await;
        order.push(next.unwrap());
    }
    assert_eq!(
        order,
        (0..WAITERS).collect::<Vec<_>>(),
        "leases in arrival order"
    );
    for waiter in waiters {
        waiter.await.unwrap();
    }
    ensemble.await_watched_under(&path, &BTreeMap::new()).await;
    ensemble.await_child_watch_count(0).await;
    await_nothing_left(&outside, &path).await;
}

/// The maximum of the semaphore under the nemesis.
const NEMESIS_MAX: u32 = 2;

/// Acquires a lease, works, returns it, `rounds` times or until `stop`.
fn lease_loop(entrant: Entrant<'_>) -> JoinHandle<Tally> {
    let semaphore = Semaphore::new(entrant.session, entrant.root, NEMESIS_MAX).unwrap();
    entrant.run(move || {
        let semaphore = semaphore.clone();
        async move { semaphore.acquire().await }
    })
}

/// Interference: 12 acquirers on 4 sessions, 15 leases each, of a semaphore of 2, while the
/// nemesis deletes waiters' nodes (at the internal mutex, and the lease of the one waiting
/// on the count) and writes into any node: never more than 2 trusted leases at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_max_leases_under_a_nemesis() {
    let arenas = [
        Arena {
            child: "locks",
            waits: Waits::BehindAny,
        },
        Arena {
            child: "leases",
            waits: Waits::Crowd(NEMESIS_MAX as usize),
        },
    ];
    let rule = Rule::AtMost(NEMESIS_MAX as usize);
    under_nemesis("nemesis-sem", lease_loop, 3, 15, &arenas, rule).await;
}

/// "At most no time" still tries once, as `flock -w 0` does: a free semaphore is taken
/// every time with a zero or a 1 ms timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_too_short_to_wait_still_tries_once() {
    let ensemble = Ensemble::shared(1).await;
    let path = unique_root("sem-zero");
    let session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let semaphore = Semaphore::new(&session, &path, 3).unwrap();
    for timeout in [Duration::ZERO, Duration::from_millis(1)] {
        for round in 0..40 {
            let lease = semaphore.try_acquire_for(timeout).await.unwrap();
            let lease = lease.unwrap_or_else(|| panic!("{timeout:?}, round {round}: not taken"));
            lease.release().await.unwrap();
        }
    }
    await_nothing_left(&live_client(&session), &path).await;
}
