//! `zk-recipes` with a stderr or a stdout that cannot be written (a full device, a pipe
//! nobody reads): messages are best-effort, the exit status is the contract; against a
//! real ZooKeeper server.

use crate::support;

use std::time::Duration;

use nix::sys::signal::Signal;
use support::{
    alive, await_lines, closed_pipe, delete_from_outside, exit_within, first_line, full_device,
    signal, start, Test,
};
use zk_harness::PATIENCE;

/// Writes its pid and lock node to `$0`, then sleeps until stopped.
const REPORTS: &str = r#"echo "$$ $ZK_LOCK_NODE" > "$0"; exec sleep 30"#;

#[tokio::test]
async fn a_holder_whose_stderr_cannot_be_written_still_stops_cmd_at_a_loss() {
    for (what, stderr) in [
        ("/dev/full", full_device()),
        ("a closed pipe", closed_pipe()),
    ] {
        let test = Test::new("stderr").await;
        let mut lock = test.command(&["lock", &test.root, "--", "sh", "-c", REPORTS]);
        let mut lock = start(lock.arg(test.scratch.file("started")).stderr(stderr));
        let line = await_lines(&test.scratch.file("started"), 1)
            .await
            .remove(0);
        let (pid, node) = line.split_once(' ').expect("pid and node");
        let pid: i32 = pid.parse().expect("a pid");

        let deleted = delete_from_outside(&test.hosts, node).await;
        let status = exit_within(&mut lock, PATIENCE).await;
        let after = deleted.elapsed();

        assert_eq!(status.code(), Some(79), "stderr on {what}: {status}");
        assert!(
            after < Duration::from_secs(2),
            "stderr on {what}: exited {after:?} after the loss"
        );
        assert!(!alive(pid), "stderr on {what}: CMD survived the loss");
        assert!(test.children().await.is_empty());
    }
}

#[tokio::test]
async fn observe_exits_0_once_nobody_reads_its_output() {
    // `zk-recipes -vv observe PATH 2>&1 | head -1`: stderr closed from the start, stdout
    // closed after the first line.
    let test = Test::new("head").await;
    let mut observe = test.command(&["-vv", "observe", &test.root]);
    let (mut observe, stdout, first) = first_line(observe.stderr(closed_pipe())).await;
    assert_eq!(first, format!("{}: no such path\n", test.root));
    drop(stdout);

    // A change: observe prints again, into the closed pipe.
    let (_session, _held) = test.hold_lock().await;
    let status = exit_within(&mut observe, PATIENCE).await;

    assert_eq!(status.code(), Some(0), "{status}");
}

/// How soon a watching command must notice that its reader has gone: the session's close
/// (at most 2 s) and a loaded machine's slack; a change never comes.
const PROMPTLY: Duration = Duration::from_secs(8);

#[tokio::test]
async fn observe_and_members_watch_exit_0_once_their_reader_goes_on_a_path_that_never_changes() {
    // `zk-recipes observe PATH | head -1`, `zk-recipes members --watch PATH | head -1`: the
    // reader goes after the first line, and PATH never changes again.
    let test = Test::new("head-quiet").await;
    let root = test.root.as_str();
    for args in [&["observe", root][..], &["members", "--watch", root]] {
        let mut command = test.command(args);
        let (mut watching, stdout, first) = first_line(&mut command).await;
        assert!(first.ends_with('\n'), "{args:?}: {first:?}");
        drop(stdout);

        let status = exit_within(&mut watching, PROMPTLY).await;

        assert_eq!(status.code(), Some(0), "{args:?}: {status}");
    }
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn observe_into_a_file_or_dev_null_goes_on_printing() {
    // A file or /dev/null is never closed: watching for a closed stdout must not end it.
    let test = Test::new("observe-file").await;
    let file = test.scratch.file("out");
    let out = std::fs::File::create(&file).expect("a file");
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let mut into_file = start(test.command(&["observe", &test.root]).stdout(out));
    let mut into_null = start(test.command(&["observe", &test.root]).stdout(null));
    await_lines(&file, 1).await;

    let (_session, _held) = test.hold_lock().await;
    // The lock's path may show up empty first: its first touch creates it, then the node.
    let mut lines = await_lines(&file, 2).await;
    if lines[1].ends_with(": empty") {
        lines = await_lines(&file, 3).await;
    }
    assert!(lines[lines.len() - 1].contains("held by"), "{lines:?}");
    assert!(
        into_null.try_wait().expect("a look").is_none(),
        "observe > /dev/null ended"
    );
    for observe in [&mut into_file, &mut into_null] {
        signal(observe, Signal::SIGTERM);
        assert_eq!(exit_within(observe, PATIENCE).await.code(), Some(0));
    }
}
