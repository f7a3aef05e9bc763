//! Loss: a holder is told when it can no longer trust its hold — `lost()` resolves and
//! `is_lost()` is true — when its node is deleted, its session expires, or its connection is
//! suspended (at once by default, after a third of the session timeout when suspension is
//! tolerated). A leader steps down on the same events.
//!
//! * A guard, a read or write guard and a lease are lost when their node is deleted or their
//!   session expires, and the next waiter acquires.
//! * Suspension is loss by default, and is tolerated when asked, while it is short.
//! * A cut-off leader steps down before the next one leads; the role steps down with the
//!   loss; a resigned leadership is lost once `resign()` returns.
//!
//! A holder paused past its session is in `loss_after_pause.rs`; a loss published before
//! anything else is done about it, in `loss_published_first.rs`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zk_harness::semaphore::{await_nothing_left, leases};
use zk_harness::{
    await_count, await_empty, await_queue, await_watch, bounded, expire_session, join_election,
    live_client, name, observer, participant_ids, session, tolerant_session, unique_root, Ensemble,
    Fixture, PATIENCE,
};
use zk_recipes::{Error, LeaderElection, Loss, Mutex, Role, RwLock, Semaphore, SessionEvent};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a shorter one.
const SHORT_SESSION_TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread")]
async fn a_guard_is_lost_when_its_node_is_deleted() {
    let fx = Fixture::new(Ensemble::shared(1).await, "deleted", 1, SESSION_TIMEOUT).await;
    let (root, admin, s) = (&fx.root, &fx.observer, &fx.sessions[0]);
    let guard = Mutex::new(s, root).unwrap().lock().await.unwrap();
    assert!(!guard.is_lost());
    admin.delete(guard.node(), None).await.unwrap();
    // Noticed without anyone awaiting lost(): is_lost() turns true by itself.
    let noticed = async {
        while !guard.is_lost() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    bounded("is_lost() turns true", PATIENCE, noticed).await;
    let loss = bounded("lost()", PATIENCE, guard.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    assert!(guard.is_lost());
    match guard.release().await {
        Err(Error::Lost { .. }) => {}
        other => panic!("release of a lost lock: {other:?}"),
    }
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_on_session_expiry_and_the_next_waiter_acquires() {
    let fx = Fixture::new(Ensemble::shared(1).await, "expiry", 2, SESSION_TIMEOUT).await;
    let (root, observer) = (&fx.root, &fx.observer);
    let (a, b) = (&fx.sessions[0], &fx.sessions[1]);
    let guard = Mutex::new(a, root).unwrap().lock().await.unwrap();
    let next = Mutex::new(b, root).unwrap();
    let waiter = tokio::spawn(async move { next.lock().await.map(|g| (g.fencing_token(), g)) });
    await_count(observer, root, 2).await;

    expire_session(&fx.hosts, live_client(a).session()).await;
    let loss = bounded("lost()", PATIENCE, guard.lost()).await;
    assert!(
        matches!(loss, Loss::SessionExpired | Loss::Suspended),
        "{loss:?}"
    );
    let (token, next_guard) = bounded("the next waiter acquires", PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(token > guard.fencing_token());
    match guard.release().await {
        Err(Error::Lost { .. }) => {}
        other => panic!("release after expiry: {other:?}"),
    }
    assert!(
        !next_guard.is_lost(),
        "the late release harmed the next holder"
    );
    next_guard.release().await.unwrap();
    fx.nothing_left().await;
}

/// By default a cut connection loses the lock at once, long before the session expires.
#[tokio::test(flavor = "multi_thread")]
async fn suspension_is_loss_by_default() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("suspend-strict");
    let admin = observer(&ensemble.connect_string()).await;
    let proxy = ensemble.proxy(0).await;
    let strict = session(&proxy.address(), Duration::from_secs(20)).await;
    let guard = Mutex::new(&strict, &root).unwrap().lock().await.unwrap();
    proxy.cut();
    let loss = bounded("lost()", PATIENCE, guard.lost()).await;
    assert_eq!(loss, Loss::Suspended);
    proxy.restore();
    // The session survived, so the late release deletes its own node and says it was lost.
    await_watch("reconnected", &mut strict.events(), |e| {
        *e == SessionEvent::Reconnected
    })
    .await;
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    await_empty(&admin, &root).await;
}

/// A session that tolerates suspension keeps its lock through a short suspension, and
/// loses it in a long one before the session could expire.
#[tokio::test(flavor = "multi_thread")]
async fn suspension_is_tolerated_when_asked_while_it_is_short() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("suspend-tolerant");
    let admin = observer(&ensemble.connect_string()).await;
    let proxy = ensemble.proxy(0).await;
    let tolerant = tolerant_session(&proxy.address(), Duration::from_secs(6)).await;
    let mut events = tolerant.events();
    let guard = Mutex::new(&tolerant, &root).unwrap().lock().await.unwrap();
    proxy.cut();
    await_watch("suspended", &mut events, |e| *e == SessionEvent::Suspended).await;
    proxy.restore();
    await_watch("reconnected", &mut events, |e| {
        *e == SessionEvent::Reconnected
    })
    .await;
    assert!(
        !guard.is_lost(),
        "a short suspension was not tolerated: {:?}",
        guard.lost().await
    );
    proxy.cut();
    let loss = bounded("lost()", PATIENCE, guard.lost()).await;
    assert_eq!(loss, Loss::Suspended);
    assert_eq!(
        *events.borrow(),
        SessionEvent::Suspended,
        "loss must come before the session could expire"
    );
    proxy.restore();
    await_watch("reconnected", &mut events, |e| {
        *e == SessionEvent::Reconnected
    })
    .await;
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    await_empty(&admin, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn loss_is_noticed_by_readers_and_writers() {
    let fx = Fixture::new(Ensemble::shared(1).await, "rw-loss", 2, SESSION_TIMEOUT).await;
    let (root, admin) = (&fx.root, &fx.observer);
    let (a, b) = (&fx.sessions[0], &fx.sessions[1]);

    // A reader whose node someone deletes.
    let reader = RwLock::new(b, root).unwrap().read().await.unwrap();
    admin.delete(reader.node(), None).await.unwrap();
    let loss = bounded("the reader's loss", PATIENCE, reader.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    assert!(matches!(reader.release().await, Err(Error::Lost { .. })));

    // A writer whose session expires; the reader waiting behind it gets in.
    let writer = RwLock::new(a, root).unwrap().write().await.unwrap();
    let next = RwLock::new(b, root).unwrap();
    let waiter = tokio::spawn(async move { next.read().await });
    await_count(admin, root, 2).await;
    expire_session(&fx.hosts, live_client(a).session()).await;
    let loss = bounded("the writer's loss", PATIENCE, writer.lost()).await;
    assert!(
        matches!(loss, Loss::SessionExpired | Loss::Suspended),
        "{loss:?}"
    );
    let next = bounded(
        "the reader gets in after the writer's session expired",
        PATIENCE,
        waiter,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(next.fencing_token() > writer.fencing_token());
    assert!(matches!(writer.release().await, Err(Error::Lost { .. })));
    assert!(!next.is_lost());
    next.release().await.unwrap();
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_holders_lease_is_freed() {
    let fx = Fixture::new(Ensemble::shared(1).await, "sem-expiry", 2, SESSION_TIMEOUT)
        .await
        .keeping(zk_harness::semaphore::NODES);
    let (path, outside) = (&fx.root, &fx.observer);
    let (a, b) = (&fx.sessions[0], &fx.sessions[1]);
    let lease = Semaphore::new(a, path, 1).unwrap().acquire().await.unwrap();
    let next = Semaphore::new(b, path, 1).unwrap();
    let waiter = tokio::spawn(async move { next.acquire().await });
    await_count(outside, &leases(path), 2).await;

    expire_session(&fx.hosts, live_client(a).session()).await;
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
    await_nothing_left(outside, path).await;
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_is_lost_when_its_node_is_deleted() {
    let fx = Fixture::new(Ensemble::shared(1).await, "sem-deleted", 1, SESSION_TIMEOUT)
        .await
        .keeping(zk_harness::semaphore::NODES);
    let (path, admin) = (&fx.root, &fx.observer);
    let lease = Semaphore::new(&fx.sessions[0], path, 2)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    admin.delete(lease.node(), None).await.unwrap();
    let loss = bounded("the lease's loss", PATIENCE, lease.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    match lease.release().await {
        Err(Error::Lost { .. }) => {}
        other => panic!("release of a lost lease: {other:?}"),
    }
    await_nothing_left(admin, path).await;
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cut_off_leader_steps_down_before_the_next_one_leads() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("cutoff");
    let proxy = ensemble.proxy(0).await;
    let cut_session = session(&proxy.address(), SHORT_SESSION_TIMEOUT).await;
    let other_session = session(&ensemble.connect_string(), SHORT_SESSION_TIMEOUT).await;
    let cut = join_election(&cut_session, &root, "cut").await;
    let old = cut.leadership().await.unwrap();
    let next = join_election(&other_session, &root, "next").await;
    assert_eq!(next.role(), Role::Follower);

    let mut old_roles = cut.roles();
    let stepped_down = tokio::spawn(async move {
        old_roles.wait_for(|r| *r == Role::Follower).await.unwrap();
        Instant::now()
    });
    proxy.cut();
    let new = bounded("the next candidate leads", PATIENCE, next.leadership())
        .await
        .unwrap();
    let led_at = Instant::now();
    let stepped_down_at = stepped_down.await.unwrap();
    assert!(
        stepped_down_at <= led_at,
        "the old leader stepped down after the new one led"
    );
    assert!(old.is_lost());
    assert!(new.term() > old.term());

    // Back on the network the old candidate has a new session and queues behind.
    proxy.restore();
    let observer = LeaderElection::new(&other_session, &root, "observer").unwrap();
    let queue = await_queue(
        &live_client(&other_session),
        &root,
        "the re-joined candidate",
        |now| now.len() == 2 && now[0] == name(new.node()),
    )
    .await;
    let ids = participant_ids(&observer).await;
    assert_eq!(ids, ["next", "cut"], "queue {queue:?}");
    assert_eq!(cut.role(), Role::Follower);
    cut.resign().await.unwrap();
    next.resign().await.unwrap();
    await_empty(&live_client(&other_session), &root).await;
}

/// Whoever sees a leadership's loss sees the role step down with it: `roles()` says
/// `Follower` as soon as `lost()` resolved, in every one of 100 rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_role_steps_down_with_the_loss() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let s = session(&hosts, SHORT_SESSION_TIMEOUT).await;
    let observer = observer(&hosts).await;
    for round in 0..100 {
        let root = unique_root("role-with-loss");
        let candidate = join_election(&s, &root, "a").await;
        let roles = candidate.roles();
        let leadership = bounded("a leads", PATIENCE, candidate.leadership())
            .await
            .unwrap();
        // Another behind it, so that after its loss it joins again as a follower (alone,
        // it would lead again at once, and the role would rightly say so).
        let next = join_election(&s, &root, "b").await;
        await_count(&observer, &root, 2).await;
        let candidate = Arc::new(candidate);
        // Whoever sees the published role step down sees role() say so too.
        let watching = tokio::spawn({
            let (candidate, mut roles) = (candidate.clone(), roles.clone());
            async move {
                let _ = roles.wait_for(|role| *role == Role::Follower).await;
                candidate.role()
            }
        });
        observer.delete(leadership.node(), None).await.unwrap();
        bounded("the loss", PATIENCE, leadership.lost()).await;
        assert_eq!(*roles.borrow(), Role::Follower, "round {round}");
        let seen = bounded("the watcher", PATIENCE, watching).await.unwrap();
        assert_eq!(seen, Role::Follower, "round {round}: role() after roles()");
        let candidate = Arc::try_unwrap(candidate).expect("the watcher is done");
        candidate.resign().await.ok();
        next.resign().await.ok();
        await_empty(&observer, &root).await;
    }
}

/// A leadership kept after `resign()` (or a guard's share after the release) is lost as
/// soon as the release returns, not once the background monitor happens to stop.
#[tokio::test(flavor = "multi_thread")]
async fn a_resigned_leadership_is_lost_when_resign_returns() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("resigned");
    let s = session(&zk.connect_string(), Duration::from_secs(10)).await;
    for _ in 0..50 {
        let candidate = join_election(&s, &root, "a").await;
        let leadership = candidate.leadership().await.unwrap();
        candidate.resign().await.unwrap();
        assert!(leadership.is_lost(), "is_lost() false right after resign()");
    }
    await_empty(&observer(&zk.connect_string()).await, &root).await;
}
