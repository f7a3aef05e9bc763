//! `zk-recipes lock --semaphore N`: at most N CMDs at once across processes, the lease in
//! CMD's environment, `--timeout`, and another N refused, against a real ZooKeeper server.

use crate::support;

use std::time::{Duration, Instant};

use support::{exit_within, lines, start, zk_recipes, Test};
use zk_harness::{children, observer, PATIENCE};

/// Puts a file of its own into the directory `$0`, waits for a second CMD to do the same
/// (at most 30 s; not at all once the three others have written their counts), appends how
/// many files it then sees to `$1`, and removes its file: the log holds how many CMDs ran
/// at once, and does not depend on how fast processes start on a loaded machine.
const COUNTS: &str = r#"touch "$0/$$"
    for _ in $(seq 600); do [ "$(ls "$0" | wc -l)" -ge 2 ] && break
        [ -f "$1" ] && [ "$(wc -l < "$1")" -ge 3 ] && break; sleep 0.05; done
    ls "$0" | wc -l >> "$1"; sleep 0.1; rm "$0/$$""#;

/// The nodes left under the semaphore's `leases` and `locks`.
async fn leftovers(test: &Test) -> Vec<String> {
    let client = observer(&test.hosts).await;
    let mut left = children(&client, &format!("{}/leases", test.root)).await;
    left.extend(children(&client, &format!("{}/locks", test.root)).await);
    left
}

#[tokio::test]
async fn four_processes_with_semaphore_2_run_at_most_two_cmds_at_once() {
    let test = Test::new("semaphore").await;
    let (running, log) = (test.scratch.file("running"), test.scratch.file("log"));
    std::fs::create_dir(&running).expect("create the directory of running CMDs");

    let processes: Vec<_> = (0..4)
        .map(|_| {
            let mut lock = zk_recipes(&test.hosts);
            lock.args([
                "lock",
                "--semaphore",
                "2",
                &test.root,
                "--",
                "sh",
                "-c",
                COUNTS,
            ])
            .arg(&running)
            .arg(&log);
            start(&mut lock)
        })
        .collect();
    for mut process in processes {
        let status = exit_within(&mut process, PATIENCE).await;
        assert!(status.success(), "a CMD failed: {status}");
    }

    let counts: Vec<usize> = lines(&log)
        .iter()
        .map(|line| line.trim().parse().expect("a count"))
        .collect();
    assert_eq!(counts.len(), 4, "every CMD ran once: {counts:?}");
    assert!(
        counts.iter().all(|&n| n <= 2),
        "more than 2 at once: {counts:?}"
    );
    assert!(counts.contains(&2), "never 2 at once: {counts:?}");
    assert!(leftovers(&test).await.is_empty());
}

#[tokio::test]
async fn timeout_another_maximum_and_the_lease_in_cmd_environment() {
    let test = Test::new("leases").await;
    let (_session, leases) = test.hold_leases(2, 2).await;
    let [first, second] = <[_; 2]>::try_from(leases).expect("two leases");

    let ran = test.scratch.file("ran");
    let mut full = test.command(&["lock", "--semaphore", "2", "--timeout", "1s", &test.root]);
    let started = Instant::now();
    let status = exit_within(&mut start(full.args(["--", "touch"]).arg(&ran)), PATIENCE).await;
    let took = started.elapsed();
    assert_eq!(status.code(), Some(75));
    assert!(took < Duration::from_millis(1500), "gave up after {took:?}");
    assert!(!ran.exists(), "CMD ran without a lease");

    let other_max = [
        "lock",
        "--semaphore",
        "3",
        "--timeout",
        "1s",
        &test.root,
        "--",
        "true",
    ];
    let status = exit_within(&mut start(&mut test.command(&other_max)), PATIENCE).await;
    assert_eq!(status.code(), Some(64), "another maximum than the holders'");

    first.release().await.expect("release the first lease");
    let report = r#"echo "$ZK_LOCK_NODE $ZK_FENCING_TOKEN" > "$0""#;
    let mut lock = test.command(&["lock", "--semaphore", "2", &test.root, "--", "sh", "-c"]);
    let status = exit_within(&mut start(lock.arg(report).arg(&ran)), PATIENCE).await;
    assert!(status.success(), "{status}");
    let seen = lines(&ran).remove(0);
    let (node, token) = seen.split_once(' ').expect("node and token");
    assert!(
        node.starts_with(&format!("{}/leases/", test.root)),
        "{node}"
    );
    assert!(token.parse::<u64>().is_ok_and(|token| token > 0), "{token}");

    second.release().await.expect("release the second lease");
    assert!(leftovers(&test).await.is_empty());
}
