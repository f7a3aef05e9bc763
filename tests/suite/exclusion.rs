//! Exclusion: at most one holder of a `Mutex` at a time, many readers or one writer of an
//! `RwLock`, at most N leases of a `Semaphore`, one leader of an election.
//!
//! * A mutex has one holder at a time, on a standalone server and on an ensemble, also
//!   between tasks that share one `Mutex` value; fencing tokens grow in order of entry.
//! * Readers of an `RwLock` share it and writers are alone, also for tasks sharing one value
//!   and through `DistributedLock`.
//! * A semaphore never has more than its maximum of leases out, and reaches it.
//! * All of it holds under a nemesis that deletes waiters' nodes and writes into contender
//!   nodes while contenders loop: a history checker finds no two trusted holders at once
//!   (one leader at a time for an election).
//!
//! Exclusion through server faults (a killed leader server, a paused server, a cut-off
//! holder) is in `through_faults.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_harness::nemesis::{under_nemesis, Arena, Entrant, Leading, Rule, Tally, Waits};
use zk_harness::semaphore::await_nothing_left;
use zk_harness::{
    await_count, await_empty, await_watch, bounded, live_client, name, session, unique_root,
    Ensemble, Fixture, PATIENCE, WORK,
};
use zk_recipes::{DistributedLock, LeaderElection, Mutex, RwLock, Semaphore};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a longer one.
const LONG_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a waiter must keep waiting to count as "not let in".
const STILL_WAITING: Duration = Duration::from_millis(300);

/// 16 contenders over 4 sessions, 100 acquisitions each: never two inside, tokens strictly
/// increasing in order of entry.
async fn mutex_exclusion(ensemble: &Ensemble) {
    const SESSIONS: usize = 4;
    const PER_SESSION: usize = 4;
    const ROUNDS: usize = 100;
    let fx = Fixture::new(ensemble, "exclusion", SESSIONS, SESSION_TIMEOUT).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let entries = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for session in &fx.sessions {
        for _ in 0..PER_SESSION {
            let mutex = Mutex::new(session, &fx.root).unwrap();
            let (inside, entries) = (inside.clone(), entries.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = mutex.lock().await.expect("lock");
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    entries.lock().unwrap().push(guard.fencing_token());
                    tokio::task::yield_now().await;
                    assert!(!guard.is_lost(), "lock lost without a fault");
                    assert_eq!(inside.fetch_sub(1, Ordering::SeqCst), 1, "two holders");
                    guard.release().await.expect("release");
                }
            }));
        }
    }
    for task in tasks {
        bounded("the contenders finish", Duration::from_secs(240), task)
            .await
            .expect("contender panicked");
    }
    let entries = entries.lock().unwrap().clone();
    assert_eq!(entries.len(), SESSIONS * PER_SESSION * ROUNDS);
    assert!(
        entries.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens not strictly increasing in order of entry"
    );
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutex_has_one_holder_at_a_time_on_standalone() {
    mutex_exclusion(Ensemble::shared(1).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutex_has_one_holder_at_a_time_on_ensemble() {
    mutex_exclusion(Ensemble::shared(3).await).await;
}

/// A `Mutex` value shared by tasks (`Arc<Mutex>`, one session) excludes them, as
/// `tokio::sync::Mutex` does: no two of its sections overlap, and a task cannot take the
/// lock while another task holds it through the same value.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shared_mutex_value_excludes_its_tasks() {
    const TASKS: usize = 8;
    const SECTIONS: usize = 20;
    let fx = Fixture::new(
        Ensemble::shared(1).await,
        "shared-value",
        1,
        LONG_SESSION_TIMEOUT,
    )
    .await;
    let mutex = Arc::new(Mutex::new(&fx.sessions[0], &fx.root).unwrap());
    let inside = Arc::new(AtomicUsize::new(0));
    let overlapped = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (mutex, inside, overlapped) = (mutex.clone(), inside.clone(), overlapped.clone());
            tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    let guard = mutex.lock().await.expect("lock");
                    let others_at_entry = inside.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(WORK).await;
                    let others_at_exit = inside.fetch_sub(1, Ordering::SeqCst) - 1;
                    if others_at_entry + others_at_exit > 0 {
                        overlapped.fetch_add(1, Ordering::SeqCst);
                    }
                    guard.release().await.expect("release");
                }
            })
        })
        .collect();
    for task in tasks {
        bounded("the tasks' sections", PATIENCE, task)
            .await
            .expect("a task panicked");
    }
    let overlapped = overlapped.load(Ordering::SeqCst);
    assert_eq!(
        overlapped,
        0,
        "{overlapped} of {} sections through one shared Mutex value overlapped another",
        TASKS * SECTIONS
    );

    // While one task holds, another task's bounded wait through the same value times out.
    let guard = mutex.lock().await.unwrap();
    let other = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.try_lock_for(Duration::from_millis(300)).await })
    };
    let tried = bounded("the other task's try_lock_for(300 ms)", PATIENCE, other)
        .await
        .unwrap();
    assert!(
        matches!(tried, Ok(None)),
        "another task took the lock held through the same value: {:?}",
        tried.map(|taken| taken.map(|guard| name(guard.node()).to_owned()))
    );
    guard.release().await.unwrap();
    fx.nothing_left().await;
}

