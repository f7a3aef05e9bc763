//! Locks on several keys at once (`KeyedMutex::lock_all`, `MultiLock`), against a real
//! ZooKeeper server: two processes taking overlapping sets in opposite orders never
//! deadlock and never overlap; giving up part-way (a timeout, a try, a dropped future)
//! leaves nothing; the guard's fenced writes fail when any one of its nodes is gone; the
//! loss of one lock is the loss of the guard; a key given twice is locked once.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use zk_harness::peers::Peer;
use zk_harness::{
    await_count, await_empty, await_queue, bounded, child_test, children, name, session, Ensemble,
    Fixture, PATIENCE,
};
use zk_recipes::{Error, KeyedMutex, Loss, MultiLock, Mutex, Written};
use zookeeper_client::{Acls, CreateMode};

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Tells the child process what to do: `<hosts> <root> <keys, comma-separated> <rounds>`.
const CHILD: &str = "ZK_RECIPES_MULTI_LOCKER";

/// Rounds per process in the two-process test.
const ROUNDS: usize = 1000;

/// The child: takes the keys' locks together `rounds` times; inside, creates the ephemeral
/// `<root>/inside` (it exists: another holder is inside too), reads `<root>/count`, writes
/// it plus one and deletes `inside`, all through the guard's fenced writes. Prints
/// `done <rounds> <overlaps>`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by overlapping_sets_in_two_processes_never_deadlock_nor_overlap"]
async fn multi_locker() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    let args: Vec<&str> = what.split(' ').collect();
    let [hosts, root, keys, rounds] = args[..] else {
        panic!("bad arguments {what:?}");
    };
    let keys: Vec<&str> = keys.split(',').collect();
    let rounds: usize = rounds.parse().expect("rounds");
    let session = session(hosts, SESSION_TIMEOUT).await;
    let client = session.client().expect("a client");
    let locks = KeyedMutex::new(&session, root).unwrap();
    let (inside, count) = (format!("{root}/inside"), format!("{root}/count"));
    println!("ready");
    let mut overlaps = 0;
    for _ in 0..rounds {
        let guard = locks.lock_all(&keys).await.expect("lock_all");
        let entered = guard
            .fenced()
            .create(&inside, b"", CreateMode::Ephemeral)
            .commit()
            .await;
        match entered {
            Ok(_) => {}
            Err(Error::FencedOpFailed { .. }) => overlaps += 1,
            Err(err) => panic!("enter: {err}"),
        }
        let (data, _) = client.get_data(&count).await.expect("read the count");
        let n: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
        tokio::task::yield_now().await;
        let mut leave = guard
            .fenced()
            .set_data(&count, (n + 1).to_string().as_bytes(), None);
        if entered.is_ok() {
            leave = leave.delete(&inside, None);
        }
        leave.commit().await.expect("leave");
        guard.release().await.expect("release");
    }
    println!("done {rounds} {overlaps}");
    let _ = session.close().await;
}

/// A fixture of `sessions` sessions on the shared server, whose root keeps the keys `kept`.
async fn fixture(name: &str, sessions: usize, kept: &'static [&'static str]) -> Fixture {
    let ensemble = Ensemble::shared(1).await;
    Fixture::new(ensemble, name, sessions, SESSION_TIMEOUT)
        .await
        .keeping(kept)
}

