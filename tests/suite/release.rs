//! Releases finish what they start: `release()`, `resign()` and every removal of a node of
//! ours (a give-up, a dropped guard) end with the node gone, whatever happens to the
//! connection meanwhile, and on whatever thread the owner is dropped.
//!
//! * A release lost with the connection, again and again, finishes; a give-up lost with it
//!   leaves nothing behind.
//! * `release()` and `resign()` on a cut connection wait for it and succeed; a `release()`
//!   dropped meanwhile still finishes, and one awaited on a runtime without timers too; one
//!   cut for longer than the session lives returns with the connection still down.
//! * A guard dropped outside a runtime releases, with the connection up or cut; a dropped
//!   guard is gone for its session's next request; a re-entered share released after a loss
//!   says lost.
//! * No release writes into the lock path. Under creator ACLs a release still signals its
//!   successor in one transaction; under a root that refuses the signal it leaves nothing.

use std::time::Duration;

use tokio::task::JoinHandle;
use zk_harness::{
    await_count, await_empty, await_watch, bounded, children, digest_observer, join_election,
    live_client, observer, session, session_id, tolerant_session, unique_root, Ensemble, Proxy,
    PATIENCE,
};
use zk_recipes::{Error, Mutex, MutexGuard, Role, Session, SessionEvent};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a longer one.
const LONG_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// ZooKeeper opcodes of the requests a proxy is told to drop.
const DELETE: i32 = 2;

const MULTI: i32 = 14;

/// A holder (on `holder`) and a waiter behind it (on a session of its own), on `root`.
struct Queue {
    observer: zookeeper_client::Client,
    guard: MutexGuard,
    waiter: JoinHandle<zk_recipes::Result<MutexGuard>>,
    _other: Session,
}

impl Queue {
    async fn new(ensemble: &Ensemble, holder: &Session, root: &str) -> Queue {
        let other = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
        let observer = observer(&ensemble.connect_string()).await;
        let guard = Mutex::new(holder, root).unwrap().lock().await.unwrap();
        let waiter = tokio::spawn({
            let mutex = Mutex::new(&other, root).unwrap();
            async move { mutex.lock().await }
        });
        await_count(&observer, root, 2).await;
        Queue {
            observer,
            guard,
            waiter,
            _other: other,
        }
    }
}

/// A [`Queue`] whose holder's session (tolerant of suspension, through a proxy) is cut
/// off: the holder's connection is down and it knows.
struct CutHolder {
    queue: Queue,
    root: String,
    proxy: Proxy,
    _holder: Session,
    _ensemble: Ensemble,
}

impl CutHolder {
    async fn new(name: &str, timeout: Duration) -> CutHolder {
        let ensemble = Ensemble::start(1).await;
        let root = unique_root(name);
        let proxy = ensemble.proxy(0).await;
        let holder = tolerant_session(&proxy.address(), timeout).await;
        let queue = Queue::new(&ensemble, &holder, &root).await;
        cut_off(&proxy, &holder).await;
        CutHolder {
            queue,
            root,
            proxy,
            _holder: holder,
            _ensemble: ensemble,
        }
    }
}

/// The waiter takes the lock at once, alone in `root`; then nothing is left.
async fn the_next_holds(
    waiter: JoinHandle<zk_recipes::Result<MutexGuard>>,
    observer: &zookeeper_client::Client,
    root: &str,
) {
    let next = bounded("the waiter takes the lock", PATIENCE, waiter)
        .await
        .unwrap()
        .expect("lock");
    assert!(!next.is_lost());
    assert_eq!(children(observer, root).await.len(), 1);
    next.release().await.unwrap();
    await_empty(observer, root).await;
}

/// A release whose transaction is lost with the connection, again and again (the proxy
/// closes the connection instead of passing the request on, four times in a row), still
/// ends with the node gone and the waiter behind it holding: the removal keeps trying
/// while the session lives.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_lost_with_the_connection_again_and_again_finishes() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("release-dropped");
    let proxy = ensemble.proxy(0).await;
    let holder = session(&proxy.address(), SESSION_TIMEOUT).await;
    let queue = Queue::new(&ensemble, &holder, &root).await;

    proxy.drop_requests(MULTI, 4);
    let released = bounded("the release", PATIENCE, queue.guard.release()).await;
    assert!(released.is_ok(), "release: {released:?}");
    assert_eq!(proxy.dropped(), 4, "the proxy did not drop the releases");
    the_next_holds(queue.waiter, &queue.observer, &root).await;
}

