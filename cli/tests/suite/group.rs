//! CMD's whole process group and the signals that stop zk-recipes: SIGHUP and SIGQUIT
//! stop CMD as SIGTERM does, and neither a SIGKILL of zk-recipes nor CMD's own end leaves
//! a process of CMD's group running; against a real ZooKeeper server.

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use support::{await_dead, await_lines, exit_within, lines, lock_running, signal, start, Test};
use tokio::process::Child;
use zk_harness::{await_count, await_empty, name, observer, PATIENCE};

/// Writes its pid and the pid of a background `sleep` (CMD's child, zk-recipes'
/// grandchild) to `$0`, then waits for it; on SIGTERM writes `TERM` to `$1` and exits 0.
const WITH_A_GRANDCHILD: &str = r#"trap 'echo TERM > "$1"; exit 0' TERM
sleep 1000 & echo "$$ $!" > "$0"; wait"#;

/// Writes the pid of a background `sleep` to `$0` and exits at once, leaving it behind.
const LEAVES_A_GRANDCHILD: &str = r#"sleep 1000 & echo "$!" > "$0""#;

/// Kills a test's `sleep 1000` on drop if it still runs (the test failed): it would hold
/// the test's output open for its whole sleep.
struct Sleeper(i32);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.0)).unwrap_or_default();
        if cmdline.starts_with(b"sleep\0") {
            let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
        }
    }
}

/// How long a killed process may take to be gone.
const DYING: Duration = Duration::from_secs(2);

/// `zk-recipes lock [options] ROOT -- sh -c WITH_A_GRANDCHILD STARTED TERMED` once CMD
/// runs; with CMD's pid and its child.
async fn lock_with_a_grandchild(test: &Test, options: &[&str]) -> (Child, i32, Sleeper) {
    let (lock, line) = lock_running(test, options, WITH_A_GRANDCHILD).await;
    let (cmd, grandchild) = line.split_once(' ').expect("two pids");
    let pid = |pid: &str| pid.parse().expect("a pid");
    (lock, pid(cmd), Sleeper(pid(grandchild)))
}

#[tokio::test]
async fn sighup_and_sigquit_stop_cmd_with_sigterm_and_release_at_once() {
    for sent in [Signal::SIGHUP, Signal::SIGQUIT] {
        let test = Test::new("hup").await;
        // A session that outlives the test: the node must go with the release.
        let (mut lock, cmd, grandchild) =
            lock_with_a_grandchild(&test, &["--session-timeout", "30s"]).await;

        signal(&lock, sent);
        let status = exit_within(&mut lock, PATIENCE).await;

        // zk-recipes exits only after CMD did: what CMD wrote is all it will write.
        assert_eq!(
            lines(&test.scratch.file("termed")),
            ["TERM"],
            "{sent}: CMD got no SIGTERM; zk-recipes exited with {status}"
        );
        assert_eq!(status.code(), Some(0), "{sent}: not CMD's own status");
        assert!(test.children().await.is_empty(), "{sent}: the node stayed");
        await_dead(cmd, DYING).await;
        await_dead(grandchild.0, DYING).await;
    }
}

#[tokio::test]
async fn sighup_while_waiting_exits_129_and_leaves_no_node() {
    let test = Test::new("hup-waiting").await;
    let (_session, held) = test.hold_lock().await;
    let mut lock =
        start(&mut test.command(&["lock", "--session-timeout", "30s", &test.root, "--", "true"]));
    await_count(&observer(&test.hosts).await, &test.root, 2).await;

    signal(&lock, Signal::SIGHUP);

    assert_eq!(exit_within(&mut lock, PATIENCE).await.code(), Some(128 + 1));
    assert_eq!(test.children().await, [name(held.node())]);
}

#[tokio::test]
async fn sigkill_of_zk_recipes_kills_cmds_grandchildren_too() {
    let test = Test::new("sigkill").await;
    let (mut lock, cmd, grandchild) =
        lock_with_a_grandchild(&test, &["--session-timeout", "2s"]).await;

    signal(&lock, Signal::SIGKILL);
    exit_within(&mut lock, PATIENCE).await;

    await_dead(cmd, DYING).await;
    await_dead(grandchild.0, DYING).await;
    // The node goes with the session.
    await_empty(&observer(&test.hosts).await, &test.root).await;
}

#[tokio::test]
async fn what_cmd_leaves_behind_in_its_group_is_killed_when_it_ends() {
    let test = Test::new("leftover").await;
    let started = test.scratch.file("started");
    let mut lock = test.command(&["lock", &test.root, "--", "sh", "-c", LEAVES_A_GRANDCHILD]);
    let mut lock = start(lock.arg(&started));

    let status = exit_within(&mut lock, PATIENCE).await;
    let grandchild = Sleeper(await_lines(&started, 1).await[0].parse().expect("a pid"));

    assert_eq!(status.code(), Some(0));
    await_dead(grandchild.0, DYING).await;
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn cmd_inherits_no_descriptor_of_zk_recipes_own() {
    // The watchdog's pipe above all: a CMD holding its write end would keep the watchdog
    // from noticing zk-recipes' death. What the test's own environment passes on to every
    // child (a shell started directly shows it) is not zk-recipes' to close.
    let test = Test::new("descriptors").await;
    let list = r#"ls /proc/$$/fd > "$0""#;
    let (direct, under_lock) = (test.scratch.file("direct"), test.scratch.file("locked"));
    let mut sh = tokio::process::Command::new("sh");
    sh.args(["-c", list]).arg(&direct).stdin(Stdio::null());
    assert!(exit_within(&mut start(&mut sh), PATIENCE).await.success());
    let mut lock = test.command(&["lock", &test.root, "--", "sh", "-c", list]);
    let status = exit_within(&mut start(lock.arg(&under_lock)), PATIENCE).await;

    assert_eq!(status.code(), Some(0));
    assert_eq!(lines(&under_lock), lines(&direct));
}
