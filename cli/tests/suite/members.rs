//! `zk-recipes members` and `zk-recipes join`: members appear as `join` processes start and
//! vanish when they are SIGKILLed or stopped, against a real ZooKeeper server.

use crate::support;

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::{exit_within, first_line, output_within, signal, start, Test};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdout};
use zk_harness::{await_empty, bounded, observer, PATIENCE};
use zk_recipes::{Group, NodeAcl, Session};

/// Session timeout of the members: how long a killed member stays listed, at most (plus
/// the servers' tick).
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// `zk-recipes join ROOT --id ID --data data-ID -- sleep 60`.
fn member(test: &Test, id: &str) -> Child {
    let data = format!("data-{id}");
    let mut join = test.command(&["join", &test.root, "--id", id, "--data", &data]);
    join.args(["--session-timeout", "2s", "--", "sleep", "60"]);
    start(&mut join)
}

/// The ids of a `members --json` line.
fn ids(line: &str) -> Vec<String> {
    let parsed: Value = serde_json::from_str(line).expect("a JSON line");
    parsed["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// Reads lines until one lists exactly `expected`, within `within`.
async fn await_ids(out: &mut BufReader<ChildStdout>, expected: &[&str], within: Duration) {
    bounded(&format!("members {expected:?}"), within, async {
        loop {
            let mut line = String::new();
            let read = out.read_line(&mut line).await.expect("members' output");
            assert!(read > 0, "members --watch ended");
            if ids(&line) == expected {
                return;
            }
        }
    })
    .await;
}

#[tokio::test]
async fn members_appear_as_joiners_start_and_vanish_when_killed_or_stopped() {
    let test = Test::new("members").await;
    let mut watch = test.command(&["members", "--watch", "--json", &test.root]);
    let (mut watching, mut out, first) = first_line(&mut watch).await;
    assert_eq!(ids(&first), Vec::<String>::new());

    let mut a = member(&test, "a");
    let mut b = member(&test, "b");
    await_ids(&mut out, &["a", "b"], PATIENCE).await;

    // SIGKILL: nothing deletes the node; it goes when the servers expire the session.
    signal(&a, Signal::SIGKILL);
    exit_within(&mut a, PATIENCE).await;
    await_ids(&mut out, &["b"], SESSION_TIMEOUT * 3).await;

    // SIGTERM: passed on to CMD; the node is deleted once it exited.
    signal(&b, Signal::SIGTERM);
    let status = exit_within(&mut b, PATIENCE).await;
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "CMD's status: killed by SIGTERM"
    );
    await_ids(&mut out, &[], PATIENCE).await;

    signal(&watching, Signal::SIGTERM);
    assert_eq!(exit_within(&mut watching, PATIENCE).await.code(), Some(0));
    await_empty(&observer(&test.hosts).await, &test.root).await;
}

#[tokio::test]
async fn members_once_in_text_and_json_and_join_without_cmd_prints_its_node() {
    let test = Test::new("members-once").await;
    let mut join = test.command(&["join", &test.root, "--id", "m1", "--data", "10.0.0.7"]);
    let (mut joined, _out, line) = first_line(&mut join).await;
    assert_eq!(line.trim(), format!("ZK_MEMBER_NODE={}/m1", test.root));

    let (output, _) = output_within(&mut test.command(&["members", &test.root])).await;
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "members: m1=10.0.0.7\n"
    );
    let (output, _) = output_within(&mut test.command(&["members", "--json", &test.root])).await;
    let parsed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(parsed["members"][0]["data"], "10.0.0.7");

    signal(&joined, Signal::SIGINT);
    assert_eq!(exit_within(&mut joined, PATIENCE).await.code(), Some(0));
    await_empty(&observer(&test.hosts).await, &test.root).await;
}

