//! Fairness: first come, first served.
//!
//! * Mutex waiters acquire in the order they arrived, and one that leaves mid-queue keeps
//!   the others' order.
//! * A reader that arrives behind a waiting writer waits for it (a stream of readers never
//!   starves a writer), and the readers right behind a writer enter together when it goes.
//! * Leadership passes in queue order, one leader at a time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_harness::{
    await_count, await_empty, await_one_leader, bounded, join_election, leaders, live_client,
    session, unique_root, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::{Candidate, LeaderElection, Mutex, RwLock};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a shorter one.
const SHORT_SESSION_TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread")]
async fn mutex_waiters_acquire_in_order_of_arrival() {
    let fx = Fixture::new(Ensemble::shared(1).await, "fifo", 2, SESSION_TIMEOUT).await;
    let (root, observer) = (&fx.root, &fx.observer);
    let (a, b) = (&fx.sessions[0], &fx.sessions[1]);
    let holder = Mutex::new(a, root).unwrap().lock().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..8 {
        let session = if i % 2 == 0 { a } else { b };
        let mutex = Mutex::new(session, root).unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }));
        await_count(observer, root, i + 2).await;
    }
    holder.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_leaving_mid_queue_keeps_the_order() {
    let fx = Fixture::new(Ensemble::shared(1).await, "middle", 1, SESSION_TIMEOUT).await;
    let (root, observer, s) = (&fx.root, &fx.observer, &fx.sessions[0]);
    let holder = Mutex::new(s, root).unwrap().lock().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let spawn_waiter = |id: &'static str| {
        let mutex = Mutex::new(s, root).unwrap();
        let order = order.clone();
        tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            order.lock().unwrap().push(id);
            guard.release().await.unwrap();
        })
    };
    let first = spawn_waiter("first");
    await_count(observer, root, 2).await;
    let (leave, left) = tokio::sync::oneshot::channel::<()>();
    let middle = {
        let mutex = Mutex::new(s, root).unwrap();
        tokio::spawn(async move {
            tokio::select! {
                _ = mutex.lock() => panic!("the middle waiter acquired"),
                _ = left => {}
            }
        })
    };
    await_count(observer, root, 3).await;
    let last = spawn_waiter("last");
    await_count(observer, root, 4).await;
    leave.send(()).unwrap();
    middle.await.unwrap();
    await_count(observer, root, 3).await;
    holder.release().await.unwrap();
    first.await.unwrap();
    last.await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["first", "last"]);
    fx.nothing_left().await;
}

/// How long a waiter must keep waiting to count as "not let in".
const STILL_WAITING: Duration = Duration::from_millis(300);

/// Fairness: a writer waits behind a reader; a reader that comes after that writer waits
/// for it, even though only a reader holds; the writer holds once the first reader leaves,
/// and the late reader once the writer leaves.
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_behind_a_waiting_writer_waits_for_it() {
    let fx = Fixture::new(Ensemble::shared(1).await, "rw-fair", 3, SESSION_TIMEOUT).await;
    let (root, outside) = (&fx.root, &fx.observer);
    let (a, b, c) = (&fx.sessions[0], &fx.sessions[1], &fx.sessions[2]);
    let first = RwLock::new(a, root).unwrap().read().await.unwrap();
    let writer = RwLock::new(b, root).unwrap();
    assert!(
        writer.try_write().await.unwrap().is_none(),
        "a reader holds"
    );
    let writer = tokio::spawn(async move { writer.write().await });
    await_count(outside, root, 2).await;

    let late = RwLock::new(c, root).unwrap();
    assert!(
        late.try_read().await.unwrap().is_none(),
        "a reader went ahead of a waiting writer"
    );
    let late = tokio::spawn(async move { late.read().await });
    await_count(outside, root, 3).await;
    tokio::time::sleep(STILL_WAITING).await;
    assert!(!writer.is_finished() && !late.is_finished());

    first.release().await.unwrap();
    let writer = bounded("the writer holds once the reader left", PATIENCE, writer)
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(STILL_WAITING).await;
    assert!(
        !late.is_finished(),
        "the late reader entered with the writer"
    );
    writer.release().await.unwrap();
    let late = bounded("the late reader holds once the writer left", PATIENCE, late)
        .await
        .unwrap()
        .unwrap();
    assert!(late.fencing_token() > 0);
    late.release().await.unwrap();
    fx.nothing_left().await;
}

