//! `zk-recipes`' arguments: durations out of range, malformed paths, ids and connect
//! strings refused before connecting (64), and `--timeout 0s`; against a real ZooKeeper
//! server where one is needed.

mod support;

use std::time::Duration;

use support::{output_within, zk_recipes};

/// Nothing listens there: connecting fails (69) after `--connect-timeout`.
const NOWHERE: &str = "127.0.0.1:1";

#[tokio::test]
async fn durations_out_of_range_exit_64_before_connecting() {
    let huge = "3000000000000000h";
    let cases: [&[&str]; 8] = [
        &["status", "--connect-timeout", huge, "/x"],
        &["status", "--session-timeout", huge, "/x"],
        // More than 2^31-1 ms: ZooKeeper's session timeout is an i32 of milliseconds.
        &["status", "--session-timeout", "597h", "/x"],
        &["status", "--session-timeout", "25h", "/x"],
        &["lock", "--kill-after", huge, "/x", "--", "true"],
        &["lock", "--timeout", huge, "/x", "--", "true"],
        &["elect", "--restart-after", huge, "/x", "--id", "a"],
        &["lock", "--timeout", "86400.001s", "/x", "--", "true"],
    ];
    for args in cases {
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
            stderr.contains(option) && stderr.contains("at most 24h"),
            "{args:?}: {stderr}"
        );
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
    }
}

#[tokio::test]
async fn bad_arguments_exit_64_at_once_with_their_reason() {
    let cases: [(&[&str], &str); 6] = [
        (&["lock", "/bad//path", "--", "true"], "empty component"),
        (&["lock", "/bad/path/", "--", "true"], "end with '/'"),
        (&["status", "relative"], "absolute"),
        (&["observe", "/zookeeper/quota"], "reserved"),
        (&["elect", "/e", "--id", "", "--", "true"], "--id"),
        (&["status", "--hosts", "127.0.0.1:", "/x"], "port"),
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
