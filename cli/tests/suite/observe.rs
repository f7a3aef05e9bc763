//! `zk-recipes observe` and `status`: a line on each change of an election or a semaphore,
//! and the holders and waiters of a lock, a read/write lock and a semaphore, against a
//! real ZooKeeper server.

use crate::support;

use std::process::Stdio;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::{exit_within, first_line, signal, start, Test};
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, BufReader, Lines};
use tokio::process::ChildStdout;
use zk_harness::{await_count, await_empty, bounded, digest_observer, observer, PATIENCE};
use zk_recipes::zookeeper::{Acls, CreateMode};
use zk_recipes::{LeaderElection, RwLock, Session};

/// The default id of a contender made by process `pid`: `<host name>/<pid>`.
fn id_of(pid: u32) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
    format!("{}/{pid}", host.trim())
}

/// The next line `observe` prints, parsed.
async fn next(lines: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = bounded("a line from observe", PATIENCE, lines.next_line())
        .await
        .expect("read observe's output")
        .expect("observe is still running");
    serde_json::from_str(&line).unwrap_or_else(|err| panic!("{line:?}: {err}"))
}

/// The leader's id and the participants' ids of a line.
fn ids(line: &Value) -> (&str, Vec<&str>) {
    let participants = line["participants"].as_array().expect("participants");
    let ids = participants
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    (line["leader"]["id"].as_str().expect("a leader"), ids)
}

#[tokio::test]
async fn observe_prints_a_line_on_each_change_of_an_election() {
    let test = Test::new("observe").await;
    let mut observe = test.command(&["observe", "--json", &test.root]);
    let mut observe = start(observe.stdout(Stdio::piped()));
    let mut lines = BufReader::new(observe.stdout.take().expect("stdout")).lines();
    assert_eq!(next(&mut lines).await["kind"], "missing");

    let session = Session::connect(&test.hosts).await.expect("connect");
    let election = |id: &str| LeaderElection::new(&session, &test.root, id).expect("election");
    let a = election("a").join().await.expect("join a");
    // The path may show up empty first: the first join creates it, then the node.
    let mut line = next(&mut lines).await;
    if line["kind"] == "empty" {
        line = next(&mut lines).await;
    }
    assert_eq!(
        (line["kind"].as_str(), ids(&line)),
        (Some("election"), ("a", vec!["a"]))
    );
    let b = election("b").join().await.expect("join b");
    assert_eq!(ids(&next(&mut lines).await), ("a", vec!["a", "b"]));
    a.resign().await.expect("a resigns");
    assert_eq!(ids(&next(&mut lines).await), ("b", vec!["b"]));
    b.resign().await.expect("b resigns");
    // Empty, or already gone: ZooKeeper deletes an empty container root some time later.
    let last = next(&mut lines).await;
    assert!(["empty", "missing"].contains(&last["kind"].as_str().unwrap_or_default()));

    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
}

#[tokio::test]
async fn status_prints_a_lock_holder_and_its_waiters() {
    let test = Test::new("status").await;
    let (_session, held) = test.hold_lock().await;
    let mut waiter = start(&mut test.command(&["lock", &test.root]));
    let client = observer(&test.hosts).await;
    let queue = await_count(&client, &test.root, 2).await;

    let mut status = test.command(&["status", &test.root]);
    let output = bounded("status", PATIENCE, status.output())
        .await
        .expect("run status");

    let text = String::from_utf8_lossy(&output.stdout);
    // Each is named by its id: the default `<host>/<pid>` (this test's, the waiter's).
    let waiter_id = id_of(waiter.id().expect("the waiter's pid"));
    let expected = format!(
        "{}: held by {}; waiting: {waiter_id}\n",
        test.root,
        id_of(std::process::id()),
    );
    assert_eq!(queue.len(), 2);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text, expected);
    signal(&waiter, Signal::SIGINT);
    assert_eq!(
        exit_within(&mut waiter, PATIENCE).await.code(),
        Some(128 + 2)
    );
    held.release().await.expect("release the lock");
    await_empty(&client, &test.root).await;
}

