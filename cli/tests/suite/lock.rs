//! `zk-recipes lock`: mutual exclusion between processes, CMD's environment and exit status,
//! `--timeout`, and the statuses of bad input, against a real ZooKeeper server.

use crate::support;

use std::time::{Duration, Instant};

use support::{await_lines, exit_within, lines, start, zk_recipes, Test};
use zk_harness::{await_count, name, observer, unique_root, PATIENCE};

/// Reads the number in the file `$0`, lets others run, writes it back plus one.
const INCREMENT: &str = r#"n=$(cat "$0"); sleep 0.005; echo $((n + 1)) > "$0""#;

#[tokio::test]
async fn three_processes_increment_one_file_without_losing_an_update() {
    let test = Test::new("counter").await;
    let counter = test.scratch.file("counter");
    std::fs::write(&counter, "0\n").expect("write the counter");

    let loops: Vec<_> = (0..3)
        .map(|_| {
            let (hosts, root, counter) = (test.hosts.clone(), test.root.clone(), counter.clone());
            tokio::spawn(async move {
                for _ in 0..20 {
                    let mut lock = zk_recipes(&hosts);
                    lock.args(["lock", &root, "--", "sh", "-c", INCREMENT])
                        .arg(&counter);
                    let status = exit_within(&mut start(&mut lock), PATIENCE).await;
                    assert!(status.success(), "an increment failed: {status}");
                }
            })
        })
        .collect();
    for increments in loops {
        increments.await.expect("a loop of increments");
    }

    assert_eq!(lines(&counter), ["60"]);
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn cmd_gets_the_node_and_its_token_and_its_status_is_passed_on() {
    let test = Test::new("env").await;
    let seen = test.scratch.file("seen");
    let go = test.scratch.file("go");
    // CMD reports what it got, then holds the lock until the test has looked.
    let report = r#"echo "$ZK_LOCK_NODE" "$ZK_FENCING_TOKEN" > "$0"
        while [ ! -e "$1" ]; do sleep 0.05; done; exit 42"#;
    let mut lock = test.command(&["lock", &test.root, "--", "sh", "-c", report]);
    let mut lock = start(lock.arg(&seen).arg(&go));

    let reported = await_lines(&seen, 1).await;
    let client = observer(&test.hosts).await;
    let holder = await_count(&client, &test.root, 1).await.remove(0);
    let node = format!("{}/{holder}", test.root);
    let (_, stat) = client.get_data(&node).await.expect("the holder's node");
    assert_eq!(reported, [format!("{node} {}", stat.czxid)]);
    std::fs::write(&go, b"").expect("let CMD end");
    assert_eq!(exit_within(&mut lock, PATIENCE).await.code(), Some(42));
    assert!(test.children().await.is_empty());

    // A CMD that dies of a signal: 128+N, as in shells.
    let mut lock = test.command(&["lock", &test.root, "--", "sh", "-c", "kill -KILL $$"]);
    let status = exit_within(&mut start(&mut lock), PATIENCE).await;
    assert_eq!(status.code(), Some(128 + 9));
}

#[tokio::test]
async fn timeout_gives_up_in_time_without_running_cmd() {
    let test = Test::new("timeout").await;
    let ran = test.scratch.file("ran");
    let (_session, held) = test.hold_lock().await;

    let mut lock = test.command(&["lock", "--timeout", "1s", &test.root, "--", "touch"]);
    let started = Instant::now();
    let status = exit_within(&mut start(lock.arg(&ran)), PATIENCE).await;
    let took = started.elapsed();

    assert_eq!(status.code(), Some(75));
    assert!(took < Duration::from_millis(1500), "gave up after {took:?}");
    assert!(!ran.exists(), "CMD ran without the lock");
    assert_eq!(
        test.children().await,
        [name(held.node())],
        "only the holder is left"
    );
}

#[tokio::test]
async fn bad_arguments_and_unreachable_servers_have_their_statuses() {
    let test = Test::new("bad").await;
    let missing = unique_root("cli-missing");
    let cases: [(&[&str], i32); 5] = [
        (&["lock", "relative/path", "--", "true"], 64),
        (&["lock", "--timeout", "5", "/x", "--", "true"], 64),
        (&["lock", "--no-such-option", "/x"], 64),
        (&["lock", &missing, "--", "/no/such/cmd"], 127),
        (
            &[
                "status",
                "/x",
                "--connect-timeout",
                "1s",
                "--hosts",
                "127.0.0.1:1",
            ],
            69,
        ),
    ];
    for (args, expected) in cases {
        let status = exit_within(&mut start(&mut test.command(args)), PATIENCE).await;
        assert_eq!(status.code(), Some(expected), "zk-recipes {args:?}");
    }
}