/// Two processes take the locks of `{a, b}` and `{b, a}` (given in opposite orders)
/// [`ROUNDS`] times each, at once: both finish (no deadlock), never two inside at once,
/// and the count they read-modify-write under the locks is exact.
#[tokio::test(flavor = "multi_thread")]
async fn overlapping_sets_in_two_processes_never_deadlock_nor_overlap() {
    let fx = fixture("multi-two", 0, &["a", "b"]).await;
    let count = format!("{}/count", fx.root);
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    fx.observer.mkdir(&fx.root, &persistent).await.unwrap();
    fx.observer.create(&count, b"0", &persistent).await.unwrap();
    let started = Instant::now();
    let mut children = Vec::new();
    for keys in ["a,b", "b,a"] {
        let args = format!("{} {} {keys} {ROUNDS}", fx.hosts, fx.root);
        children.push(child_test(module_path!(), "multi_locker", CHILD, &args));
    }
    let mut outputs = Vec::new();
    for child in &mut children {
        let stdout = child.stdout.take().expect("stdout");
        outputs.push(BufReader::new(stdout).lines());
    }
    for lines in &mut outputs {
        let mut done = None;
        while done.is_none() {
            let line = bounded(
                "a locker finishes (no deadlock)",
                Duration::from_secs(180),
                lines.next_line(),
            )
            .await
            .expect("the locker's output")
            .expect("the locker ended without finishing");
            done = line.strip_prefix("done ").map(str::to_owned);
        }
        assert_eq!(done.as_deref(), Some(&*format!("{ROUNDS} 0")), "overlaps");
    }
    for child in &mut children {
        let exited = bounded("the locker exits", PATIENCE, child.wait()).await;
        assert!(exited.expect("wait").success());
    }
    eprintln!(
        "{} rounds in two processes took {:?}",
        2 * ROUNDS,
        started.elapsed()
    );
    let (data, _) = fx.observer.get_data(&count).await.unwrap();
    assert_eq!(data, (2 * ROUNDS).to_string().as_bytes(), "lost updates");
    fx.observer.delete(&count, None).await.unwrap();
    fx.nothing_left().await;
}

/// A fixture whose root holds the keys `a` and `b`, and a `KeyedMutex` on it for each of
/// its two sessions: the one that wants several keys, and another that holds one.
async fn two_keys(name: &str) -> (Fixture, KeyedMutex, KeyedMutex) {
    let fx = fixture(name, 2, &["a", "b"]).await;
    let wanting = KeyedMutex::new(&fx.sessions[0], &fx.root).unwrap();
    let holding = KeyedMutex::new(&fx.sessions[1], &fx.root).unwrap();
    (fx, wanting, holding)
}

/// A timeout after the first lock was taken, a try that finds the second held, and a
/// dropped `lock_all()` waiting for the second all give back the first: nothing of theirs
/// is left under either key.
#[tokio::test(flavor = "multi_thread")]
async fn giving_up_part_way_leaves_nothing() {
    let (fx, wanting, holding) = two_keys("multi-give-up").await;
    let (a, b) = (format!("{}/a", fx.root), format!("{}/b", fx.root));
    let b_held = holding.lock("b").await.unwrap();
    let holder = [name(b_held.node()).to_owned()];

    let asked = Instant::now();
    let timeout = Duration::from_millis(500);
    let got = wanting
        .try_lock_all_for(&["b", "a"], timeout)
        .await
        .unwrap();
    assert!(got.is_none(), "took b while it was held");
    assert!(asked.elapsed() >= timeout, "gave up early");
    assert!(children(&fx.observer, &a).await.is_empty(), "a was kept");
    assert_eq!(children(&fx.observer, &b).await, holder);

    assert!(wanting.try_lock_all(&["a", "b"]).await.unwrap().is_none());
    assert!(children(&fx.observer, &a).await.is_empty(), "a was kept");
    assert_eq!(children(&fx.observer, &b).await, holder);

    let waiting = {
        let wanting = wanting.clone();
        tokio::spawn(async move { wanting.lock_all(&["a", "b"]).await })
    };
    await_count(&fx.observer, &a, 1).await;
    await_count(&fx.observer, &b, 2).await;
    waiting.abort();
    await_empty(&fx.observer, &a).await;
    await_queue(&fx.observer, &b, "the holder alone", |now| now == holder).await;
    let a_free = holding.try_lock("a").await.unwrap().expect("a is free");

    a_free.release().await.unwrap();
    b_held.release().await.unwrap();
    fx.nothing_left().await;
}