/// A waiter that gives up (`try_lock_for` times out) while its deletes are lost with the
/// connection leaves no node behind: the one behind it is not stuck once the holder goes.
#[tokio::test(flavor = "multi_thread")]
async fn a_give_up_lost_with_the_connection_leaves_nothing_behind() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("give-up-dropped");
    let proxy = ensemble.proxy(0).await;
    let holding = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let giving_up = session(&proxy.address(), SESSION_TIMEOUT).await;
    let observer = observer(&ensemble.connect_string()).await;
    let guard = Mutex::new(&holding, &root).unwrap().lock().await.unwrap();

    proxy.drop_requests(DELETE, 4);
    let timed_out = Mutex::new(&giving_up, &root)
        .unwrap()
        .try_lock_for(Duration::from_millis(500))
        .await;
    assert!(matches!(timed_out, Ok(None)), "{timed_out:?}");
    await_count(&observer, &root, 1).await;
    assert_eq!(proxy.dropped(), 4, "the proxy did not drop the deletes");

    let third = tokio::spawn({
        let mutex = Mutex::new(&holding, &root).unwrap();
        async move { mutex.lock().await }
    });
    await_count(&observer, &root, 2).await;
    guard.release().await.unwrap();
    let third = bounded("the third contender takes the lock", PATIENCE, third)
        .await
        .unwrap()
        .expect("lock");
    third.release().await.unwrap();
    await_empty(&observer, &root).await;
}

/// A holder whose connection is cut while it releases, and restored within the session
/// timeout: `release()` waits for it, returns `Ok` with the node gone, and the next waiter
/// holds at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_on_a_cut_connection_waits_for_it_and_succeeds() {
    let cut = CutHolder::new("release-cut", SESSION_TIMEOUT).await;
    let releasing = tokio::spawn(cut.queue.guard.release());
    cut.proxy.restore();
    let released = bounded("the release", PATIENCE, releasing).await.unwrap();
    assert!(released.is_ok(), "release: {released:?}");
    the_next_holds(cut.queue.waiter, &cut.queue.observer, &cut.root).await;
}

/// A holder whose connection stays cut for longer than the servers keep its session:
/// `release()` returns `Ok` (the node went with its session) with the connection still
/// down; once it is back, nothing of the holder is left and the waiter holds. (The
/// removal ends either by its early answer or once the client learns that its session
/// ended: this test does not tell which.)
#[tokio::test(flavor = "multi_thread")]
async fn a_release_cut_for_longer_than_the_session_lives_returns() {
    let cut = CutHolder::new("release-cut-long", SESSION_TIMEOUT).await;
    let released = bounded("the release", PATIENCE, cut.queue.guard.release()).await;
    assert!(released.is_ok(), "release: {released:?}");
    cut.proxy.restore();
    the_next_holds(cut.queue.waiter, &cut.queue.observer, &cut.root).await;
}

/// A `release()` dropped while its removal waits for a cut connection (the awaiting task
/// runs the removal) leaves the rest to the session's runtime: once the connection is
/// back, the node is gone and the waiter holds.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_dropped_on_a_cut_connection_still_finishes() {
    let cut = CutHolder::new("release-dropped", LONG_SESSION_TIMEOUT).await;
    let (queue, root) = (cut.queue, cut.root);
    let dropped = tokio::time::timeout(Duration::from_millis(200), queue.guard.release()).await;
    assert!(
        dropped.is_err(),
        "released on a cut connection: {dropped:?}"
    );
    assert_eq!(children(&queue.observer, &root).await.len(), 2);
    cut.proxy.restore();
    the_next_holds(queue.waiter, &queue.observer, &root).await;
}

/// A `release()` awaited on another runtime than the session's, one without timers, on a
/// cut connection: the removal's timers are the session runtime's, so it waits for the
/// connection and succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_awaited_on_a_runtime_without_timers_finishes() {
    let cut = CutHolder::new("release-no-timers", LONG_SESSION_TIMEOUT).await;
    let (queue, root, proxy) = (cut.queue, cut.root, cut.proxy);
    let guard = queue.guard;
    let releasing = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime without timers");
        runtime.block_on(guard.release())
    });
    await_count(&queue.observer, &root, 2).await;
    proxy.restore();
    let released = bounded(
        "the release",
        PATIENCE,
        tokio::task::spawn_blocking(move || releasing.join()),
    )
    .await
    .unwrap()
    .expect("the releasing thread");
    assert!(released.is_ok(), "release: {released:?}");
    the_next_holds(queue.waiter, &queue.observer, &root).await;
}

