//! No herd: a waiter watches only the contender it waits on (and its own node and that
//! contender's left-first signal), so a release wakes one waiter, whatever the queue's
//! length. Watch counts are read from the server (`wchc`/`wchp`).
//!
//! * Each mutex waiter watches only its neighbours; a waiting reader only the closest
//!   writer ahead, a waiting writer only the node just ahead.
//! * A semaphore keeps one watch on its lease list, and its waiters watch only their
//!   neighbours at its internal mutex.
//! * Waiters that gave up or were cancelled leave no watch behind.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::task::JoinHandle;
use zk_harness::semaphore::{await_nothing_left, locks};
use zk_harness::{
    await_count, await_empty, bounded, children, live_client, observer, session, settle_watches,
    unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Mutex, RwLock, Semaphore};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a longer one.
const LONG_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn each_mutex_waiter_watches_only_its_neighbours() {
    const WAITERS: usize = 50;
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("herd");
    let holder_session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let sessions = [
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    ];
    let observer = live_client(&holder_session);
    let holder = Mutex::new(&holder_session, &root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let (acquired_tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
    let (release_tx, _) = tokio::sync::broadcast::channel::<usize>(WAITERS);
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let mutex = Mutex::new(&sessions[i % sessions.len()], &root).unwrap();
        let acquired = acquired_tx.clone();
        let mut release = release_tx.subscribe();
        waiters.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            acquired.send((i, guard.node().to_owned())).unwrap();
            while release.recv().await.unwrap() != i {}
            guard.release().await.unwrap();
        }));
        await_count(&observer, &root, i + 2).await;
    }
    // Queue order: holder, then waiters in order of arrival.
    let queue: Vec<String> = children(&observer, &root).await;
    let queue: Vec<String> = queue.iter().map(|n| format!("{root}/{n}")).collect();
    assert_eq!(queue[0], holder.node());

    // Each waiter watches its predecessor, its own node and its predecessor's signal (even
    // the first waiter, whose predecessor held when it entered); the holder its own node.
    settle_watches(&ensemble, &root, &queue, 1).await;
    assert_eq!(
        ensemble.watch_count().await,
        3 * WAITERS + 1,
        "server-wide watch count (wchs): three per waiter, one for the holder"
    );

    // A release wakes exactly the next waiter; nobody else re-registers a watch.
    holder.release().await.unwrap();
    let (first, node) = bounded("the first waiter acquires", PATIENCE, acquired.recv())
        .await
        .unwrap();
    assert_eq!((first, node.as_str()), (0, queue[1].as_str()));
    let total = settle_watches(&ensemble, &root, &queue[1..], 1).await;
    assert_eq!(
        total,
        3 * WAITERS - 2,
        "three watches per remaining waiter, one for the holder"
    );
    assert!(
        acquired.try_recv().is_err(),
        "a second waiter acquired while the first holds"
    );
    for i in 0..WAITERS {
        release_tx.send(i).unwrap();
        if i + 1 < WAITERS {
            let (next, _) = bounded("the next waiter acquires", PATIENCE, acquired.recv())
                .await
                .unwrap();
            assert_eq!(next, i + 1);
        }
    }
    for waiter in waiters {
        waiter.await.unwrap();
    }
    await_empty(&observer, &root).await;
}

/// No herd: a writer watches the node just ahead of it, a reader the closest writer ahead
/// (never a reader), each with its own node and, where that node is a writer's, the
/// writer's left-first signal (readers never signal); each holder its own node.
#[tokio::test(flavor = "multi_thread")]
async fn waiting_readers_and_writers_watch_only_their_blockers() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("rw-herd");
    let holder_session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let sessions = [
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    ];
    let outside = live_client(&holder_session);
    let holder = RwLock::new(&holder_session, &root)
        .unwrap()
        .write()
        .await
        .unwrap();
    // Queue: W0 (holds), R1, R2, W3, R4, R5, W6.
    let kinds = ["read", "read", "write", "read", "read", "write"];
    let (release, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut waiters = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        let lock = RwLock::new(&sessions[i % 2], &root).unwrap();
        let (write, mut release) = (*kind == "write", release.subscribe());
        waiters.push(tokio::spawn(async move {
            if write {
                let guard = lock.write().await.unwrap();
                release.recv().await.unwrap();
                guard.release().await.unwrap();
            } else {
                let guard = lock.read().await.unwrap();
                release.recv().await.unwrap();
                guard.release().await.unwrap();
            }
        }));
        await_count(&outside, &root, i + 2).await;
    }
    let queue: Vec<String> = children(&outside, &root)
        .await
        .iter()
        .map(|n| format!("{root}/{n}"))
        .collect();
    // How many sessions watch each node of the queue (`i`), or its left-first signal (`!i`).
    let expect = |watched: &[(usize, usize)]| {
        let mut expected = BTreeMap::new();
        for &(i, count) in watched {
            let path = if i < queue.len() {
                queue[i].clone()
            } else {
                format!("{}.left-first", queue[!i])
            };
            expected.insert(path, count);
        }
        expected
    };
    // Every waiter watches its own node. R1 and R2 watch W0 and its signal; W3 watches R2;
    // R4 and R5 watch W3 and its signal (R5 on W3's session: one server watch for both);
    // W6 watches R5.
    let before = expect(&[
        (0, 3),
        (1, 1),
        (2, 2),
        (3, 2),
        (4, 1),
        (5, 2),
        (6, 1),
        (!0, 2),
        (!3, 2),
    ]);
    ensemble.await_watched_under(&root, &before).await;
    assert_eq!(ensemble.watch_count().await, 16, "wchs: as listed");

    // The writer goes: both readers hold, on the watches they had; the rest keep theirs.
    holder.release().await.unwrap();
    let after = expect(&[(1, 1), (2, 2), (3, 2), (4, 1), (5, 2), (6, 1), (!3, 2)]);
    ensemble.await_watched_under(&root, &after).await;
    assert_eq!(ensemble.watch_count().await, 11, "wchs: as listed");
    release.send(()).unwrap();
    for waiter in waiters {
        bounded("a waiter finishes", PATIENCE, waiter)
            .await
            .unwrap();
    }
    await_empty(&outside, &root).await;
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

