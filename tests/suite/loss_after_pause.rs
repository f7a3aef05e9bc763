//! A holder paused for longer than its session timeout does not trust its lock when it
//! wakes, before it hears anything from the servers: its first look says lost.
//!
//! The holder is a child process (this test binary, run as [`paused_holder`]) that takes
//! the lock and then checks `is_lost()` each time the test asks on its standard input. The
//! test stops it with SIGSTOP, lets another process take the lock once the stopped one's
//! session expired, resumes it with SIGCONT and asks once more.

use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::ChildStdout;
use zk_harness::history::{History, Section};
use zk_harness::{
    await_empty, bounded, child_test, observer, session, signal, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::Mutex;

/// The paused holder's session timeout.
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// Tells the child process what to hold: `<hosts> <root>`.
const CHILD: &str = "ZK_RECIPES_PAUSED_HOLDER";

/// The child: holds the lock on the given root and answers each line on its standard input
/// with `trusted` or `lost`, until lost.
#[tokio::test]
#[ignore = "run by a_holder_paused_past_its_session_is_lost_at_its_first_look"]
async fn paused_holder() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    let (hosts, root) = what.split_once(' ').expect("hosts and root");
    let session = session(hosts, SESSION_TIMEOUT).await;
    let guard = Mutex::new(&session, root).unwrap().lock().await.unwrap();
    println!("held {}", guard.fencing_token());
    let mut asked = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(_)) = asked.next_line().await {
        if guard.is_lost() {
            println!("lost");
            break;
        }
        println!("trusted");
    }
    let _ = guard.release().await;
}

/// Starts the child holding `root` on `hosts`.
fn paused_holder_process(hosts: &str, root: &str) -> tokio::process::Child {
    child_test(
        module_path!(),
        "paused_holder",
        CHILD,
        &format!("{hosts} {root}"),
    )
}

/// The child's next answer (lines that are not answers, from the test runner, skipped).
async fn answer(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    loop {
        let line = bounded("the holder answers", PATIENCE, lines.next_line())
            .await
            .expect("the holder's output")
            .expect("the holder ended without answering");
        if line.starts_with("held") || line == "trusted" || line == "lost" {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_paused_past_its_session_is_lost_at_its_first_look() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("paused-holder");
    let observer = observer(&hosts).await;
    let other = session(&hosts, SESSION_TIMEOUT).await;
    let history = History::new();

    let mut child = paused_holder_process(&hosts, &root);
    let pid = child.id().expect("a pid") as libc::pid_t;
    let mut ask = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let held = answer(&mut lines).await;
    let held_at = Instant::now();
    let token: u64 = held["held ".len()..].parse().expect("a token");
    ask.write_all(b"check\n").await.unwrap();
    assert_eq!(answer(&mut lines).await, "trusted");
    let trusted_at = Instant::now();

    signal(pid, libc::SIGSTOP);
    let stopped_at = Instant::now();
    let taking = Mutex::new(&other, &root).unwrap();
    let guard = bounded("another takes the lock", PATIENCE, taking.lock())
        .await
        .expect("lock");
    let taken_at = Instant::now();
    // The pause itself: twice the session timeout, as a long collection or a stop would.
    tokio::time::sleep_until((stopped_at + 2 * SESSION_TIMEOUT).into()).await;
    signal(pid, libc::SIGCONT);
    ask.write_all(b"check\n").await.unwrap();
    let first_look = answer(&mut lines).await;
    let looked_at = Instant::now();

    let section = |who: &str, token, enter, exit| Section {
        who: who.into(),
        token,
        node: String::new(),
        enter,
        exit,
        trusted: true,
        told: None,
    };
    history.record(section("paused", token, held_at, trusted_at));
    if first_look == "trusted" {
        history.record(section("paused", token, held_at, looked_at));
    }
    history.record(section("other", guard.fencing_token(), taken_at, looked_at));
    assert_eq!(
        first_look, "lost",
        "the paused holder trusted its lock when it woke"
    );
    assert!(history.trusted_overlaps().is_empty());

    let exited = bounded("the holder exits", PATIENCE, child.wait()).await;
    assert!(exited.expect("wait").success());
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}

/// A hold on a healthy session stays trusted however long it lasts: the session keeps
/// confirming itself to the servers, so its trust never lapses on its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_hold_stays_trusted_for_many_session_timeouts() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("long-hold");
    let observer = observer(&hosts).await;
    let holder = session(&hosts, SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let held = tokio::time::timeout(4 * SESSION_TIMEOUT, guard.lost()).await;
    assert!(held.is_err(), "lost while healthy: {held:?}");
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}
