//! Hand-off: when a holder goes, the next waiter holds on what it heard, with no request in
//! the common case (the rule: the module doc of `src/queue/mod.rs`), and a notification is a
//! hint, never proof.
//!
//! * A hand-off needs no request to the servers.
//! * A write into the holder's node neither lets the next waiter in nor leaks the node.
//! * Hand-offs stay exclusive on a 3-server ensemble whose connections are cut, muted and
//!   slowed under a nemesis.
//!
//! That the hand-off rests on notifications arriving in order is pinned by
//! `notification_order.rs`; that a contender holds only while its own node exists, by
//! `own_node.rs`.

use std::time::{Duration, Instant};

use zk_harness::{
    await_count, await_empty, bounded, children, live_client, name, observer, session, session_id,
    settle_watches, unique_root, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::Mutex;

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a longer one.
const LONG_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Promptness required where the bug takes seconds or forever: generous on a loaded machine.
const PROMPT: Duration = Duration::from_secs(1);

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

/// H holds, W waits. Someone writes `__REVOKE__` into H's node, as Curator's
/// Revoker does. W does not take the lock while H holds; H's lock is not lost (a write is
/// not a loss); `H.release()` returns `Ok(())` and deletes H's node; then W acquires, and
/// after W released a third contender gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_data_write_to_the_holder_neither_lets_the_next_in_nor_leaks_the_node() {
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "revoke", 3, LONG_SESSION_TIMEOUT).await;
    let (root, revoker) = (&fx.root, &fx.observer);
    let [h, w, t] = [&fx.sessions[0], &fx.sessions[1], &fx.sessions[2]];
    let holder = Mutex::new(h, root).unwrap().lock().await.unwrap();
    let mut waiter = {
        let mutex = Mutex::new(w, root).unwrap();
        tokio::spawn(async move { mutex.lock().await })
    };
    await_count(revoker, root, 2).await;
    ensemble.await_watcher(holder.node(), &session_id(w)).await;

    let (_, _, written) = revoker.get_and_watch_data(holder.node()).await.unwrap();
    revoker
        .set_data(holder.node(), b"__REVOKE__", None)
        .await
        .unwrap();
    written.changed().await;
    // The waiter and the holder's loss watch have heard of the write by now: W gets a
    // bounded chance to take over, then H's loss is looked at.
    let w_took_over = tokio::time::timeout(PROMPT, &mut waiter).await.is_ok();
    let h_loss = tokio::time::timeout(Duration::ZERO, holder.lost())
        .await
        .ok();
    assert!(
        !w_took_over && h_loss.is_none() && !holder.is_lost(),
        "after a data write to H's node: W's lock() returned while H holds: {w_took_over}; \
         H's lost(): {h_loss:?}, is_lost(): {}",
        holder.is_lost()
    );

    let h_node = holder.node().to_owned();
    let released = holder.release().await;
    assert!(
        released.is_ok(),
        "H's release after a data write: {released:?}"
    );
    let left = children(revoker, root).await;
    assert!(
        !left.iter().any(|n| n == name(&h_node)),
        "H's node outlived its release: {left:?}"
    );
    let w_guard = bounded("W acquires once H released", PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(!w_guard.is_lost());
    w_guard.release().await.unwrap();
    let third = Mutex::new(t, root).unwrap();
    let taken = third.try_lock_for(Duration::from_secs(3)).await.unwrap();
    let Some(third_guard) = taken else {
        panic!(
            "a third contender could not take the free lock within 3 s; the root holds {:?}",
            children(revoker, root).await
        );
    };
    third_guard.release().await.unwrap();
    fx.nothing_left().await;
}

/// Chaos on a 3-server ensemble: 6 contenders on 3 sessions, each session through a proxy
/// to its own server, loop over short sections while the nemesis deletes waiters' nodes
/// (never a holder's) and writes into any node, and the proxies are cut, muted and made to
/// trickle in turn. No two trusted sections overlap; all make progress; the root empties.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hand_offs_stay_exclusive_through_cut_muted_and_trickling_connections() {
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
