//! The hand-off that needs no request, under attack: watches left behind by waiters that
//! gave up or were cancelled, a three-server ensemble with connections cut, muted and
//! trickling under a nemesis, and releases under ACLs (the safety regressions are in
//! `safety.rs`). Every test ends with nothing left under its root.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zk_harness::{
    await_count, await_empty, bounded, observer, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Mutex, RwLock, Session};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Server-side watches after waiters gave up (`try_lock_for` timing out), were cancelled
/// (a dropped `lock()` future), after a middle waiter gave up under a signalled successor,
/// and after hand-offs: once everything is released, no data watch is left on the server
/// (the sessions stay open).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_watch_left_behind() {
    let ensemble = Ensemble::start(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("handoff-watch-leak");
    let sessions = [
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
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
async fn rwlock_no_watch_left_behind() {
    let ensemble = Ensemble::start(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("handoff-rw-leak");
    let sessions = [
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
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

/// Chaos on a 3-server ensemble: 6 contenders on 3 sessions, each session through a proxy
/// to its own server, loop over short sections while the nemesis deletes waiters' nodes
/// (never a holder's) and writes into any node, and the proxies are cut, muted and made to
/// trickle in turn. No two trusted sections overlap; all make progress; the root empties.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_on_three_servers() {
    use zk_harness::history::History;
    use zk_harness::nemesis::{spawn_nemesis, Arena, Entrant, Waits};
    const RUN: Duration = Duration::from_secs(12);
    let ensemble = Ensemble::start(3).await;
    let root = unique_root("handoff-chaos");
    let proxies = [
        ensemble.proxy(0).await,
        ensemble.proxy(1).await,
        ensemble.proxy(2).await,
    ];
    let history = History::new();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut sessions = Vec::new();
    let mut loops = Vec::new();
    for (s, proxy) in proxies.iter().enumerate() {
        let session = session(&proxy.address(), Duration::from_secs(6)).await;
        for c in 0..2 {
            let mutex = Mutex::new(&session, &root).unwrap();
            loops.push(
                Entrant {
                    who: format!("s{s}c{c}"),
                    session: &session,
                    root: &root,
                    rounds: usize::MAX,
                    history: history.clone(),
                    stop: stopped.clone(),
                }
                .run(move || {
                    let mutex = mutex.clone();
                    async move { mutex.lock().await }
                }),
            );
        }
        sessions.push(session);
    }
    let nemesis = spawn_nemesis(
        observer(&ensemble.connect_string()).await,
        root.clone(),
        vec![Arena {
            child: "",
            waits: Waits::BehindAny,
        }],
        0x7e57_0bad_cafe,
        stopped.clone(),
    );
    let started = Instant::now();
    let mut i = 0usize;
    while started.elapsed() < RUN {
        let proxy = &proxies[i % 3];
        match i % 4 {
            0 => {
                proxy.cut();
                tokio::time::sleep(Duration::from_millis(300)).await;
                proxy.trickle();
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
            1 => {
                proxy.mute();
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            2 => {
                proxy.trickle();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
        proxy.restore();
        tokio::time::sleep(Duration::from_millis(200)).await;
        i += 1;
    }
    // Every contender makes progress once the faults stop.
    let before = history.entries();
    bounded("a section after the faults", PATIENCE, async {
        while history.entries() == before {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    stop.send_replace(true);
    let havoc = bounded("the nemesis stops", PATIENCE, nemesis)
        .await
        .unwrap();
    let mut errors = Vec::new();
    for l in loops {
        errors.extend(
            bounded("a contender stops", PATIENCE, l)
                .await
                .unwrap()
                .errors,
        );
    }
    let sections = history.sections();
    let overlaps = history.trusted_overlaps();
    eprintln!(
        "chaos: {} sections ({} untrusted), nemesis {havoc:?}, {} errors {:?}",
        sections.len(),
        sections.iter().filter(|s| !s.trusted).count(),
        errors.len(),
        &errors[..errors.len().min(5)],
    );
    assert!(
        overlaps.is_empty(),
        "{} overlapping trusted sections, first: {:?}",
        overlaps.len(),
        overlaps.first()
    );
    let operator = observer(&ensemble.connect_string()).await;
    bounded(
        "the root empties",
        Duration::from_secs(10),
        await_empty(&operator, &root),
    )
    .await;
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
    let operator = zookeeper_client::Client::connector()
        .with_auth("digest", b"svc:pw")
        .connect(hosts)
        .await
        .unwrap();
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
async fn release_under_acls() {
    use zk_recipes::NodeAcl;
    use zookeeper_client::{Acl, Acls, CreateMode, Permission};
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let authed = || {
        Session::builder()
            .session_timeout(SESSION_TIMEOUT)
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
