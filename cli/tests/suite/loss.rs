//! `zk-recipes lock` when the lock is lost while CMD runs, and when zk-recipes is sent a
//! signal, against a real ZooKeeper server.

use crate::support;

use std::time::Duration;

use nix::sys::signal::Signal;
use support::{
    alive, await_lines, delete_from_outside, exit_within, lock_running, signal, start, Test,
};
use tokio::process::Child;
use zk_harness::{await_count, name, observer, PATIENCE};

/// Writes its pid and lock node to `$0`, then sleeps; on SIGTERM writes `TERM` to `$1` and
/// exits 0.
const TRAPS_TERM: &str = r#"trap 'echo TERM > "$1"; exit 0' TERM
echo "$$ $ZK_LOCK_NODE" > "$0"; sleep 60 & wait"#;

/// Writes its pid and lock node to `$0`, then sleeps through SIGTERM.
const IGNORES_TERM: &str = r#"trap '' TERM; echo "$$ $ZK_LOCK_NODE" > "$0"; sleep 60"#;

/// `zk-recipes lock [options] ROOT -- sh -c SCRIPT STARTED TERMED` once CMD runs, with
/// CMD's pid and lock node (SCRIPT writes them to STARTED).
async fn lock_running_with(test: &Test, options: &[&str], script: &str) -> (Child, i32, String) {
    let (lock, line) = lock_running(test, options, script).await;
    let (pid, node) = line.split_once(' ').expect("pid and node");
    (lock, pid.parse().expect("a pid"), node.to_owned())
}

#[tokio::test]
async fn deleted_node_stops_cmd_with_sigterm_and_exits_79() {
    let test = Test::new("deleted").await;
    let (mut lock, _, node) = lock_running_with(&test, &[], TRAPS_TERM).await;

    let deleted = delete_from_outside(&test.hosts, &node).await;
    await_lines(&test.scratch.file("termed"), 1).await;
    let after = deleted.elapsed();

    assert!(
        after < Duration::from_secs(1),
        "SIGTERM came {after:?} after the deletion"
    );
    assert_eq!(exit_within(&mut lock, PATIENCE).await.code(), Some(79));
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn cmd_that_ignores_sigterm_is_killed_after_kill_after() {
    let test = Test::new("ignores").await;
    let (mut lock, pid, node) =
        lock_running_with(&test, &["--kill-after", "1s"], IGNORES_TERM).await;

    let deleted = delete_from_outside(&test.hosts, &node).await;
    let status = exit_within(&mut lock, PATIENCE).await;
    let after = deleted.elapsed();

    assert_eq!(status.code(), Some(79));
    assert!(
        after >= Duration::from_millis(900),
        "killed {after:?} after the deletion"
    );
    assert!(
        after < Duration::from_millis(2500),
        "killed {after:?} after the deletion"
    );
    assert!(!alive(pid), "CMD survived SIGKILL");
}

#[tokio::test]
async fn sigterm_is_passed_to_cmd_and_the_lock_released_after_it() {
    let test = Test::new("sigterm").await;
    let (mut lock, _, _) = lock_running_with(&test, &[], TRAPS_TERM).await;

    signal(&lock, Signal::SIGTERM);
    let status = exit_within(&mut lock, PATIENCE).await;

    assert_eq!(await_lines(&test.scratch.file("termed"), 1).await, ["TERM"]);
    assert_eq!(status.code(), Some(0), "CMD's own status");
    // Released before zk-recipes exited: nothing to wait for.
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn sigint_while_waiting_exits_130_and_leaves_no_node() {
    let test = Test::new("sigint").await;
    let (_session, held) = test.hold_lock().await;
    let mut lock = start(&mut test.command(&["lock", &test.root, "--", "true"]));
    await_count(&observer(&test.hosts).await, &test.root, 2).await;

    signal(&lock, Signal::SIGINT);

    assert_eq!(exit_within(&mut lock, PATIENCE).await.code(), Some(128 + 2));
    // Its session was closed before it exited: its node is gone already.
    assert_eq!(test.children().await, [name(held.node())]);
}

/// zk-recipes stopped (SIGSTOP) for twice its session timeout while CMD runs on, its
/// connection silent (a proxy passes nothing either way, not even the server closing it):
/// another client takes the lock once the stopped one's session expired. At SIGCONT
/// zk-recipes stops CMD at once and exits 79, before it hears anything from the servers,
/// even with `--tolerate-suspension` (which would otherwise keep it a third of the session
/// timeout longer).
#[tokio::test]
async fn paused_past_its_session_it_stops_cmd_when_it_wakes() {
    const SESSION: Duration = Duration::from_secs(4);
    let test = Test::new("paused").await;
    let proxy = zk_harness::Ensemble::shared(1).await.proxy(0).await;
    let hosts = proxy.address();
    // Even tolerating a suspension (for a third of the session timeout) does not keep CMD.
    let options = [
        "--hosts",
        &hosts,
        "--session-timeout",
        "4s",
        "--tolerate-suspension",
    ];
    let (mut lock, _, _) = lock_running_with(&test, &options, TRAPS_TERM).await;

    proxy.freeze();
    signal(&lock, Signal::SIGSTOP);
    let stopped = std::time::Instant::now();
    let (_session, other) =
        zk_harness::bounded("another client takes the lock", PATIENCE, test.hold_lock()).await;
    // The pause itself: twice the session timeout.
    tokio::time::sleep_until((stopped + 2 * SESSION).into()).await;
    signal(&lock, Signal::SIGCONT);
    let resumed = std::time::Instant::now();
    await_lines(&test.scratch.file("termed"), 1).await;
    let after = resumed.elapsed();
    proxy.restore();

    assert!(
        after < Duration::from_secs(1),
        "SIGTERM came {after:?} after SIGCONT"
    );
    assert_eq!(exit_within(&mut lock, PATIENCE).await.code(), Some(79));
    assert!(!other.is_lost());
    assert_eq!(test.children().await, [name(other.node())]);
}