#[tokio::test]
async fn a_taken_or_malformed_id_is_refused_and_cmd_does_not_run() {
    let test = Test::new("join-refused").await;
    let mut holder = member(&test, "x");
    let client = observer(&test.hosts).await;
    let node = format!("{}/x", test.root);
    bounded("the member's node", PATIENCE, async {
        loop {
            let (stat, made) = client.check_and_watch_stat(&node).await.expect("a look");
            if stat.is_some() {
                return;
            }
            made.changed().await;
        }
    })
    .await;
    let (_, before) = client.get_data(&node).await.expect("the node");

    let ran = test.scratch.file("ran");
    let touch = ["--", "touch", ran.to_str().expect("a path")];
    let mut taken = test.command(&["join", &test.root, "--id", "x"]);
    let (output, _) = output_within(taken.args(touch)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("another session"), "{stderr}");
    let mut bad = test.command(&["join", &test.root, "--id", "a/b"]);
    let (output, _) = output_within(bad.args(touch)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--id"), "{stderr}");
    assert!(!ran.exists(), "CMD ran");
    let (_, after) = client.get_data(&node).await.expect("the node");
    assert_eq!((after.czxid, after.version), (before.czxid, before.version));

    signal(&holder, Signal::SIGTERM);
    exit_within(&mut holder, PATIENCE).await;
    await_empty(&client, &test.root).await;
}

#[tokio::test]
async fn members_quotes_ids_and_data_so_that_data_cannot_forge_a_line() {
    let test = Test::new("members-quoted").await;
    let session = Session::connect(&test.hosts).await.expect("connect");
    let group = Group::new(&session, &test.root).expect("a group");
    // What anyone may write: a line break and a forged line, a terminal escape, a NUL; an id
    // with a space and one with `=`.
    let forged = b"1.2.3.4\nmembers: forged=9.9.9.9\x1b[2J\0".to_vec();
    let web_member = group.join("web 1", forged).await.expect("join");
    let pair_member = group.join("a=b", "c").await.expect("join");

    let (output, _) = output_within(&mut test.command(&["members", &test.root])).await;
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    // One line, each member one `ID=DATA` entry, nothing a terminal would act on.
    let web = r#""web 1"="1.2.3.4\nmembers: forged=9.9.9.9\u{1b}[2J\0""#;
    let pair = r#""a=b"=c"#;
    assert!(
        [
            format!("members: {pair} {web}\n"),
            format!("members: {web} {pair}\n")
        ]
        .contains(&text),
        "{text:?}"
    );
    assert!(
        !text.trim_end_matches('\n').chars().any(char::is_control),
        "{text:?}"
    );

    let (output, _) = output_within(&mut test.command(&["members", "--json", &test.root])).await;
    let parsed: Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    let members = parsed["members"].as_array().expect("members");
    let data = |id: &str| {
        members
            .iter()
            .find(|m| m["id"] == id)
            .map(|m| m["data"].clone())
    };
    assert_eq!(members.len(), 2, "{parsed}");
    assert_eq!(data("a=b"), Some("c".into()));
    assert_eq!(
        data("web 1"),
        Some("1.2.3.4\nmembers: forged=9.9.9.9\u{1b}[2J\0".into())
    );

    web_member.leave().await.expect("leave");
    pair_member.leave().await.expect("leave");
    await_empty(&observer(&test.hosts).await, &test.root).await;
}

/// The data of the member `id` in a `members --json` line: `Some(Null)` if listed without.
fn data_of(line: &str, id: &str) -> Option<Value> {
    let parsed: Value = serde_json::from_str(line).expect("a JSON line");
    let members = parsed["members"].as_array()?.clone();
    members
        .into_iter()
        .find(|m| m["id"] == id)
        .map(|m| m["data"].clone())
}

/// Reads lines until one satisfies `done`, within `PATIENCE`.
async fn await_line(out: &mut BufReader<ChildStdout>, what: &str, done: impl Fn(&str) -> bool) {
    bounded(what, PATIENCE, async {
        loop {
            let mut line = String::new();
            let read = out.read_line(&mut line).await.expect("members' output");
            assert!(read > 0, "members --watch ended");
            if done(&line) {
                return;
            }
        }
    })
    .await;
}

#[tokio::test]
async fn members_show_set_data_a_replaced_member_and_one_they_may_not_read() {
    let test = Test::new("members-data").await;
    let mut watch = test.command(&["members", "--watch", "--json", &test.root]);
    let (mut watching, mut out, _) = first_line(&mut watch).await;
    let (first, second) = (
        zk_harness::session(&test.hosts, SESSION_TIMEOUT).await,
        zk_harness::session(&test.hosts, SESSION_TIMEOUT).await,
    );
    let group = |s| Group::new(s, &test.root).unwrap();
    let a = group(&first).join("a", "1").await.unwrap();
    await_line(&mut out, "a=1", |l| data_of(l, "a") == Some("1".into())).await;
    // Its data set (Curator's setThisData), then its node replaced by another session's.
    let client = observer(&test.hosts).await;
    client.set_data(a.node(), b"2", None).await.unwrap();
    await_line(&mut out, "a=2", |l| data_of(l, "a") == Some("2".into())).await;
    a.leave().await.unwrap();
    let a = group(&second).join("a", "3").await.unwrap();
    await_line(&mut out, "a=3", |l| data_of(l, "a") == Some("3".into())).await;
    // A member whose node only its own user may read: listed, without data.
    let private =
        zk_harness::digest_session(&test.hosts, SESSION_TIMEOUT, "billing-svc", "p").await;
    let x = group(&private)
        .node_acl(NodeAcl::CreatorOnly)
        .join("x", "secret")
        .await
        .unwrap();
    await_line(&mut out, "x without data", |l| {
        data_of(l, "x") == Some(Value::Null) && data_of(l, "a") == Some("3".into())
    })
    .await;
    let (output, _) = output_within(&mut test.command(&["members", &test.root])).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "members: a=3 x\n");

    x.leave().await.unwrap();
    a.leave().await.unwrap();
    await_line(&mut out, "none", |l| ids(l).is_empty()).await;
    signal(&watching, Signal::SIGTERM);
    assert_eq!(exit_within(&mut watching, PATIENCE).await.code(), Some(0));
    await_empty(&client, &test.root).await;
}