/// A lock taken that is lost while a later one is waited for (its node deleted) is not
/// handed out lost: the acquisition gives back what it took and starts again from the
/// first lock, and the guard it returns holds a new node of that lock, intact.
#[tokio::test(flavor = "multi_thread")]
async fn a_lock_lost_while_waiting_for_the_next_is_taken_again() {
    let (fx, wanting, holding) = two_keys("multi-again").await;
    let (a, b) = (format!("{}/a", fx.root), format!("{}/b", fx.root));
    let b_held = holding.lock("b").await.unwrap();
    let waiting = tokio::spawn(async move { wanting.lock_all(&["a", "b"]).await });
    let first = await_count(&fx.observer, &a, 1).await;
    await_count(&fx.observer, &b, 2).await;
    fx.observer
        .delete(&format!("{a}/{}", first[0]), None)
        .await
        .unwrap();
    // Taken again: a new node under `a`, while `b` is still held.
    let again = await_queue(&fx.observer, &a, "a taken again", |now| {
        now.len() == 1 && now[0] != first[0]
    })
    .await;
    b_held.release().await.unwrap();
    let guard = bounded("lock_all after b's release", PATIENCE, waiting)
        .await
        .expect("lock_all task")
        .expect("lock_all");
    assert!(!guard.is_lost(), "handed out a lost guard");
    assert_eq!(name(guard.guard(&a).expect("a's guard").node()), again[0]);
    guard.release().await.unwrap();
    fx.nothing_left().await;
}

/// The guard's fenced writes check every one of its nodes: with any one deleted (the first,
/// a middle one, the last), a commit fails with `Error::Lost` naming it, and writes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn fenced_writes_fail_when_any_one_node_is_gone() {
    let fx = fixture("multi-fenced", 1, &["a", "b", "c", "state"]).await;
    let state = format!("{}/state", fx.root);
    let keyed = KeyedMutex::new(&fx.sessions[0], &fx.root).unwrap();
    for victim in 0..3 {
        let guard = keyed.lock_all(&["c", "a", "b"]).await.unwrap();
        let locks: Vec<String> = guard
            .guards()
            .iter()
            .map(|guard| guard.node().rsplit_once('/').unwrap().0.to_owned())
            .collect();
        let keys: Vec<String> = ["a", "b", "c"].map(|k| format!("{}/{k}", fx.root)).into();
        assert_eq!(locks, keys, "taken in path order");
        let written = guard
            .fenced()
            .create_with_parents(&format!("{state}/ok"), b"1", CreateMode::Persistent)
            .commit()
            .await
            .unwrap();
        let ok = format!("{state}/ok");
        assert_eq!(written, [Written::Created { path: ok.clone() }]);
        fx.observer.delete(&ok, None).await.unwrap();

        let gone = guard.guards()[victim].node().to_owned();
        fx.observer.delete(&gone, None).await.unwrap();
        let probe = format!("{state}/stale");
        let committed = guard
            .fenced()
            .create(&probe, b"1", CreateMode::Persistent)
            .commit()
            .await;
        match committed {
            Err(Error::Lost { node }) => assert_eq!(node, gone),
            other => panic!("a guard without {gone} wrote: {other:?}"),
        }
        assert!(fx.observer.check_stat(&probe).await.unwrap().is_none());
        let _ = guard.release().await;
    }
    fx.observer.delete(&state, None).await.unwrap();
    fx.nothing_left().await;
}