/// `resign()` while the candidate's connection is down waits for it instead of answering
/// `ConnectionLoss`: the follower leads once it returns.
#[tokio::test(flavor = "multi_thread")]
async fn resign_on_a_cut_connection_waits_for_it_and_succeeds() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("resign-cut");
    let proxy = ensemble.proxy(0).await;
    let leading = tolerant_session(&proxy.address(), SESSION_TIMEOUT).await;
    let following = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = observer(&ensemble.connect_string()).await;
    let leader = join_election(&leading, &root, "a").await;
    bounded("a leads", PATIENCE, leader.leadership())
        .await
        .unwrap();
    let follower = join_election(&following, &root, "b").await;
    await_count(&observer, &root, 2).await;

    cut_off(&proxy, &leading).await;
    let resigning = tokio::spawn(leader.resign());
    proxy.restore();
    let resigned = bounded("resign", PATIENCE, resigning).await.unwrap();
    assert!(
        matches!(resigned, Ok(()) | Err(Error::Lost { .. })),
        "resign: {resigned:?}"
    );
    bounded("b leads", PATIENCE, follower.leadership())
        .await
        .unwrap();
    assert_eq!(follower.role(), Role::Leader);
    follower.resign().await.unwrap();
    await_empty(&observer, &root).await;
}

/// Cuts `session`'s connection at `proxy` and waits until it knows.
async fn cut_off(proxy: &Proxy, session: &Session) {
    proxy.cut();
    let mut events = session.events();
    await_watch("the session is suspended", &mut events, |event| {
        *event == SessionEvent::Suspended
    })
    .await;
}

/// A guard dropped on a thread without a tokio runtime still releases: the removal runs on
/// the session's runtime.
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_dropped_outside_a_runtime_releases() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("drop-off-runtime");
    let holder = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let other = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = observer(&ensemble.connect_string()).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    std::thread::spawn(move || drop(guard)).join().unwrap();
    let next = bounded(
        "another session takes the lock",
        PATIENCE,
        Mutex::new(&other, &root).unwrap().lock(),
    )
    .await
    .expect("lock");
    next.release().await.unwrap();
    await_empty(&observer, &root).await;
}

/// A guard dropped on a thread without a tokio runtime while its connection is cut: the
/// removal waits for the connection on the session's runtime (no panic for want of a
/// timer), and the node is gone once the connection is back.
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_dropped_outside_a_runtime_on_a_cut_connection_releases() {
    let cut = CutHolder::new("drop-off-runtime-cut", LONG_SESSION_TIMEOUT).await;
    let (queue, root) = (cut.queue, cut.root);
    let guard = queue.guard;
    let dropped = std::thread::spawn(move || drop(guard)).join();
    assert!(dropped.is_ok(), "dropping the guard panicked");
    cut.proxy.restore();
    the_next_holds(queue.waiter, &queue.observer, &root).await;
}

/// A share of a re-entered hold released after the lock was lost says so, like the last.
#[tokio::test(flavor = "multi_thread")]
async fn a_reentered_share_released_after_a_loss_says_lost() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("reenter-lost");
    let holder = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = observer(&ensemble.connect_string()).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let share = guard.reenter();
    observer.delete(guard.node(), None).await.unwrap();
    bounded("the loss is seen", PATIENCE, guard.lost()).await;
    let released = share.release().await;
    assert!(matches!(released, Err(Error::Lost { .. })), "{released:?}");
    let released = guard.release().await;
    assert!(matches!(released, Err(Error::Lost { .. })), "{released:?}");
    await_empty(&observer, &root).await;
}

/// A dropped guard's delete goes out before anything its session sends next: the same
/// session's `try_lock()` right after the drop never finds the old node ahead of it.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_guard_is_gone_for_its_sessions_next_request() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("drop-then-try");
    let holder = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = observer(&ensemble.connect_string()).await;
    let mutex = Mutex::new(&holder, &root).unwrap();
    let mut guard = mutex.lock().await.unwrap();
    for round in 0..100 {
        drop(guard);
        guard = mutex
            .try_lock()
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("round {round}: the dropped guard's node was ahead"));
    }
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}

/// Nothing is written into the lock path's own data: neither a holder that entered first
/// nor one that had waited leaves anything there as it goes, so the path is the user's.
#[tokio::test(flavor = "multi_thread")]
async fn no_release_writes_into_the_lock_path() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("no-mark");
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let observer = live_client(&a);
    let first = Mutex::new(&a, &root).unwrap().lock().await.unwrap();
    let waiter = Mutex::new(&b, &root).unwrap();
    let waiter = tokio::spawn(async move { waiter.lock().await.unwrap() });
    await_count(&observer, &root, 2).await;
    first.release().await.unwrap();
    let second = bounded("the waiter acquires", PATIENCE, waiter)
        .await
        .unwrap();
    second.release().await.unwrap();
    let (data, stat) = observer.get_data(&root).await.unwrap();
    assert!(data.is_empty(), "a release wrote {data:?}");
    assert_eq!(stat.version, 0, "the lock path's data was written");
    await_empty(&observer, &root).await;
}

