//! The read/write lock against real ZooKeeper servers started by the harness.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zk_harness::nemesis::{under_nemesis, Arena, Entrant, Rule, Tally, Waits};
use zk_harness::{
    await_children, await_count, await_empty, bounded, children, expire_session, live_client, name,
    observer, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{DistributedLock, Error, Loss, RwLock};

/// How long a waiter must keep waiting to count as "not let in".
const STILL_WAITING: Duration = Duration::from_millis(300);

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Who is inside, across every task of a test.
#[derive(Default)]
struct Inside {
    readers: AtomicUsize,
    writers: AtomicUsize,
    most_readers: AtomicUsize,
}

/// 6 readers and 3 writers over 3 sessions, `rounds` sections each: a writer is always
/// alone, readers overlap, writers' tokens grow.
async fn readers_share_writers_exclude(ensemble: &Ensemble, rounds: usize) {
    let root = unique_root("rw-share");
    let inside = Arc::new(Inside::default());
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut sessions = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
        for c in 0..3 {
            let lock = RwLock::new(&session, &root).unwrap();
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
                        let now = inside.readers.fetch_add(1, Ordering::SeqCst) + 1;
                        inside.most_readers.fetch_max(now, Ordering::SeqCst);
                        assert_eq!(inside.writers.load(Ordering::SeqCst), 0, "a writer inside");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        assert_eq!(inside.writers.load(Ordering::SeqCst), 0, "a writer inside");
                        assert!(!guard.is_lost());
                        inside.readers.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.expect("release");
                    }
                }
            }));
        }
        sessions.push(session);
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(240), task)
            .await
            .expect("contenders finished")
            .expect("contender panicked");
    }
    assert!(
        inside.most_readers.load(Ordering::SeqCst) >= 2,
        "readers never overlapped"
    );
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 3 * rounds);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "writer tokens");
    await_empty(&live_client(&sessions[0]), &root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_share_and_writers_exclude_on_standalone() {
    readers_share_writers_exclude(Ensemble::shared(1).await, 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_share_and_writers_exclude_on_ensemble() {
    readers_share_writers_exclude(Ensemble::shared(3).await, 10).await;
}

/// Fairness: a writer waits behind a reader; a reader that comes after that writer waits
/// for it, even though only a reader holds; the writer holds once the first reader leaves,
/// and the late reader once the writer leaves.
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_behind_a_waiting_writer_waits_for_it() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("rw-fair");
    let (a, b, c) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let outside = live_client(&a);
    let first = RwLock::new(&a, &root).unwrap().read().await.unwrap();
    let writer = RwLock::new(&b, &root).unwrap();
    assert!(
        writer.try_write().await.unwrap().is_none(),
        "a reader holds"
    );
    let writer = tokio::spawn(async move { writer.write().await });
    await_count(&outside, &root, 2).await;

    let late = RwLock::new(&c, &root).unwrap();
    assert!(
        late.try_read().await.unwrap().is_none(),
        "a reader went ahead of a waiting writer"
    );
    let late = tokio::spawn(async move { late.read().await });
    await_count(&outside, &root, 3).await;
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
    await_empty(&outside, &root).await;
}

/// Readers waiting behind a writer all hold together once it goes.
#[tokio::test(flavor = "multi_thread")]
async fn readers_behind_a_writer_enter_together() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("rw-together");
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let outside = live_client(&a);
    let writer = RwLock::new(&a, &root).unwrap().write().await.unwrap();
    let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    let (leave, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut readers = Vec::new();
    for i in 0..3 {
        let lock = RwLock::new(if i % 2 == 0 { &a } else { &b }, &root).unwrap();
        let (entered, mut leave) = (entered_tx.clone(), leave.subscribe());
        readers.push(tokio::spawn(async move {
            let guard = lock.read().await.unwrap();
            entered.send(i).unwrap();
            leave.recv().await.unwrap();
            guard.release().await.unwrap();
        }));
        await_count(&outside, &root, i + 2).await;
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
    await_empty(&outside, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn try_timeout_and_cancel_leave_no_node() {
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

#[tokio::test(flavor = "multi_thread")]
async fn loss_is_noticed_by_readers_and_writers() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("rw-loss");
    let (a, b) = (
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
        session(&ensemble.connect_string(), SESSION_TIMEOUT).await,
    );
    let outside = live_client(&b);
    let admin = observer(&ensemble.connect_string()).await;

    // A reader whose node someone deletes.
    let reader = RwLock::new(&b, &root).unwrap().read().await.unwrap();
    admin.delete(reader.node(), None).await.unwrap();
    let loss = bounded("the reader's loss", PATIENCE, reader.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    assert!(matches!(reader.release().await, Err(Error::Lost { .. })));

    // A writer whose session expires; the reader waiting behind it gets in.
    let writer = RwLock::new(&a, &root).unwrap().write().await.unwrap();
    let next = RwLock::new(&b, &root).unwrap();
    let waiter = tokio::spawn(async move { next.read().await });
    await_count(&outside, &root, 2).await;
    expire_session(&ensemble.connect_string(), live_client(&a).session()).await;
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
    await_empty(&outside, &root).await;
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

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_and_sends_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    for path in ["", "rw", "/rw/", "/a//b", "/a/./b", "/zookeeper/rw"] {
        match RwLock::new(&s, path) {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }
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