/// Readers waiting behind a writer all hold together once it goes.
#[tokio::test(flavor = "multi_thread")]
async fn readers_behind_a_writer_enter_together() {
    let fx = Fixture::new(Ensemble::shared(1).await, "rw-together", 2, SESSION_TIMEOUT).await;
    let (root, outside) = (&fx.root, &fx.observer);
    let (a, b) = (&fx.sessions[0], &fx.sessions[1]);
    let writer = RwLock::new(a, root).unwrap().write().await.unwrap();
    let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    let (leave, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut readers = Vec::new();
    for i in 0..3 {
        let lock = RwLock::new(if i % 2 == 0 { a } else { b }, root).unwrap();
        let (entered, mut leave) = (entered_tx.clone(), leave.subscribe());
        readers.push(tokio::spawn(async move {
            let guard = lock.read().await.unwrap();
            entered.send(i).unwrap();
            leave.recv().await.unwrap();
            guard.release().await.unwrap();
        }));
        await_count(outside, root, i + 2).await;
    }
    writer.release().await.unwrap();
    for _ in 0..3 {
        bounded("every reader holds at once", PATIENCE, entered.recv())
            .await
            .unwrap();
    }
    leave.send(()).unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_leader_at_a_time_and_resign_passes_in_queue_order() {
    let ensemble = Ensemble::shared(3).await;
    let root = unique_root("election");
    let hosts = ensemble.connect_string();
    let mut sessions = Vec::new();
    let mut candidates: Vec<Option<Candidate>> = Vec::new();
    for i in 0..5 {
        let session = session(&hosts, SHORT_SESSION_TIMEOUT).await;
        candidates.push(Some(join_election(&session, &root, format!("c{i}")).await));
        sessions.push(session);
    }
    let candidates = Arc::new(tokio::sync::RwLock::new(candidates));

    // A sampler that checks, as often as it can, that at most one reports Leader, and
    // counts its samples.
    let stop = Arc::new(AtomicBool::new(false));
    let (counted, mut samples) = tokio::sync::watch::channel(0u64);
    let sampler = {
        let (candidates, stop) = (candidates.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let now = leaders(&candidates.read().await);
                assert!(now.len() <= 1, "two leaders at once: {now:?}");
                counted.send_modify(|n| *n += 1);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };

    for expected in 0..5 {
        let leader = {
            let guard = candidates.read().await;
            await_one_leader(&guard, SHORT_SESSION_TIMEOUT).await.0
        };
        assert_eq!(leader, expected, "leadership out of queue order");
        // The sampler looks at least twice in every term (a count of samples alone would
        // depend on how fast the hand-offs are against the machine's load).
        let taken = *samples.borrow_and_update();
        zk_harness::await_watch("the sampler looks in this term", &mut samples, |&n| {
            n >= taken + 2
        })
        .await;
        let observer = LeaderElection::new(&sessions[4], &root, "observer").unwrap();
        let seen = observer.leader().await.unwrap().expect("a leader");
        assert_eq!(seen.id, Some(format!("c{expected}")));
        let term = {
            let guard = candidates.read().await;
            let candidate = guard[leader].as_ref().unwrap();
            candidate.leadership().await.unwrap().term()
        };
        let resigning = candidates.write().await[leader].take().unwrap();
        resigning.resign().await.unwrap();
        if expected < 4 {
            let guard = candidates.read().await;
            let next = await_one_leader(&guard, SHORT_SESSION_TIMEOUT).await.0;
            let next_term = guard[next]
                .as_ref()
                .unwrap()
                .leadership()
                .await
                .unwrap()
                .term();
            assert!(next_term > term, "terms must grow");
        }
    }
    stop.store(true, Ordering::SeqCst);
    sampler.await.expect("at most one leader at every sample");
    await_empty(&live_client(&sessions[0]), &root).await;
}