/// How the release of a holder that waited changes the root's child version (cversion): 3
/// with the signal (create, delete signal; delete node), 1 for a plain delete.
async fn release_cversion_step(
    builder: zk_recipes::SessionBuilder,
    hosts: &str,
    root: &str,
) -> i32 {
    let h = builder.clone().connect(hosts).await.unwrap();
    let w = builder.connect(hosts).await.unwrap();
    let holder = Mutex::new(&h, root).unwrap().lock().await.unwrap();
    let mutex = Mutex::new(&w, root).unwrap();
    let waiter = tokio::spawn(async move { mutex.lock().await.unwrap() });
    let operator = digest_observer(hosts, "svc", "pw").await;
    await_count(&operator, root, 2).await;
    holder.release().await.unwrap();
    let guard = bounded("W holds", PATIENCE, waiter).await.unwrap();
    let (_, before) = operator.get_data(root).await.unwrap();
    guard.release().await.unwrap();
    let (_, after) = operator.get_data(root).await.unwrap();
    assert!(operator.list_children(root).await.unwrap().is_empty());
    after.cversion - before.cversion
}

/// ACLs: with creator-only and creator-all-world-read nodes the release of a holder that
/// waited still signals in one transaction; with a root whose ACL refuses writes, it
/// signals without the mark and leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_under_acls_signals_where_it_can_and_leaves_nothing() {
    use zk_recipes::NodeAcl;
    use zookeeper_client::{Acl, Acls, CreateMode, Permission};
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let authed = || {
        Session::builder()
            .session_timeout(LONG_SESSION_TIMEOUT)
            .digest_auth("svc", "pw")
    };
    for acl in [
        NodeAcl::Open,
        NodeAcl::CreatorOnly,
        NodeAcl::CreatorAllWorldRead,
    ] {
        let root = unique_root("handoff-acl");
        let step = release_cversion_step(authed().node_acl(acl), &hosts, &root).await;
        assert_eq!(step, 3, "{acl:?}: the release did not signal");
    }
    // A root made by an operator: anyone may create, delete and read, no one may write.
    let root = unique_root("handoff-acl-nowrite");
    let operator = observer(&hosts).await;
    let acls = [Acl::new_const(
        Permission::CREATE | Permission::DELETE | Permission::READ,
        "world",
        "anyone",
    )];
    operator
        .create(
            &root,
            b"",
            &CreateMode::Persistent.with_acls(Acls::new(&acls)),
        )
        .await
        .unwrap();
    let step = release_cversion_step(authed(), &hosts, &root).await;
    assert_eq!(
        step, 3,
        "a root that refuses writes: the signal without the mark"
    );
    let (data, _) = operator.get_data(&root).await.unwrap();
    assert!(data.is_empty(), "no mark in a root that refuses writes");
}

/// ZooKeeper's opcode of a request to remove watches.
const REMOVE_WATCHES: i32 = 18;

/// A holder that got the lock by hand-off watches its node with the watch it set while it
/// waited. Released or dropped, it keeps that watch until it fires as the node goes: its
/// session never sends a request to remove it (it used to, once or twice per hand-off:
/// the watch was dropped unfired, and its notification could still come).
#[tokio::test(flavor = "multi_thread")]
async fn a_holder_by_hand_off_leaves_no_watch_to_remove() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("no-watch-to-remove");
    let admin = observer(&ensemble.connect_string()).await;
    let first = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let waiter = session(&proxy.address(), SESSION_TIMEOUT).await;
    for release in [true, false] {
        let held = Mutex::new(&first, &root).unwrap().lock().await.unwrap();
        let mutex = Mutex::new(&waiter, &root).unwrap();
        let next = tokio::spawn(async move { mutex.lock().await });
        await_count(&admin, &root, 2).await;
        // All three watches of the waiter are set before the release (its blocker's node,
        // its own, then the signal, in one round trip): a release that the servers order
        // between them is a hand-off heard without its signal, which rightly takes the
        // one-request way and removes the signal's watch that can no longer fire.
        let signal = format!("{}.left-first", held.node());
        ensemble.await_watcher(&signal, &session_id(&waiter)).await;
        held.release().await.unwrap();
        let guard = bounded("the hand-off", PATIENCE, next)
            .await
            .unwrap()
            .unwrap();
        if release {
            guard.release().await.unwrap();
        } else {
            drop(guard);
        }
        await_empty(&admin, &root).await;
        // One more entry and release on the waiter's session: whatever it sent before is
        // ahead of it.
        let again = Mutex::new(&waiter, &root).unwrap().lock().await.unwrap();
        again.release().await.unwrap();
        let sent = proxy.requests();
        assert!(
            !sent.contains(&REMOVE_WATCHES),
            "release: {release}; the waiter's session sent {sent:?}"
        );
    }
    await_empty(&admin, &root).await;
}