/// Who is inside, across every task of a test.
#[derive(Default)]
struct Inside {
    readers: AtomicUsize,
    writers: AtomicUsize,
}

/// 6 readers and 3 writers over 3 sessions, `rounds` sections each: a writer is always
/// alone, writers' tokens grow; then two readers of different sessions hold at once.
async fn readers_share_writers_exclude(ensemble: &Ensemble, rounds: usize) {
    let fx = Fixture::new(ensemble, "rw-share", 3, SESSION_TIMEOUT).await;
    let inside = Arc::new(Inside::default());
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for session in &fx.sessions {
        for c in 0..3 {
            let lock = RwLock::new(session, &fx.root).unwrap();
            let (inside, tokens) = (inside.clone(), tokens.clone());
            let writer = c == 0;
            tasks.push(tokio::spawn(async move {
                for _ in 0..rounds {
                    if writer {
                        let guard = lock.write().await.expect("write");
                        assert_eq!(inside.writers.fetch_add(1, Ordering::SeqCst), 0);
                        assert_eq!(inside.readers.load(Ordering::SeqCst), 0, "a reader inside");
                        tokens.lock().unwrap().push(guard.fencing_token());
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        assert!(!guard.is_lost());
                        inside.writers.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.expect("release");
                    } else {
                        let guard = lock.read().await.expect("read");
                        inside.readers.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(inside.writers.load(Ordering::SeqCst), 0, "a writer inside");
                        // A hold time: a writer let in meanwhile would be counted.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        assert_eq!(inside.writers.load(Ordering::SeqCst), 0, "a writer inside");
                        assert!(!guard.is_lost());
                        inside.readers.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.expect("release");
                    }
                }
            }));
        }
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(240), task)
            .await
            .expect("contenders finished")
            .expect("contender panicked");
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 3 * rounds);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "writer tokens");

    // Readers share, shown as an event rather than hoped for from the loop's timing: while
    // one reader holds, a reader of another session gets in.
    let first = RwLock::new(&fx.sessions[0], &fx.root).unwrap();
    let first = first.read().await.expect("read");
    let second = RwLock::new(&fx.sessions[1], &fx.root).unwrap();
    let second = second.try_read_for(PATIENCE).await.expect("read");
    assert!(
        second.is_some(),
        "a reader waited {PATIENCE:?} behind another reader"
    );
    second.unwrap().release().await.expect("release");
    first.release().await.expect("release");
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_share_and_writers_exclude_on_standalone() {
    readers_share_writers_exclude(Ensemble::shared(1).await, 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_share_and_writers_exclude_on_ensemble() {
    readers_share_writers_exclude(Ensemble::shared(3).await, 10).await;
}

/// No upgrade, no downgrade, no re-entrancy through the value: a read while holding the
/// write lock waits behind it; tasks sharing one `RwLock` exclude each other; the write side
/// is a `DistributedLock`.
#[tokio::test(flavor = "multi_thread")]
async fn one_value_shared_by_tasks_and_the_write_side_as_a_distributed_lock() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("rw-shared");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let outside = live_client(&s);
    let lock = Arc::new(RwLock::new(&s, &root).unwrap());
    let writer = lock.write().await.unwrap();
    assert!(
        lock.try_read_for(STILL_WAITING).await.unwrap().is_none(),
        "a read while holding the write lock waits behind it"
    );
    let other = lock.clone();
    let task = tokio::spawn(async move { other.write().await });
    await_count(&outside, &root, 2).await;
    tokio::time::sleep(STILL_WAITING).await;
    assert!(
        !task.is_finished(),
        "a second task wrote through the same value"
    );
    writer.release().await.unwrap();
    let second = bounded("the second task writes", PATIENCE, task)
        .await
        .unwrap()
        .unwrap();
    second.release().await.unwrap();

    let dynamic: Arc<dyn DistributedLock> = lock.clone();
    let guard = dynamic.lock().await.unwrap();
    assert!(
        lock.try_read().await.unwrap().is_none(),
        "the trait locks the write side"
    );
    assert!(dynamic.try_lock().await.unwrap().is_none());
    guard.release().await.unwrap();
    let guard = dynamic.try_lock_for(PATIENCE).await.unwrap().expect("free");
    guard.release().await.unwrap();
    await_empty(&outside, &root).await;
}

/// 12 acquirers over 4 sessions, `rounds` leases each, on a semaphore of 3: never more than 3
/// holders at once, and 3 at some moment.
///
/// Filling up is an event, not a race: until 3 leases have been out at once, every holder
/// keeps its lease (at most [`PATIENCE`]), so a semaphore that lets fewer than 3 in fails
/// here however slow the machine. Afterwards each holder keeps its lease 40 ms, so that
/// holders overlap and one more than the maximum would be counted.
async fn at_most_max(ensemble: &Ensemble, rounds: usize) {
    const SESSIONS: usize = 4;
    const PER_SESSION: usize = 3;
    const MAX: u32 = 3;
    let fx = Fixture::new(ensemble, "sem-max", SESSIONS, SESSION_TIMEOUT)
        .await
        .keeping(zk_harness::semaphore::NODES);
    let inside = Arc::new(AtomicUsize::new(0));
    // The most leases ever out at once.
    let most = Arc::new(watch::channel(0).0);
    let mut tasks = Vec::new();
    for session in &fx.sessions {
        for _ in 0..PER_SESSION {
            let semaphore = Semaphore::new(session, &fx.root, MAX).unwrap();
            let (inside, most) = (inside.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..rounds {
                    let lease = semaphore.acquire().await.expect("acquire");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.send_modify(|most| *most = now.max(*most));
                    assert!(now <= MAX as usize, "{now} leases held at once");
                    await_watch(
                        "the semaphore fills up (3 leases out at once)",
                        &mut most.subscribe(),
                        |&most| most >= MAX as usize,
                    )
                    .await;
                    // A hold time, not synchronisation: holders overlap.
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    assert!(!lease.is_lost(), "lease lost without a fault");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    lease.release().await.expect("release");
                }
            }));
        }
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(240), task)
            .await
            .expect("acquirers finished")
            .expect("acquirer panicked");
    }
    assert_eq!(
        *most.borrow(),
        MAX as usize,
        "the semaphore never filled up"
    );
    await_nothing_left(&fx.observer, &fx.root).await;
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_max_leases_on_standalone() {
    at_most_max(Ensemble::shared(1).await, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_most_max_leases_on_ensemble() {
    at_most_max(Ensemble::shared(3).await, 5).await;
}

/// Locks, works, releases, `rounds` times or until `stop`; a `lock()` that fails is retried.
fn lock_loop(entrant: Entrant<'_>) -> JoinHandle<Tally> {
    let mutex = Mutex::new(entrant.session, entrant.root).unwrap();
    entrant.run(move || {
        let mutex = mutex.clone();
        async move { mutex.lock().await }
    })
}

/// Interference: 8 contenders on 4 sessions, 25 sections each, while the nemesis deletes
/// waiters' nodes and writes into any contender node: no two trusted sections overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutex_keeps_exclusion_under_a_nemesis() {
    under_nemesis("nemesis-lock", lock_loop, 2, 25, QUEUE, Rule::Exclusive).await;
}

/// Reads or writes (a writer for the first contender of each session, readers for the
/// others), works, releases, `rounds` times or until `stop`.
fn read_write_loop(entrant: Entrant<'_>) -> JoinHandle<Tally> {
    let lock = RwLock::new(entrant.session, entrant.root).unwrap();
    if entrant.who.ends_with("c0") {
        entrant.run(move || {
            let lock = lock.clone();
            async move { lock.write().await }
        })
    } else {
        entrant.run(move || {
            let lock = lock.clone();
            async move { lock.read().await }
        })
    }
}

/// Interference: 4 writers and 8 readers on 4 sessions, 20 sections each, while the nemesis
/// deletes waiters' nodes (a writer behind anyone, a reader behind a writer) and writes into
/// any node: no trusted writer ever overlaps another trusted section.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_writer_stays_alone_under_a_nemesis() {
    let arena = Arena {
        child: "",
        waits: Waits::ReadWrite,
    };
    under_nemesis(
        "nemesis-rw",
        read_write_loop,
        3,
        20,
        &[arena],
        Rule::ReadWrite,
    )
    .await;
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

/// Joins, leads a moment, resigns, `rounds` times or until `stop`; failures are retried.
fn election_loop(entrant: Entrant<'_>) -> JoinHandle<Tally> {
    let election = LeaderElection::new(entrant.session, entrant.root, entrant.who.clone()).unwrap();
    entrant.run(move || {
        let election = election.clone();
        async move {
            let candidate = election.join().await?;
            let leadership = candidate.leadership().await?;
            Ok(Leading(candidate, leadership))
        }
    })
}

/// The nemesis attacks the root: every contender but the first waits.
const QUEUE: &[Arena] = &[Arena {
    child: "",
    waits: Waits::BehindAny,
}];

/// Interference: 4 candidates on 4 sessions, 15 short leaderships each, under the same
/// nemesis: no two trusted leaderships overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn election_keeps_one_leader_under_a_nemesis() {
    under_nemesis(
        "nemesis-election",
        election_loop,
        1,
        15,
        QUEUE,
        Rule::Exclusive,
    )
    .await;
}
