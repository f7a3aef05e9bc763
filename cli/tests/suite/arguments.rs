//! `zk-recipes`' arguments: durations out of range, malformed paths, ids and connect
//! strings refused before connecting (64), and `--timeout 0s`; against a real ZooKeeper
//! server where one is needed.

use crate::support;

use std::time::Duration;

use support::{exit_within, output_within, start, zk_recipes, Test};
use zk_harness::{children, observer, PATIENCE};

/// Nothing listens there: connecting fails (69) after `--connect-timeout`.
const NOWHERE: &str = "127.0.0.1:1";

#[tokio::test]
async fn durations_out_of_range_exit_64_before_connecting() {
    let huge = "3000000000000000h";
    let too_long = "at most 24h";
    let cases: [(&[&str], &str); 10] = [
        (&["status", "--connect-timeout", huge, "/x"], too_long),
        (&["status", "--session-timeout", huge, "/x"], too_long),
        // More than 2^31-1 ms: ZooKeeper's session timeout is an i32 of milliseconds.
        (&["status", "--session-timeout", "597h", "/x"], too_long),
        (&["status", "--session-timeout", "25h", "/x"], too_long),
        (
            &["lock", "--kill-after", huge, "/x", "--", "true"],
            too_long,
        ),
        (&["lock", "--timeout", huge, "/x", "--", "true"], too_long),
        (
            &["elect", "--restart-after", huge, "/x", "--id", "a"],
            too_long,
        ),
        (
            &["lock", "--timeout", "86400.001s", "/x", "--", "true"],
            too_long,
        ),
        // The client would take a session timeout of 0 for its default, and fail a connect
        // timeout of 0 with an odd reason.
        (&["status", "--session-timeout", "0s", "/x"], "more than 0s"),
        (
            &["status", "--connect-timeout", "0ms", "/x"],
            "more than 0s",
        ),
    ];
    for (args, reason) in cases {
        let (subcommand, option) = (args[0], args[1]);
        let mut command = zk_recipes(NOWHERE);
        command.arg(subcommand);
        // A connect would fail with 69 after 2 s (the default connect timeout is 10 s).
        if option != "--connect-timeout" {
            command.args(["--connect-timeout", "2s"]);
        }
        let (output, took) = output_within(command.args(&args[1..])).await;
        let stderr = String::from_utf8_lossy(&output.stderr);

        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(
            stderr.contains(option) && stderr.contains(reason),
            "{args:?}: {stderr}"
        );
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
    }
}

#[tokio::test]
async fn bad_arguments_exit_64_at_once_with_their_reason() {
    let cases: [(&[&str], &str); 8] = [
        (&["lock", "/bad//path", "--", "true"], "empty component"),
        // Checked by the library's own rules: a character ZooKeeper rejects.
        (&["lock", "/bad/\u{e000}", "--", "true"], "rejects"),
        (&["lock", "/bad/path/", "--", "true"], "end with '/'"),
        (&["status", "relative"], "absolute"),
        (&["observe", "/zookeeper/quota"], "reserved"),
        (&["elect", "/e", "--id", "", "--", "true"], "--id"),
        (&["status", "--hosts", "127.0.0.1:", "/x"], "port"),
        (&["status", "--hosts", "zk1/app,zk2", "/x"], "last host"),
    ];
    for (args, reason) in cases {
        let mut command = zk_recipes(NOWHERE);
        let (output, took) = output_within(command.args(args)).await;
        let stderr = String::from_utf8_lossy(&output.stderr);

        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
    }
}

/// Runs `zk-recipes lock OPTIONS ROOT -- true` 40 times on a free lock; fails the test
/// unless every run took it.
async fn takes_a_free_lock_every_time(test: &Test, options: &[&str]) {
    let mut refused = 0;
    for _ in 0..40 {
        let mut lock = test.command(&["lock"]);
        lock.args(options).args([&test.root, "--", "true"]);
        let status = exit_within(&mut start(&mut lock), PATIENCE).await;
        match status.code() {
            Some(0) => {}
            Some(75) => refused += 1,
            _ => panic!("{options:?}: {status}"),
        }
    }
    assert_eq!(
        refused, 0,
        "{options:?}: a free lock refused {refused} of 40 times"
    );
}

/// Checks that the test's path holds the semaphore's two queues, empty, and nothing else.
async fn only_empty_semaphore_queues(test: &Test) {
    let client = observer(&test.hosts).await;
    assert_eq!(test.children().await, ["leases", "locks"]);
    for queue in ["leases", "locks"] {
        let queue = format!("{}/{queue}", test.root);
        assert!(children(&client, &queue).await.is_empty(), "{queue}");
    }
}

#[tokio::test]
async fn timeout_0s_takes_a_free_lock_or_lease_every_time() {
    takes_a_free_lock_and_lease_every_time("0s").await;
}

/// Needs the library's `try_lock_for` and `try_acquire_for` to try once however short the
/// timeout (issue 23, section 3).
#[tokio::test]
async fn timeout_1ms_takes_a_free_lock_or_lease_every_time() {
    takes_a_free_lock_and_lease_every_time("1ms").await;
}

/// A free lock, then a free semaphore, taken with `--timeout TIMEOUT` every time.
async fn takes_a_free_lock_and_lease_every_time(timeout: &str) {
    let test = Test::new("timeout-short").await;
    takes_a_free_lock_every_time(&test, &["--timeout", timeout]).await;
    assert!(test.children().await.is_empty());
    takes_a_free_lock_every_time(&test, &["--semaphore", "2", "--timeout", timeout]).await;
    only_empty_semaphore_queues(&test).await;
}

#[tokio::test]
async fn ids_the_library_refuses_exit_64_at_once_without_a_server() {
    // A member's id is one node name under PATH; a candidate's id is not Curator's revoke
    // marker, nor a member's a contender's node name (revoke would ask it). By the library's
    // own rules, before connecting: with nothing reachable, a connect would take the whole
    // --connect-timeout and exit 69.
    let cases: [&[&str]; 6] = [
        &["join", "/g", "--id", "a/b"],
        &["join", "/g", "--id", ".."],
        &["join", "/g", "--id", "."],
        &["join", "/g", "--id", ""],
        &[
            "join",
            "/g",
            "--id",
            "_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-lock-0000000001",
        ],
        &["elect", "/e", "--id", "__REVOKE__"],
    ];
    for args in cases {
        let mut command = zk_recipes(NOWHERE);
        command
            .args(args)
            .args(["--connect-timeout", "20s", "--", "true"]);
        let (output, took) = output_within(&mut command).await;
        let stderr = String::from_utf8_lossy(&output.stderr);

        assert_eq!(output.status.code(), Some(64), "{args:?}: {stderr}");
        assert!(stderr.contains("--id"), "{args:?}: {stderr}");
        assert!(took < Duration::from_secs(2), "{args:?} took {took:?}");
    }
}