/// Runs `zk-recipes status PATH`; its output, once it succeeded.
async fn status(test: &Test) -> String {
    let mut status = test.command(&["status", &test.root]);
    let output = bounded("status", PATIENCE, status.output())
        .await
        .expect("run status");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn status_prints_the_readers_of_a_rwlock_and_a_waiting_writer() {
    let test = Test::new("status-rwlock").await;
    let session = Session::connect(&test.hosts).await.expect("connect");
    let lock = RwLock::new(&session, &test.root).expect("a read/write lock");
    let first = lock.read().await.expect("a first reader");
    let second = lock.read().await.expect("a second reader");
    let writing = tokio::spawn({
        let lock = lock.clone();
        async move { lock.write().await }
    });
    let client = observer(&test.hosts).await;
    let queue = await_count(&client, &test.root, 3).await;

    assert_eq!(queue.len(), 3);
    let ours = id_of(std::process::id());
    let expected = format!("read by {ours}, {ours}; waiting: writer {ours}");
    assert_eq!(status(&test).await, format!("{}: {expected}\n", test.root));
    first.release().await.expect("release the first reader");
    second.release().await.expect("release the second reader");
    let writer = writing.await.expect("the writer's task").expect("write");
    writer.release().await.expect("release the writer");
    await_empty(&client, &test.root).await;
}

#[tokio::test]
async fn status_prints_the_leases_of_a_semaphore_and_its_acquirer() {
    let test = Test::new("status-semaphore").await;
    let (_session, leases) = test.hold_leases(2, 2).await;
    let [first, second] = <[_; 2]>::try_from(leases).expect("two leases");
    let mut waiter = start(&mut test.command(&["lock", "--semaphore", "2", &test.root]));
    // The acquirer passes the mutex on `locks` and waits with a third lease for the count.
    let client = observer(&test.hosts).await;
    let (leases, locks) = (
        format!("{}/leases", test.root),
        format!("{}/locks", test.root),
    );
    let queue = await_count(&client, &leases, 3).await;
    await_count(&client, &locks, 1).await;

    assert_eq!(queue.len(), 3);
    let (ours, waiting) = (
        id_of(std::process::id()),
        id_of(waiter.id().expect("a pid")),
    );
    let expected = format!("2 of 2 leases: {ours}, {ours}; waiting: {waiting}");
    assert_eq!(status(&test).await, format!("{}: {expected}\n", test.root));
    signal(&waiter, Signal::SIGINT);
    assert_eq!(
        exit_within(&mut waiter, PATIENCE).await.code(),
        Some(128 + 2)
    );
    first.release().await.expect("release the first lease");
    second.release().await.expect("release the second lease");
    await_empty(&client, &leases).await;
    await_empty(&client, &locks).await;
}

#[tokio::test]
async fn observe_prints_a_line_when_a_semaphore_lease_is_released() {
    let test = Test::new("observe-semaphore").await;
    let (_session, leases) = test.hold_leases(2, 2).await;
    let [first, second] = <[_; 2]>::try_from(leases).expect("two leases");
    let mut observe = test.command(&["observe", "--json", &test.root]);
    let mut observe = start(observe.stdout(Stdio::piped()));
    let mut lines = BufReader::new(observe.stdout.take().expect("stdout")).lines();
    let nodes = |line: &Value, key: &str| -> Vec<String> {
        let list = line[key].as_array().expect("a list");
        list.iter()
            .filter_map(|lease| lease["node"].as_str().map(str::to_owned))
            .collect()
    };

    let line = next(&mut lines).await;
    assert_eq!(
        (&line["kind"], &line["max"]),
        (&"semaphore".into(), &2.into())
    );
    let held = vec![first.node().to_owned(), second.node().to_owned()];
    assert_eq!(nodes(&line, "leases"), held);
    assert!(nodes(&line, "waiting").is_empty());
    first.release().await.expect("release the first lease");
    assert_eq!(nodes(&next(&mut lines).await, "leases"), held[1..]);
    second.release().await.expect("release the second lease");
    let line = next(&mut lines).await;
    assert_eq!(
        (&line["kind"], nodes(&line, "leases")),
        (&"semaphore".into(), vec![])
    );

    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
    let client = observer(&test.hosts).await;
    await_empty(&client, &format!("{}/leases", test.root)).await;
    await_empty(&client, &format!("{}/locks", test.root)).await;
}

#[tokio::test]
async fn text_output_escapes_an_id_that_would_forge_a_line() {
    let test = Test::new("forged").await;
    let forged = "a\n/t/x: leader forged";
    let mut elect = test.command(&["elect", &test.root, "--id", forged]);
    let mut elect = start(elect.stdout(Stdio::null()));
    let client = observer(&test.hosts).await;
    await_count(&client, &test.root, 1).await;
    let expected = format!(
        "{}: leader \"a\\n/t/x: leader forged\"; no followers\n",
        test.root
    );

    assert_eq!(status(&test).await, expected);
    let (mut observe, mut stdout, first) =
        first_line(&mut test.command(&["observe", &test.root])).await;
    assert_eq!(first, expected);

    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.expect("the rest");
    assert_eq!(rest, "", "more lines");
    signal(&elect, Signal::SIGTERM);
    exit_within(&mut elect, PATIENCE).await;
    await_empty(&client, &test.root).await;
}

#[tokio::test]
async fn status_on_a_path_the_acl_hides_says_what_to_check() {
    let test = Test::new("hidden").await;
    let owner = digest_observer(&test.hosts, "owner", "secret").await;
    let creator_only = CreateMode::Persistent.with_acls(Acls::creator_all());
    owner
        .create(&test.root, b"", &creator_only)
        .await
        .expect("create the path, hidden");

    for command in ["status", "observe"] {
        let mut look = test.command(&[command, &test.root]);
        let output = bounded(command, PATIENCE, look.output())
            .await
            .expect("run it");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(69), "{command}: {stderr}");
        assert!(
            stderr.contains("not authorized") && stderr.contains("check --auth-file"),
            "{command}: {stderr}"
        );
    }
    owner
        .delete(&test.root, None)
        .await
        .expect("delete the path");
}
