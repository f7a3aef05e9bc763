//! `status --json` shows each contender's id, fencing token and whether it was asked to let
//! go, as the library's `contenders()` lists them, against a real ZooKeeper server.

mod support;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::{exit_within, output_within, signal, start, Test};
use zk_harness::{await_count, await_empty, observer, PATIENCE};
use zk_recipes::{Mutex, Session};

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
