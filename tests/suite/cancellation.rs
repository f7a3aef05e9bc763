//! Giving up leaves nothing behind: `try_lock`, `try_lock_for` returning `None`, a dropped
//! `lock()` future, `tokio::time::timeout` around it, and a dropped candidate leave no node
//! (for a semaphore: no lease and no node of its internal mutex), even when a create's reply
//! was lost.
//!
//! * `try_lock()` never waits on a holder.
//! * A timeout too short to wait still tries once; the longest duration takes a free lock
//!   without panicking.
//! * The same for `RwLock`'s `try_read`/`try_write`/`_for` and `Semaphore`'s
//!   `try_acquire`/`_for`.
//!
//! A create cut off in flight is in `through_faults.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_harness::semaphore::{await_nothing_left, leases, locks};
use zk_harness::{
    await_children, await_count, await_empty, bounded, children, join_election, live_client, name,
    session, unique_root, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::{DistributedLock, Mutex, MutexGuard, RwLock, Semaphore, Session};
use zookeeper_client::Client;

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a shorter one.
const SHORT_SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// Session timeout of the sessions of the tests that need a longer one.
const LONG_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// A lock held on the fixture's first session, another `Mutex` on it from its second.
struct Contested {
    fx: Fixture,
    holder: zk_recipes::MutexGuard,
    holder_name: String,
    other: Mutex,
}

async fn contested(name_: &str) -> Contested {
    let fx = Fixture::new(Ensemble::shared(1).await, name_, 2, SESSION_TIMEOUT).await;
    let holder = Mutex::new(&fx.sessions[0], &fx.root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    Contested {
        holder_name: name(holder.node()).to_owned(),
        other: Mutex::new(&fx.sessions[1], &fx.root).unwrap(),
        holder,
        fx,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn try_lock_never_waits_and_leaves_nothing() {
    let Contested {
        fx,
        holder,
        holder_name,
        other,
    } = contested("try").await;
    let (root, observer, b) = (&fx.root, &fx.observer, &fx.sessions[1]);

    let tried = bounded(
        "try_lock does not wait on the holder",
        PATIENCE,
        other.try_lock(),
    )
    .await;
    assert!(tried.unwrap().is_none());
    assert_eq!(children(observer, root).await, [holder_name.as_str()]);

    let started = Instant::now();
    assert!(other
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(children(observer, root).await, [holder_name.as_str()]);

    // Through the trait object too.
    let dynamic: Arc<dyn DistributedLock> = Arc::new(Mutex::new(b, root).unwrap());
    assert!(dynamic.try_lock().await.unwrap().is_none());
    assert_eq!(children(observer, root).await, [holder_name.as_str()]);

    holder.release().await.unwrap();
    let guard = other.try_lock().await.unwrap().expect("free lock");
    guard.release().await.unwrap();
    let guard = dynamic.try_lock_for(PATIENCE).await.unwrap().expect("free");
    guard.release().await.unwrap();
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelled_lock_waits_leave_no_node() {
    let Contested {
        fx,
        holder,
        holder_name,
        other,
    } = contested("cancel").await;
    let (root, observer) = (&fx.root, &fx.observer);

    // A waiting lock() under tokio::time::timeout.
    let waited = tokio::time::timeout(Duration::from_millis(300), other.lock()).await;
    assert!(waited.is_err(), "acquired a held lock");
    await_children(observer, root, &[&holder_name]).await;

    // A lock() future dropped at every stage: before the create was sent, with the
    // create's reply outstanding, while listing, while watching.
    for micros in (0..3000).step_by(150) {
        let attempt = tokio::time::timeout(Duration::from_micros(micros), other.lock()).await;
        assert!(attempt.is_err());
    }
    await_children(observer, root, &[&holder_name]).await;

    // A future dropped by select! while it waits.
    let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
    let waiter = tokio::spawn(async move {
        tokio::select! {
            _ = other.lock() => panic!("acquired a held lock"),
            _ = cancelled => {}
        }
    });
    await_count(observer, root, 2).await;
    cancel.send(()).unwrap();
    waiter.await.unwrap();
    await_children(observer, root, &[&holder_name]).await;

    holder.release().await.unwrap();
    fx.nothing_left().await;
}

/// "At most no time" still tries once, as `flock -w 0` does: a free lock is taken every
/// time with a zero or a 1 ms timeout, and a held one is refused at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_timeout_too_short_to_wait_still_tries_once() {
    let fx = Fixture::new(
        Ensemble::shared(1).await,
        "zero-timeout",
        1,
        SESSION_TIMEOUT,
    )
    .await;
    let mutex = Mutex::new(&fx.sessions[0], &fx.root).unwrap();
    for timeout in [Duration::ZERO, Duration::from_millis(1)] {
        for round in 0..40 {
            let guard = mutex.try_lock_for(timeout).await.unwrap();
            let guard = guard.unwrap_or_else(|| panic!("{timeout:?}, round {round}: not taken"));
            guard.release().await.unwrap();
        }
    }
    let held = mutex.lock().await.unwrap();
    assert!(mutex.try_lock_for(Duration::ZERO).await.unwrap().is_none());
    held.release().await.unwrap();
    fx.nothing_left().await;
}

/// Runs `work` in a task; fails the test, with the panic's message, if it panics.
async fn no_panic<T: Send + 'static>(
    what: &str,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    match bounded(what, PATIENCE, tokio::spawn(work)).await {
        Ok(done) => done,
        Err(err) if err.is_panic() => {
            let panic = err.into_panic();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            panic!("{what} panicked: {message}")
        }
        Err(err) => panic!("{what}: {err}"),
    }
}

/// `try_lock_for(Duration::MAX)` does not panic: on a free lock it returns the
/// guard, through `Mutex` and through `Arc<dyn DistributedLock>`.
#[tokio::test(flavor = "multi_thread")]
async fn try_lock_for_the_longest_duration_takes_a_free_lock() {
    let fx = Fixture::new(
        Ensemble::shared(1).await,
        "duration-max",
        1,
        LONG_SESSION_TIMEOUT,
    )
    .await;
    let (root, s) = (&fx.root, &fx.sessions[0]);

    let mutex = Mutex::new(s, root).unwrap();
    let taken = no_panic("Mutex::try_lock_for(Duration::MAX)", async move {
        mutex.try_lock_for(Duration::MAX).await
    })
    .await;
    let guard: MutexGuard = taken.unwrap().expect("a free lock is taken");
    guard.release().await.unwrap();

    let dynamic: Arc<dyn DistributedLock> = Arc::new(Mutex::new(s, root).unwrap());
    let taken = no_panic("DistributedLock::try_lock_for(Duration::MAX)", async move {
        dynamic.try_lock_for(Duration::MAX).await
    })
    .await;
    let guard = taken.unwrap().expect("a free lock is taken");
    guard.release().await.unwrap();
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rwlock_try_timeout_and_cancel_leave_no_node() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("rw-cancel");
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let outside = live_client(&a);
    let holder = RwLock::new(&a, &root).unwrap().write().await.unwrap();
    let holder_name = name(holder.node()).to_owned();
    let other = Arc::new(RwLock::new(&b, &root).unwrap());

    assert!(other.try_read().await.unwrap().is_none());
    assert!(other.try_write().await.unwrap().is_none());
    let started = Instant::now();
    assert!(other
        .try_read_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(other
        .try_write_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(children(&outside, &root).await, [holder_name.as_str()]);

    // Dropped at every stage of entering and waiting.
    for micros in (0..3000).step_by(250) {
        let read = tokio::time::timeout(Duration::from_micros(micros), other.read()).await;
        let write = tokio::time::timeout(Duration::from_micros(micros), other.write()).await;
        assert!(read.is_err() && write.is_err(), "acquired a held lock");
    }
    // Dropped by select! while waiting.
    let (cancel, cancelled) = tokio::sync::watch::channel(false);
    let mut waiters = Vec::new();
    for write in [false, true] {
        let (other, mut cancelled) = (other.clone(), cancelled.clone());
        waiters.push(tokio::spawn(async move {
            tokio::select! {
                _ = async { if write { other.write().await.map(drop) } else { other.read().await.map(drop) } } => {
                    panic!("acquired a held lock")
                }
                _ = cancelled.wait_for(|&c| c) => {}
            }
        }));
        await_count(&outside, &root, waiters.len() + 1).await;
    }
    cancel.send_replace(true);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    await_children(&outside, &root, &[holder_name.as_str()]).await;
    holder.release().await.unwrap();
    await_empty(&outside, &root).await;
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

/// "At most no time" still tries once, as `flock -w 0` does: a free semaphore is taken
/// every time with a zero or a 1 ms timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_semaphore_timeout_too_short_to_wait_still_tries_once() {
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

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_candidate_leaves_the_queue() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("drop");
    let s = session(&ensemble.connect_string(), SHORT_SESSION_TIMEOUT).await;
    let first = join_election(&s, &root, "first").await;
    let second = join_election(&s, &root, "second").await;
    first.leadership().await.unwrap();
    drop(first);
    let led = bounded("second leads", PATIENCE, second.leadership()).await;
    assert!(led.is_ok());
    drop(second);
    await_empty(&live_client(&s), &root).await;
}
