//! `zk-recipes elect`: one CMD at a time among candidates, fail-over when a leader dies,
//! a new term after a loss, and `--once`, against a real ZooKeeper server.

use crate::support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::{alive, await_lines, exit_within, lines, signal, start, Test};
use tokio::process::Child;
use zk_harness::{await_empty, observer, PATIENCE};

/// Appends `ID PID TERM` to `$0`, then sleeps.
const LEADS: &str = r#"echo "$1 $$ $ZK_LEADER_TERM" >> "$0"; exec sleep 60"#;

/// Session timeout of the candidates: how long a killed leader's leadership lives on.
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// Starts candidate `id` with a session timeout of [`SESSION_TIMEOUT`], running
/// [`LEADS`] while leading.
fn candidate(test: &Test, id: &str) -> Child {
    let options = [
        "--id",
        id,
        "--session-timeout",
        "2s",
        "--",
        "sh",
        "-c",
        LEADS,
    ];
    let mut elect = test.command(&["elect", &test.root]);
    start(elect.args(options).arg(test.scratch.file("log")).arg(id))
}

/// `(id, pid, term)` of the log's line `n` (from 1), once it is written.
async fn leader(test: &Test, n: usize) -> (String, i32, u64) {
    let line = await_lines(&test.scratch.file("log"), n)
        .await
        .remove(n - 1);
    match line.split(' ').collect::<Vec<_>>()[..] {
        [id, pid, term] => (
            id.into(),
            pid.parse().expect("a pid"),
            term.parse().expect("a term"),
        ),
        _ => panic!("unexpected line {line:?}"),
    }
}

#[tokio::test]
async fn one_cmd_runs_and_a_follower_takes_over_when_the_leader_is_killed() {
    let test = Test::new("elect").await;
    let mut a = candidate(&test, "a");
    let mut b = candidate(&test, "b");

    let (first, first_pid, first_term) = leader(&test, 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = lines(&test.scratch.file("log"));
    assert_eq!(log.len(), 1, "two CMDs ran at once: {log:?}");

    let (killed, survivor) = if first == "a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    signal(killed, Signal::SIGKILL);
    let killed_at = Instant::now();
    exit_within(killed, PATIENCE).await;
    let (second, _, second_term) = leader(&test, 2).await;
    let took = killed_at.elapsed();

    assert_ne!(second, first);
    assert!(
        second_term > first_term,
        "terms {first_term} then {second_term}"
    );
    assert!(!alive(first_pid), "the killed leader's CMD outlived it");
    assert!(
        took >= SESSION_TIMEOUT / 2,
        "took over {took:?} after the kill"
    );
    assert!(
        took < SESSION_TIMEOUT + Duration::from_secs(3),
        "took over {took:?} after the kill"
    );

    signal(survivor, Signal::SIGTERM);
    let status = exit_within(survivor, PATIENCE).await;
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "CMD's status: sleep killed by SIGTERM"
    );
    await_empty(&observer(&test.hosts).await, &test.root).await;
}

#[tokio::test]
async fn leadership_lost_stops_cmd_and_it_runs_again_in_a_new_term() {
    let test = Test::new("relead").await;
    let mut elect = candidate(&test, "a");
    let (_, pid, term) = leader(&test, 1).await;

    let client = observer(&test.hosts).await;
    let node = format!("{}/{}", test.root, test.children().await[0]);
    client
        .delete(&node, None)
        .await
        .expect("delete the leader's node");
    let (_, _, new_term) = leader(&test, 2).await;

    assert!(new_term > term, "terms {term} then {new_term}");
    assert!(!alive(pid), "the first CMD was not stopped");
    signal(&elect, Signal::SIGINT);
    exit_within(&mut elect, PATIENCE).await;
    await_empty(&client, &test.root).await;
}

#[tokio::test]
async fn once_exits_with_cmd_status_and_leaves_the_election() {
    let test = Test::new("once").await;
    let args = [
        "elect", "--once", &test.root, "--id", "a", "--", "sh", "-c", "exit 3",
    ];
    let status = exit_within(&mut start(&mut test.command(&args)), PATIENCE).await;

    assert_eq!(status.code(), Some(3));
    assert!(test.children().await.is_empty());
}