/// The loss of one lock of the set (its node deleted: not the first) is the loss of the
/// guard: `lost()` resolves with it, `is_lost()` and the loss signal say so, and the release
/// reports it while deleting the other node.
#[tokio::test(flavor = "multi_thread")]
async fn the_loss_of_one_lock_is_the_loss_of_the_guard() {
    let fx = fixture("multi-loss", 1, &["a", "b"]).await;
    let keyed = KeyedMutex::new(&fx.sessions[0], &fx.root).unwrap();
    let guard = keyed.lock_all(&["a", "b"]).await.unwrap();
    let signal = guard.loss_signal();
    assert!(!guard.is_lost() && !signal.is_lost());
    let b = guard.guard(&format!("{}/b", fx.root)).expect("b's guard");
    let gone = b.node().to_owned();
    fx.observer.delete(&gone, None).await.unwrap();
    let loss = bounded("the guard hears of the loss", PATIENCE, guard.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    assert!(guard.is_lost());
    assert_eq!(signal.loss(), Some(Loss::NodeDeleted));
    assert_eq!(
        bounded("the signal", PATIENCE, signal.lost()).await,
        Loss::NodeDeleted
    );
    assert!(!guard.guards()[0].is_lost(), "a is intact");
    match guard.release().await {
        Err(Error::Lost { node }) => assert_eq!(node, gone),
        other => panic!("released a lost guard with {other:?}"),
    }
    fx.nothing_left().await;
}

/// Each lock of a set is an `InterProcessMutex` to Curator: a Curator holder of one key
/// keeps our multi lock out (nothing of ours left after the timeout), and our guard keeps
/// Curator out of every key of the set.
#[tokio::test(flavor = "multi_thread")]
async fn each_lock_of_a_set_excludes_curator_and_the_other_way_round() {
    let fx = fixture("multi-curator", 1, &["a", "b"]).await;
    let (a, b) = (format!("{}/a", fx.root), format!("{}/b", fx.root));
    let keyed = KeyedMutex::new(&fx.sessions[0], &fx.root).unwrap();
    let mut curator = Peer::curator(Ensemble::shared(1).await, &b).await;
    assert!(curator.call("lock").await.starts_with("locked "));
    let got = keyed.try_lock_all_for(&["a", "b"], Duration::from_millis(300));
    assert!(got.await.unwrap().is_none(), "took b from Curator");
    assert!(children(&fx.observer, &a).await.is_empty(), "a was kept");
    assert_eq!(
        children(&fx.observer, &b).await.len(),
        1,
        "ours left under b"
    );
    assert_eq!(curator.call("unlock").await, "unlocked");

    let guard = keyed.lock_all(&["b", "a"]).await.unwrap();
    assert_eq!(curator.call("lock-for 300").await, "false");
    guard.release().await.unwrap();
    assert_eq!(curator.call("lock-for 10000").await, "true");
    assert_eq!(curator.call("unlock").await, "unlocked");
    curator.quit().await;
    fx.nothing_left().await;
}

/// A key given twice is locked once; plain `Mutex`es are taken in path order; an empty set
/// and a bad key are refused at once, with nothing created.
#[tokio::test(flavor = "multi_thread")]
async fn a_set_is_deduplicated_sorted_and_checked() {
    let fx = fixture("multi-set", 1, &["a", "b"]).await;
    let session = &fx.sessions[0];
    let keyed = KeyedMutex::new(session, &fx.root).unwrap();
    match keyed.lock_all(&[]).await {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("an empty set gave {other:?}"),
    }
    match keyed.lock_all(&["a", "x/y"]).await {
        Err(Error::InvalidPath { .. }) => {}
        other => panic!("a bad key gave {other:?}"),
    }
    assert!(MultiLock::new([]).is_err());
    assert!(
        children(&fx.observer, &fx.root).await.is_empty(),
        "made nodes"
    );

    let twice = keyed.lock_all(&["b", "a", "b"]);
    let guard = bounded("a key given twice", PATIENCE, twice).await.unwrap();
    assert_eq!(guard.guards().len(), 2);
    guard.release().await.unwrap();

    let (a, b) = (format!("{}/a", fx.root), format!("{}/b", fx.root));
    let plain = MultiLock::new([
        Mutex::new(session, &b).unwrap(),
        Mutex::new(session, &a).unwrap(),
        Mutex::new(session, &b).unwrap(),
    ])
    .unwrap();
    assert_eq!(plain.paths().collect::<Vec<_>>(), [a.as_str(), b.as_str()]);
    let guard = plain.try_lock().await.unwrap().expect("free");
    assert!(guard.guard(&a).is_some() && guard.guard(&b).is_some());
    assert!(keyed.try_lock("a").await.unwrap().is_none(), "a is held");
    guard.release().await.unwrap();
    fx.nothing_left().await;
}
