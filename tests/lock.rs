//! The mutex against real ZooKeeper servers started by the harness.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_harness::{
    await_children, await_count, await_empty, await_queue, await_watch, bounded, children,
    expire_session, live_client, name, observer, session, tolerant_session, unique_root, Ensemble,
    PATIENCE,
};
use zk_recipes::{DistributedLock, Error, Loss, Mutex, Session, SessionEvent};
use zookeeper_client::{Acls, Client, CreateMode};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// 16 contenders over 4 sessions, 100 acquisitions each: never two inside, tokens strictly
/// increasing in order of entry.
async fn exclusion(ensemble: &Ensemble) {
    const SESSIONS: usize = 4;
    const PER_SESSION: usize = 4;
    const ROUNDS: usize = 100;
    let root = unique_root("exclusion");
    let inside = Arc::new(AtomicUsize::new(0));
    let entries = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut sessions = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..SESSIONS {
        let session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
        for _ in 0..PER_SESSION {
            let mutex = Mutex::new(&session, &root).unwrap();
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
        sessions.push(session);
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
    await_empty(&live_client(&sessions[0]), &root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exclusion_on_standalone() {
    exclusion(Ensemble::shared(1).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exclusion_on_ensemble() {
    exclusion(Ensemble::shared(3).await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn waiters_acquire_in_order_of_arrival() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("fifo");
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let observer = live_client(&a);
    let holder = Mutex::new(&a, &root).unwrap().lock().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..8 {
        let session = if i % 2 == 0 { &a } else { &b };
        let mutex = Mutex::new(session, &root).unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }));
        await_count(&observer, &root, i + 2).await;
    }
    holder.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
    await_empty(&observer, &root).await;
}

/// Waits until the server's watches under `root` are exactly: the holder (`queue[0]`) on its
/// own node; every waiter on its predecessor and on its own node; and every waiter from
/// `queue[signalled]` on also on its predecessor's left-first signal (one whose predecessor
/// was first when it entered needs none). Returns their number. Watches are set in the
/// background after a hand-off and the server offers no event for them, so this polls.
async fn settle_watches(
    ensemble: &Ensemble,
    root: &str,
    queue: &[String],
    signalled: usize,
) -> usize {
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for (i, node) in queue.iter().enumerate() {
        *expected.entry(node.clone()).or_default() += 1;
        if let Some(predecessor) = i.checked_sub(1).map(|p| &queue[p]) {
            *expected.entry(predecessor.clone()).or_default() += 1;
            if i >= signalled {
                expected.insert(format!("{predecessor}.left-first"), 1);
            }
        }
    }
    ensemble.await_watched_under(root, &expected).await;
    expected.values().sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_herd_each_waiter_watches_only_its_neighbours() {
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

/// A hand-off costs no request: a waiter whose requests are all held back (its proxy muted:
/// it still hears the server) takes the lock when its blocker releases, both when that
/// blocker held as the waiter entered and when it became first later (then it signals).
#[tokio::test(flavor = "multi_thread")]
async fn a_hand_off_needs_no_request() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("hand-off");
    let holder_session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = live_client(&holder_session);
    let holder = Mutex::new(&holder_session, &root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let proxies = [ensemble.proxy(0).await, ensemble.proxy(0).await];
    let (acquired_tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
    let (release_tx, _) = tokio::sync::broadcast::channel::<usize>(2);
    let mut waiters = Vec::new();
    for (i, proxy) in proxies.iter().enumerate() {
        let session = session(&proxy.address(), SESSION_TIMEOUT).await;
        let mutex = Mutex::new(&session, &root).unwrap();
        let (acquired, mut release) = (acquired_tx.clone(), release_tx.subscribe());
        waiters.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            acquired.send(i).unwrap();
            while release.recv().await.unwrap() != i {}
            guard.release().await.unwrap();
            drop(session);
        }));
        await_count(&observer, &root, i + 2).await;
    }
    let queue: Vec<String> = children(&observer, &root)
        .await
        .iter()
        .map(|n| format!("{root}/{n}"))
        .collect();
    settle_watches(&ensemble, &root, &queue, 1).await;

    // Each waiter in turn, all its requests held back, takes the lock from the one ahead.
    let mut holder = Some(holder);
    for (i, proxy) in proxies.iter().enumerate() {
        proxy.mute();
        match holder.take() {
            Some(holder) => holder.release().await.unwrap(),
            None => drop(release_tx.send(i - 1).unwrap()),
        }
        let next = bounded("the muted waiter acquires", PATIENCE, acquired.recv()).await;
        assert_eq!(next, Some(i));
        proxy.restore();
    }

    release_tx.send(1).unwrap();
    for waiter in waiters {
        bounded("a waiter finishes", PATIENCE, waiter)
            .await
            .unwrap();
    }
    await_empty(&observer, &root).await;
}

/// A waiter hears its own node's deletion (it watches its own node): it enters the queue
/// again at once, behind the holder, instead of waiting for the holder to leave first.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_whose_node_is_deleted_queues_again_at_once() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("requeue");
    let holder_session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = live_client(&holder_session);
    let holder = Mutex::new(&holder_session, &root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let waiting = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let waiter_id = live_client(&waiting).session_id().to_string();
    let mutex = Mutex::new(&waiting, &root).unwrap();
    let waiter = tokio::spawn(async move {
        let guard = mutex.lock().await.unwrap();
        let node = guard.node().to_owned();
        guard.release().await.unwrap();
        node
    });
    let deleted = format!("{root}/{}", await_count(&observer, &root, 2).await[1]);
    ensemble.await_watcher(&deleted, &waiter_id).await;
    observer.delete(&deleted, None).await.unwrap();

    let queue = await_queue(&observer, &root, "the waiter queued again", |names| {
        names.len() == 2 && format!("{root}/{}", names[1]) != deleted
    })
    .await;
    assert_eq!(format!("{root}/{}", queue[0]), holder.node());
    assert!(!holder.is_lost());
    holder.release().await.unwrap();
    let held = bounded("the waiter acquires", PATIENCE, waiter)
        .await
        .unwrap();
    assert_eq!(held, format!("{root}/{}", queue[1]));
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

/// A lock held on one session, another `Mutex` on it from a second session, an observer.
struct Contested {
    root: String,
    sessions: (Session, Session),
    observer: Client,
    holder: zk_recipes::MutexGuard,
    holder_name: String,
    other: Mutex,
}

async fn contested(name_: &str) -> Contested {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root(name_);
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let holder = Mutex::new(&a, &root).unwrap().lock().await.unwrap();
    Contested {
        observer: live_client(&a),
        holder_name: name(holder.node()).to_owned(),
        other: Mutex::new(&b, &root).unwrap(),
        holder,
        root,
        sessions: (a, b),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn try_lock_never_waits_and_leaves_nothing() {
    let Contested {
        root,
        sessions: (_a, b),
        observer,
        holder,
        holder_name,
        other,
    } = contested("try").await;

    let tried = bounded(
        "try_lock does not wait on the holder",
        PATIENCE,
        other.try_lock(),
    )
    .await;
    assert!(tried.unwrap().is_none());
    assert_eq!(children(&observer, &root).await, [holder_name.as_str()]);

    let started = Instant::now();
    assert!(other
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(children(&observer, &root).await, [holder_name.as_str()]);

    // Through the trait object too.
    let dynamic: Arc<dyn DistributedLock> = Arc::new(Mutex::new(&b, &root).unwrap());
    assert!(dynamic.try_lock().await.unwrap().is_none());
    assert_eq!(children(&observer, &root).await, [holder_name.as_str()]);

    holder.release().await.unwrap();
    let guard = other.try_lock().await.unwrap().expect("free lock");
    guard.release().await.unwrap();
    let guard = dynamic.try_lock_for(PATIENCE).await.unwrap().expect("free");
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelled_waits_leave_no_node() {
    let Contested {
        root,
        sessions: _sessions,
        observer,
        holder,
        holder_name,
        other,
    } = contested("cancel").await;

    // A waiting lock() under tokio::time::timeout.
    let waited = tokio::time::timeout(Duration::from_millis(300), other.lock()).await;
    assert!(waited.is_err(), "acquired a held lock");
    await_children(&observer, &root, &[&holder_name]).await;

    // A lock() future dropped at every stage: before the create was sent, with the
    // create's reply outstanding, while listing, while watching.
    for micros in (0..3000).step_by(150) {
        let attempt = tokio::time::timeout(Duration::from_micros(micros), other.lock()).await;
        assert!(attempt.is_err());
    }
    await_children(&observer, &root, &[&holder_name]).await;

    // A future dropped by select! while it waits.
    let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
    let waiter = tokio::spawn(async move {
        tokio::select! {
            _ = other.lock() => panic!("acquired a held lock"),
            _ = cancelled => {}
        }
    });
    await_count(&observer, &root, 2).await;
    cancel.send(()).unwrap();
    waiter.await.unwrap();
    await_children(&observer, &root, &[&holder_name]).await;

    holder.release().await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_leaving_mid_queue_keeps_the_order() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("middle");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = live_client(&s);
    let holder = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let spawn_waiter = |id: &'static str| {
        let mutex = Mutex::new(&s, &root).unwrap();
        let order = order.clone();
        tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            order.lock().unwrap().push(id);
            guard.release().await.unwrap();
        })
    };
    let first = spawn_waiter("first");
    await_count(&observer, &root, 2).await;
    let (leave, left) = tokio::sync::oneshot::channel::<()>();
    let middle = {
        let mutex = Mutex::new(&s, &root).unwrap();
        tokio::spawn(async move {
            tokio::select! {
                _ = mutex.lock() => panic!("the middle waiter acquired"),
                _ = left => {}
            }
        })
    };
    await_count(&observer, &root, 3).await;
    let last = spawn_waiter("last");
    await_count(&observer, &root, 4).await;
    leave.send(()).unwrap();
    middle.await.unwrap();
    await_count(&observer, &root, 3).await;
    holder.release().await.unwrap();
    first.await.unwrap();
    last.await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["first", "last"]);
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_when_the_node_is_deleted() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("deleted");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    assert!(!guard.is_lost());
    let admin = observer(&ensemble.connect_string()).await;
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
    await_empty(&admin, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_on_session_expiry_and_the_next_waiter_acquires() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("expiry");
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let observer = live_client(&b);
    let guard = Mutex::new(&a, &root).unwrap().lock().await.unwrap();
    let next = Mutex::new(&b, &root).unwrap();
    let waiter = tokio::spawn(async move { next.lock().await.map(|g| (g.fencing_token(), g)) });
    await_count(&observer, &root, 2).await;

    expire_session(&ensemble.connect_string(), live_client(&a).session()).await;
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
    await_empty(&observer, &root).await;
}

/// Re-entrancy is explicit, through the guard: `reenter` shares the hold, and the node goes
/// with the last guard; a second `lock()` through the same value is another contender.
#[tokio::test(flavor = "multi_thread")]
async fn reentrancy_goes_through_the_guard() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("reentrant");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = live_client(&s);
    let mutex = Mutex::new(&s, &root).unwrap();
    let outer = mutex.lock().await.unwrap();
    let inner = outer.reenter();
    assert_eq!(inner.node(), outer.node());
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert!(mutex.try_lock().await.unwrap().is_none());
    assert!(mutex
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    inner.release().await.unwrap();
    assert_eq!(children(&observer, &root).await, [name(outer.node())]);
    outer.release().await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_and_leaves_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let admin = live_client(&s);
    for path in [
        "",
        "locks",
        "/locks/",
        "/a//b",
        "/a/../b",
        "/a\0b",
        "/zookeeper/x",
    ] {
        match Mutex::new(&s, path) {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }

    // A lock root under an ephemeral node.
    let parent = unique_root("ephemeral");
    admin
        .create(
            &parent,
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let under = format!("{parent}/lock");
    match Mutex::new(&s, &under).unwrap().try_lock().await {
        Err(Error::EphemeralParent { path }) => assert_eq!(path, under),
        other => panic!("lock under an ephemeral: {other:?}"),
    }
    await_empty(&admin, &parent).await;

    // A root whose ACL denies create.
    let denied = unique_root("denied");
    admin
        .create(
            &denied,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_read()),
        )
        .await
        .unwrap();
    match Mutex::new(&s, &denied).unwrap().lock().await {
        Err(Error::NoAuth { path }) => assert_eq!(path, denied),
        other => panic!("lock on a read-only root: {other:?}"),
    }
    await_empty(&admin, &denied).await;
    admin.delete(&denied, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_parents_are_created_as_containers() {
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/a/b/lock", unique_root("parents"));
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let admin = live_client(&s);
    let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    let (_, stat) = admin.get_data(&root).await.unwrap();
    assert_eq!(stat.ephemeral_owner, 0);
    guard.release().await.unwrap();
    await_empty(&admin, &root).await;
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

/// A waiting `lock()` is stored by the task that awaits it, for as long as it waits: with
/// thousands of waiters its size is their memory. It holds the whole waiting state (the
/// contender, the watch on its blocker): 632 bytes after the queue redesign, whose waiters
/// keep no other allocation than their node's and blocker's paths (496 bytes before it,
/// with part of the waiting state elsewhere). A regression past the bound fails here, not
/// only in the benchmark.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_lock_future_stays_small() {
    const BOUND: usize = 640;
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&s, &unique_root("size")).unwrap();
    let size = std::mem::size_of_val(&mutex.lock());
    eprintln!("lock() future: {size} bytes");
    assert!(size <= BOUND, "lock() future is {size} bytes, over {BOUND}");
}

/// "At most no time" still tries once, as `flock -w 0` does: a free lock is taken every
/// time with a zero or a 1 ms timeout, and a held one is refused at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_too_short_to_wait_still_tries_once() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("zero-timeout");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&s, &root).unwrap();
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
    await_empty(&live_client(&s), &root).await;
}
