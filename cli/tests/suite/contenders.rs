//! `status --json` shows each contender's id, fencing token and whether it was asked to let
//! go, as the library's `contenders()` lists them (a node it may not read too, without an
//! id), against a real ZooKeeper server.

use crate::support;

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::{exit_within, output_within, signal, start, Test};
use zk_harness::{await_count, await_empty, observer, PATIENCE};
use zk_recipes::{Mutex, NodeAcl, Session};

async fn status_json(test: &Test) -> Value {
    let (output, _) = output_within(&mut test.command(&["status", "--json", &test.root])).await;
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("a JSON line")
}

#[tokio::test]
async fn status_shows_ids_tokens_and_a_revocation_request() {
    let test = Test::new("contenders").await;
    let session = Session::connect(&test.hosts).await.expect("connect");
    let guard = Mutex::new(&session, &test.root)
        .unwrap()
        .id("worker-7")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let mut waiter = start(&mut test.command(&["lock", &test.root]));
    let client = observer(&test.hosts).await;
    await_count(&client, &test.root, 2).await;

    let line = status_json(&test).await;
    assert_eq!(line["kind"], "lock");
    assert_eq!(line["holder"]["id"], "worker-7");
    assert_eq!(line["holder"]["token"], guard.fencing_token());
    assert_eq!(line["holder"]["revocation_requested"], false);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
    let waiter_id = format!("{}/{}", host.trim(), waiter.id().expect("a pid"));
    assert_eq!(line["waiters"][0]["id"], waiter_id.as_str());

    let (asked, _) = output_within(&mut test.command(&["revoke", &test.root])).await;
    assert!(asked.status.success(), "{asked:?}");
    let line = status_json(&test).await;
    assert_eq!(line["holder"]["revocation_requested"], true);
    assert_eq!(line["waiters"][0]["revocation_requested"], false);

    signal(&waiter, Signal::SIGINT);
    assert_eq!(
        exit_within(&mut waiter, PATIENCE).await.code(),
        Some(128 + 2)
    );
    guard.release().await.unwrap();
    await_empty(&client, &test.root).await;
}

#[tokio::test]
async fn status_and_observe_list_a_contender_whose_node_they_may_not_read() {
    let test = Test::new("contenders-unreadable").await;
    let session = Session::connect(&test.hosts).await.expect("connect");
    let mutex = Mutex::new(&session, &test.root).unwrap();
    let guard = mutex.clone().id("worker-7").unwrap().lock().await.unwrap();
    let private =
        zk_harness::digest_session(&test.hosts, Duration::from_secs(10), "billing-svc", "p").await;
    let hidden = Mutex::new(&private, &test.root)
        .unwrap()
        .node_acl(NodeAcl::CreatorOnly);
    let waiter = tokio::spawn(async move { hidden.lock().await.unwrap().release().await });
    let client = observer(&test.hosts).await;
    let names = await_count(&client, &test.root, 2).await;
    let hidden_node = format!("{}/{}", test.root, names[1]);

    let line = status_json(&test).await;
    assert_eq!(line["holder"]["id"], "worker-7");
    assert_eq!(line["waiters"][0]["node"], hidden_node.as_str());
    assert_eq!(line["waiters"][0]["id"], Value::Null);
    let (output, _) = output_within(&mut test.command(&["status", &test.root])).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{}: held by worker-7; waiting: {}\n", test.root, names[1])
    );
    let mut observe = test.command(&["observe", "--json", &test.root]);
    let (mut observing, _out, first) = support::first_line(&mut observe).await;
    let seen: Value = serde_json::from_str(&first).expect("a JSON line");
    assert_eq!(seen["waiters"][0]["node"], hidden_node.as_str());
    signal(&observing, Signal::SIGINT);
    assert_eq!(exit_within(&mut observing, PATIENCE).await.code(), Some(0));

    guard.release().await.unwrap();
    zk_harness::bounded("the waiter", PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    await_empty(&client, &test.root).await;
}

/// `lock --id ID` (also with `--semaphore`) gives the node the id `status` shows; an id the
/// library refuses exits 64 at once with its reason, before connecting (nothing listens at
/// the hosts given: a connect would take the whole 20 s connect timeout and exit 69).
#[tokio::test]
async fn lock_id_is_what_status_shows_and_a_bad_one_exits_64_at_once() {
    let test = Test::new("contenders-lock-id").await;
    let leases = format!("{}-leases", test.root);
    let mut lock = test.command(&["lock", "--id", "backup@host-3", &test.root]);
    let (mut holding, _out, _) = support::first_line(&mut lock).await;
    let mut lease = test.command(&["lock", "--semaphore", "2", "--id", "crawler-1", &leases]);
    let (mut leasing, _lease_out, _) = support::first_line(&mut lease).await;

    assert_eq!(status_json(&test).await["holder"]["id"], "backup@host-3");
    let (output, _) = output_within(&mut test.command(&["status", "--json", &leases])).await;
    let line: Value = serde_json::from_slice(&output.stdout).expect("a JSON line");
    assert_eq!(line["leases"][0]["id"], "crawler-1");

    for (id, reason) in [("__REVOKE__", "revoke marker"), ("", "is empty")] {
        let mut refused = support::zk_recipes("127.0.0.1:1");
        let args = [
            "lock",
            "--connect-timeout",
            "20s",
            "--id",
            id,
            "/l",
            "--",
            "true",
        ];
        let (output, took) = output_within(refused.args(args)).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{id:?}: {stderr}");
        assert!(stderr.contains(reason), "{id:?}: {stderr}");
        assert!(took < Duration::from_secs(2), "{id:?} took {took:?}");
    }

    for running in [&mut holding, &mut leasing] {
        signal(running, Signal::SIGTERM);
        assert!(exit_within(running, PATIENCE).await.success());
    }
    let client = observer(&test.hosts).await;
    await_empty(&client, &test.root).await;
    await_empty(&client, &format!("{leases}/leases")).await;
    await_empty(&client, &format!("{leases}/locks")).await;
}