/// Server-side watches after waiters gave up (`try_lock_for` timing out), were cancelled
/// (a dropped `lock()` future), after a middle waiter gave up under a signalled successor,
/// and after hand-offs: once everything is released, no data watch is left on the server
/// (the sessions stay open).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_that_gave_up_leave_no_watch_behind() {
    let ensemble = Ensemble::start(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("handoff-watch-leak");
    let sessions = [
        session(&hosts, LONG_SESSION_TIMEOUT).await,
        session(&hosts, LONG_SESSION_TIMEOUT).await,
        session(&hosts, LONG_SESSION_TIMEOUT).await,
    ];
    let operator = observer(&hosts).await;
    let holder = Mutex::new(&sessions[0], &root)
        .unwrap()
        .lock()
        .await
        .unwrap();

    // A chain: w1 (behind the holder), w2 (behind w1: watches w1's signal), w3 (behind w2).
    let mut chain = Vec::new();
    for i in 0..3 {
        let mutex = Mutex::new(&sessions[1 + i % 2], &root).unwrap();
        chain.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.release().await.unwrap();
        }));
        await_count(&operator, &root, 2 + i).await;
    }
    // Middle givers-up and cancelled waiters behind them.
    for round in 0..3 {
        let mutex = Mutex::new(&sessions[round % 3], &root).unwrap();
        let late = tokio::spawn(async move {
            mutex
                .try_lock_for(Duration::from_millis(400))
                .await
                .unwrap()
                .is_none()
        });
        let mutex = Mutex::new(&sessions[(round + 1) % 3], &root).unwrap();
        let cancelled = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(700), mutex.lock())
                .await
                .is_err()
        });
        assert!(bounded("try_lock_for gives up", PATIENCE, late)
            .await
            .unwrap());
        assert!(bounded("lock() is cancelled", PATIENCE, cancelled)
            .await
            .unwrap());
    }
    await_count(&operator, &root, 4).await;
    holder.release().await.unwrap();
    for w in chain {
        bounded("the chain finishes", PATIENCE, w).await.unwrap();
    }
    await_empty(&operator, &root).await;
    await_no_watch(&ensemble, &root).await;
}

/// The same for a read/write lock: writers behind readers (signals that never come), readers
/// behind writers, some giving up; no watch is left once all are released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rwlock_waiters_that_gave_up_leave_no_watch_behind() {
    let ensemble = Ensemble::start(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("handoff-rw-leak");
    let sessions = [
        session(&hosts, LONG_SESSION_TIMEOUT).await,
        session(&hosts, LONG_SESSION_TIMEOUT).await,
    ];
    let operator = observer(&hosts).await;
    let w0 = RwLock::new(&sessions[0], &root)
        .unwrap()
        .write()
        .await
        .unwrap();
    // R1, R2 behind W0; W3 behind R2 (not first: watches R2's signal, which never comes);
    // R4 behind W3 (signal); W5 gives up behind R4.
    let mut tasks: Vec<JoinHandle<()>> = Vec::new();
    for (i, write) in [false, false, true, false].into_iter().enumerate() {
        let rw = RwLock::new(&sessions[i % 2], &root).unwrap();
        tasks.push(tokio::spawn(async move {
            if write {
                let g = rw.write().await.unwrap();
                tokio::time::sleep(Duration::from_millis(30)).await;
                g.release().await.unwrap();
            } else {
                let g = rw.read().await.unwrap();
                tokio::time::sleep(Duration::from_millis(30)).await;
                g.release().await.unwrap();
            }
        }));
        await_count(&operator, &root, 2 + i).await;
    }
    let rw = RwLock::new(&sessions[1], &root).unwrap();
    assert!(rw
        .try_write_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    w0.release().await.unwrap();
    for t in tasks {
        bounded("the rest finish", PATIENCE, t).await.unwrap();
    }
    await_empty(&operator, &root).await;
    await_no_watch(&ensemble, &root).await;
}

/// Waits until the server keeps no watch under `root` (the server offers no event for
/// watches removed, so this polls), and none at all: the ensemble is the test's own.
async fn await_no_watch(ensemble: &Ensemble, root: &str) {
    ensemble.await_watched_under(root, &BTreeMap::new()).await;
    assert_eq!(ensemble.watch_count().await, 0, "watches left elsewhere");
}