/// A member SIGKILLed and restarted at once: its previous session's node is still there,
/// so `join` alone is refused (exit 69, CMD not run); `join --wait` joins once the servers
/// have expired that session, and runs CMD with the new node.
#[tokio::test]
async fn join_wait_joins_once_a_killed_members_node_is_gone() {
    // Long enough that the refused restart surely comes before the node goes.
    const KILLED_TIMEOUT: &str = "6s";
    let test = Test::new("join-wait").await;
    let client = observer(&test.hosts).await;
    let node = format!("{}/r2", test.root);
    let mut join = test.command(&["join", &test.root, "--id", "r2"]);
    join.args(["--session-timeout", KILLED_TIMEOUT]);
    let (mut killed, _out, line) = first_line(&mut join).await;
    assert_eq!(line.trim(), format!("ZK_MEMBER_NODE={node}"));
    let (_, first) = client.get_data(&node).await.expect("the node");
    signal(&killed, Signal::SIGKILL);
    exit_within(&mut killed, PATIENCE).await;

    let ran = test.scratch.file("ran");
    let touch = ["--", "touch", ran.to_str().expect("a path")];
    let mut refused = test.command(&["join", &test.root, "--id", "r2"]);
    let (output, _) = output_within(refused.args(touch)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(!ran.exists(), "CMD ran");

    let print = [
        "--",
        "sh",
        "-c",
        r#"echo "$ZK_MEMBER_NODE $ZK_MEMBER_ZXID""#,
    ];
    let mut waiting = test.command(&["join", &test.root, "--id", "r2", "--wait", "30s"]);
    let (output, waited) = output_within(waiting.args(print)).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let (printed, zxid) = stdout.trim().split_once(' ').expect("node and zxid");
    assert_eq!(printed, node);
    let zxid: i64 = zxid.parse().expect("a zxid");
    assert!(
        zxid > first.czxid,
        "a new node: {zxid} after {}",
        first.czxid
    );
    assert!(waited < PATIENCE, "{waited:?}");
    await_empty(&client, &test.root).await;
}
