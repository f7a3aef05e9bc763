//! Fenced writes: a transaction that commits only while the hold is intact, all or
//! nothing; a stale holder (cut off until its session expired, paused past it, its node
//! deleted) writes nothing and is told it lost; a write into the holder's node by others is
//! no loss; the caller's own failed operation is named; bad operations are refused before
//! anything is sent.

use std::pin::pin;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::ChildStdout;
use zk_harness::{
    await_empty, await_events, bounded, child_test, observer, record_events, session, signal,
    unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{
    DistributedLock, Error, Hold, LeaderElection, Mutex, RwLock, Semaphore, SessionEvent, Written,
};
use zookeeper_client::{Client, CreateMode};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The state a holder keeps beside its lock path (not under it: only contenders go there).
fn state_of(root: &str) -> String {
    format!("{root}.state")
}

async fn data(observer: &Client, path: &str) -> Vec<u8> {
    observer.get_data(path).await.expect("read the state").0
}

#[tokio::test(flavor = "multi_thread")]
async fn fenced_writes_commit_while_held_and_a_write_into_the_holders_node_does_not_fence_them() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    let written = guard
        .fenced()
        .create(&state, b"1", CreateMode::Persistent)
        .create(
            &format!("{state}/log-"),
            b"a",
            CreateMode::PersistentSequential,
        )
        .commit()
        .await
        .unwrap();
    assert_eq!(
        written[0],
        Written::Created {
            path: state.clone()
        }
    );
    let Written::Created { path: log } = &written[1] else {
        panic!("a sequential create: {written:?}");
    };
    assert!(log.starts_with(&format!("{state}/log-")), "{log}");

    // A hint: someone writes into the holder's node (Curator's revoker does).
    observer
        .set_data(guard.node(), b"__REVOKE__", None)
        .await
        .unwrap();
    let written = guard
        .fenced()
        .set_data(&state, b"2", Some(0))
        .check(&state, 1)
        .delete(log, None)
        .commit()
        .await
        .unwrap();
    assert_eq!(
        written,
        vec![
            Written::DataSet { version: 1 },
            Written::Checked,
            Written::Deleted
        ]
    );
    assert!(!guard.is_lost());
    assert_eq!(data(&observer, &state).await, b"2");

    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_operation_of_the_callers_is_named_and_nothing_is_written() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-op");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    observer
        .create(
            &state,
            b"kept",
            &CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    let failed = guard
        .fenced()
        .set_data(&state, b"lost write", None)
        .set_data(&state, b"wrong version", Some(7))
        .commit()
        .await;
    match failed {
        Err(Error::FencedOpFailed {
            index: 1,
            path,
            reason: zookeeper_client::Error::BadVersion,
        }) => assert_eq!(path, state),
        other => panic!("expected operation 1 to fail on its version: {other:?}"),
    }
    let missing = format!("{state}-missing");
    match guard.fenced().delete(&missing, None).commit().await {
        Err(Error::FencedOpFailed {
            index: 0,
            reason: zookeeper_client::Error::NoNode,
            ..
        }) => {}
        other => panic!("expected operation 0 to fail on a missing node: {other:?}"),
    }
    assert_eq!(data(&observer, &state).await, b"kept");
    assert!(
        !guard.is_lost(),
        "a failed operation of the caller's is no loss"
    );

    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_operations_are_refused_before_anything_is_sent() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-bad");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let persistent = CreateMode::Persistent;

    let relative = guard
        .fenced()
        .create(&state, b"", persistent)
        .create("relative", b"", persistent);
    assert!(
        matches!(relative.commit().await, Err(Error::InvalidPath { path, .. }) if path == "relative")
    );
    let big = vec![b'x'; 600 * 1024];
    let too_large = guard
        .fenced()
        .create(&state, &big, persistent)
        .set_data(&state, &big, None);
    assert!(matches!(
        too_large.commit().await,
        Err(Error::InvalidArgument(_))
    ));
    let one_too_large = guard
        .fenced()
        .create(&state, &vec![b'x'; 1024 * 1024], persistent);
    assert!(matches!(
        one_too_large.commit().await,
        Err(Error::InvalidArgument(_))
    ));

    assert_eq!(
        observer.check_stat(&state).await.unwrap(),
        None,
        "nothing was created"
    );
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}

/// The servers refuse the write, not only the holder's own view: the holder still trusts
/// its hold (it is frozen off and heard nothing) when it sends the write, after its node
/// was deleted.
#[tokio::test(flavor = "multi_thread")]
async fn a_holder_whose_node_was_deleted_writes_nothing_even_before_it_hears() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-deleted");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let holder = session(&proxy.address(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    guard
        .fenced()
        .create(&state, b"held", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();

    // An operator deletes the holder's node while the holder hears nothing.
    proxy.freeze();
    observer.delete(guard.node(), None).await.unwrap();
    assert!(!guard.is_lost(), "the frozen holder cannot have heard");
    let mut commit = pin!(guard.fenced().set_data(&state, b"stale", None).commit());
    // Polled once: the hold is trusted, so the multi is sent (and held by the proxy).
    tokio::select! {
        biased;
        done = &mut commit => panic!("answered while frozen: {done:?}"),
        () = std::future::ready(()) => {}
    }
    proxy.restore();
    let refused = bounded("the servers answer", PATIENCE, commit).await;
    assert!(
        matches!(&refused, Err(Error::Lost { node }) if node == guard.node()),
        "{refused:?}"
    );
    assert_eq!(data(&observer, &state).await, b"held");

    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_holder_cut_off_until_its_session_expired_writes_nothing() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let ensemble = Ensemble::start(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("fenced-cut");
    let state = state_of(&root);
    let observer = observer(&hosts).await;
    let proxy = ensemble.proxy(0).await;
    let cut = session(&proxy.address(), TIMEOUT).await;
    let mut cut_events = record_events(&cut);
    let guard = Mutex::new(&cut, &root).unwrap().lock().await.unwrap();
    guard
        .fenced()
        .create(&state, b"first holder", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();

    proxy.cut();
    await_events(&mut cut_events, &[SessionEvent::Expired], PATIENCE).await;
    let other = session(&hosts, TIMEOUT).await;
    let other_mutex = Mutex::new(&other, &root).unwrap();
    let other_guard = bounded("the other takes the lock", PATIENCE, other_mutex.lock())
        .await
        .unwrap();
    other_guard
        .fenced()
        .set_data(&state, b"second holder", None)
        .commit()
        .await
        .unwrap();
    proxy.restore();

    let refused = guard
        .fenced()
        .set_data(&state, b"stale holder", None)
        .commit()
        .await;
    assert!(
        matches!(&refused, Err(Error::Lost { node }) if node == guard.node()),
        "{refused:?}"
    );
    assert_eq!(data(&observer, &state).await, b"second holder");

    other_guard.release().await.unwrap();
    drop(guard);
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// The paused holder's session timeout.
const PAUSED_TIMEOUT: Duration = Duration::from_secs(2);

/// Tells the child process what to hold and write: `<hosts> <root>`.
const CHILD: &str = "ZK_RECIPES_FENCED_PAUSED_HOLDER";

/// The child: holds the lock on the given root, writes its state once, and answers each
/// line on its standard input with a fenced write: `written` or `refused <error>`.
#[tokio::test]
#[ignore = "run by a_holder_paused_past_its_session_writes_nothing"]
async fn fenced_paused_holder() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    let (hosts, root) = what.split_once(' ').expect("hosts and root");
    let session = session(hosts, PAUSED_TIMEOUT).await;
    let guard = Mutex::new(&session, root).unwrap().lock().await.unwrap();
    let state = state_of(root);
    guard
        .fenced()
        .create(&state, b"paused holder", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();
    println!("held");
    let mut asked = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(_)) = asked.next_line().await {
        match guard
            .fenced()
            .set_data(&state, b"stale", None)
            .commit()
            .await
        {
            Ok(_) => println!("written"),
            Err(Error::Lost { .. }) => println!("refused lost"),
            Err(err) => println!("refused {err}"),
        }
    }
}

/// The child's next answer (lines from the test runner skipped).
async fn answer(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    loop {
        let line = bounded("the holder answers", PATIENCE, lines.next_line())
            .await
            .expect("the holder's output")
            .expect("the holder ended without answering");
        if line == "held" || line == "written" || line.starts_with("refused") {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_paused_past_its_session_writes_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("fenced-paused");
    let state = state_of(&root);
    let observer = observer(&hosts).await;
    let other = session(&hosts, PAUSED_TIMEOUT).await;

    let mut child = child_test(
        module_path!(),
        "fenced_paused_holder",
        CHILD,
        &format!("{hosts} {root}"),
    );
    let pid = child.id().expect("a pid") as libc::pid_t;
    let mut ask = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(answer(&mut lines).await, "held");
    ask.write_all(b"write\n").await.unwrap();
    assert_eq!(answer(&mut lines).await, "written");

    signal(pid, libc::SIGSTOP);
    let taking = Mutex::new(&other, &root).unwrap();
    let guard = bounded("another takes the lock", PATIENCE, taking.lock())
        .await
        .expect("lock");
    guard
        .fenced()
        .set_data(&state, b"fresh", None)
        .commit()
        .await
        .unwrap();
    signal(pid, libc::SIGCONT);
    ask.write_all(b"write\n").await.unwrap();
    assert_eq!(answer(&mut lines).await, "refused lost");
    assert_eq!(data(&observer, &state).await, b"fresh");

    drop(ask);
    let exited = bounded("the holder exits", PATIENCE, child.wait()).await;
    assert!(exited.expect("wait").success());
    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_of_hold_fences_and_a_leader_proclaims() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-kinds");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let persistent = CreateMode::Persistent;

    let rw = RwLock::new(&holder, &format!("{root}/rw")).unwrap();
    let read = rw.read().await.unwrap();
    read.fenced()
        .create(&state, b"r", persistent)
        .commit()
        .await
        .unwrap();
    read.release().await.unwrap();
    let write = rw.write().await.unwrap();
    write
        .fenced()
        .set_data(&state, b"w", None)
        .commit()
        .await
        .unwrap();
    write.release().await.unwrap();
    let semaphore = Semaphore::new(&holder, &format!("{root}/sem"), 2).unwrap();
    let lease = semaphore.acquire().await.unwrap();
    lease
        .fenced()
        .set_data(&state, b"l", None)
        .commit()
        .await
        .unwrap();
    lease.release().await.unwrap();

    let election = LeaderElection::new(&holder, &format!("{root}/election"), "node-a").unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = candidate.leadership().await.unwrap();
    leadership
        .fenced()
        .set_data(&state, b"e", None)
        .commit()
        .await
        .unwrap();
    leadership.proclaim(b"10.0.0.7:8080").await.unwrap();
    let leader = election.leader().await.unwrap().expect("a leader");
    assert_eq!(leader.id.as_deref(), Some("node-a"));
    assert_eq!(leader.proclaimed.as_deref(), Some(&b"10.0.0.7:8080"[..]));
    assert_eq!(data(&observer, &state).await, b"e");
    // A leader hears a request to let go, as every hold does.
    assert!(zk_recipes::revoke(&holder, leadership.node())
        .await
        .unwrap());
    bounded(
        "the leader hears it",
        PATIENCE,
        leadership.revocation_requested(),
    )
    .await
    .unwrap();
    assert!(!leadership.is_lost());

    candidate.resign().await.unwrap();
    assert!(leadership.is_lost());
    let late = leadership.proclaim(b"stale").await;
    assert!(matches!(late, Err(Error::Lost { .. })), "{late:?}");
    let late = leadership
        .fenced()
        .set_data(&state, b"stale", None)
        .commit()
        .await;
    assert!(matches!(late, Err(Error::Lost { .. })), "{late:?}");
    assert_eq!(data(&observer, &state).await, b"e");

    observer.delete(&state, None).await.unwrap();
    for part in ["rw", "sem/leases", "sem/locks", "election"] {
        await_empty(&observer, &format!("{root}/{part}")).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hold_as_a_trait_object_fences_and_hears_a_request() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-dyn");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let lock: Box<dyn DistributedLock> = Box::new(RwLock::new(&holder, &root).unwrap());
    let hold: Box<dyn Hold> = lock.lock().await.unwrap();
    hold.fenced()
        .create(&state, b"dyn", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();
    assert!(zk_recipes::revoke(&holder, hold.node()).await.unwrap());
    bounded("the hold hears it", PATIENCE, hold.revocation_requested())
        .await
        .unwrap();
    hold.release().await.unwrap();
    let late = lock.lock().await.unwrap();
    assert_eq!(data(&observer, &state).await, b"dyn");
    late.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

// The edges of the promise (tests/suite/fenced/): odd holds and inputs, the error each failure
// gets; holds of an expired session; a log written only through fenced() under faults.
#[path = "fenced/edges.rs"]
mod edges;
#[path = "fenced/parents.rs"]
mod parents;
#[path = "fenced/stale.rs"]
mod stale;
#[path = "fenced/through_faults.rs"]
mod through_faults;
