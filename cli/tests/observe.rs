//! `zk-recipes observe` and `status`: a line on each change of an election, and a lock's
//! holder and waiters, against a real ZooKeeper server.

mod support;

use std::process::Stdio;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::{exit_within, signal, start, Test};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;
use zk_harness::{await_count, bounded, name, observer, PATIENCE};
use zk_recipes::{LeaderElection, Session};

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
    assert_eq!(next(&mut lines).await["kind"], "empty");

    let session = Session::connect(&test.hosts).await.expect("connect");
    let election = |id: &str| LeaderElection::new(&session, &test.root, id).expect("election");
    let a = election("a").join().await.expect("join a");
    let line = next(&mut lines).await;
    assert_eq!(
        (line["kind"].as_str(), ids(&line)),
        (Some("election"), ("a", vec!["a"]))
    );
    let b = election("b").join().await.expect("join b");
    assert_eq!(ids(&next(&mut lines).await), ("a", vec!["a", "b"]));
    a.resign().await.expect("a resigns");
    assert_eq!(ids(&next(&mut lines).await), ("b", vec!["b"]));
    b.resign().await.expect("b resigns");
    assert_eq!(next(&mut lines).await["kind"], "empty");

    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
}

#[tokio::test]
async fn status_prints_a_lock_holder_and_its_waiters() {
    let test = Test::new("status").await;
    let (_session, held) = test.hold_lock().await;
    let mut waiter = start(&mut test.command(&["lock", &test.root]));
    let queue = await_count(&observer(&test.hosts).await, &test.root, 2).await;

    let mut status = test.command(&["status", &test.root]);
    let output = bounded("status", PATIENCE, status.output())
        .await
        .expect("run status");

    let text = String::from_utf8_lossy(&output.stdout);
    let expected = format!(
        "{}: held by {}; waiting: {}\n",
        test.root,
        name(held.node()),
        queue[1]
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text, expected);
    signal(&waiter, Signal::SIGINT);
    assert_eq!(
        exit_within(&mut waiter, PATIENCE).await.code(),
        Some(128 + 2)
    );
}
