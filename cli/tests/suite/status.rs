//! `zk-recipes status` and `observe` tell what PATH is without guessing, against a real
//! ZooKeeper server: a path that does not exist is "no such path" (`status` exits 66); a
//! recipe is told only by its contenders' names or by its structure, anything else is shown
//! as it is (its children); `--kind` says what PATH is, and a KeyedMutex root shows each key
//! with its holder, or free.

use crate::support;

use std::process::Stdio;
use std::sync::Arc;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::{exit_within, output_within, signal, start, Test};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;
use zk_harness::{await_count, await_empty, bounded, observer, PATIENCE};
use zk_recipes::zookeeper::{Acls, CreateMode};
use zk_recipes::{Group, KeyedMutex, Mutex, Partitioner, Session, Worker};

/// Runs `zk-recipes status ARGS`; its exit status and what it printed.
async fn status(test: &Test, args: &[&str]) -> (Option<i32>, String) {
    let (output, _) = output_within(test.command(&["status"]).args(args)).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "{args:?}: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code(), stdout)
}

/// Runs `zk-recipes status --json ARGS`, which must exit 0; the line, parsed.
async fn status_json(test: &Test, args: &[&str]) -> Value {
    let json = [&["--json"], args].concat();
    let (code, stdout) = status(test, &json).await;
    assert_eq!(code, Some(0), "{args:?}: {stdout}");
    serde_json::from_str(&stdout).unwrap_or_else(|err| panic!("{stdout:?}: {err}"))
}

/// Reads `observe --json`'s lines until one satisfies `wanted`; returns it. Fails the test
/// if none does within [`PATIENCE`].
async fn line_where(
    lines: &mut Lines<BufReader<ChildStdout>>,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let awaited = async {
        loop {
            let line = lines.next_line().await.expect("read observe's output");
            let line = line.expect("observe is still running");
            let parsed: Value = serde_json::from_str(&line).expect("a JSON line");
            if wanted(&parsed) {
                return parsed;
            }
        }
    };
    bounded("the line awaited from observe", PATIENCE, awaited).await
}

#[tokio::test]
async fn a_path_that_does_not_exist_is_no_such_path_and_status_exits_66() {
    let test = Test::new("status-missing").await;
    let root = test.root.as_str();
    let missing = format!("{root}: no such path\n");
    assert_eq!(status(&test, &[root]).await, (Some(66), missing.clone()));
    assert_eq!(
        status(&test, &["--kind", "keyed", root]).await,
        (Some(66), missing)
    );
    let (code, json) = status(&test, &["--json", root]).await;
    let parsed: Value = serde_json::from_str(&json).expect("a JSON line");
    assert_eq!((code, &parsed["kind"]), (Some(66), &"missing".into()));

    // `observe` says so too, and goes on: the path is watched for its creation.
    let mut observe = test.command(&["observe", "--json", root]);
    let mut observe = start(observe.stdout(Stdio::piped()));
    let mut lines = BufReader::new(observe.stdout.take().expect("stdout")).lines();
    line_where(&mut lines, |line| line["kind"] == "missing").await;
    let (_session, guard) = test.hold_lock().await;
    let held = line_where(&mut lines, |line| line["kind"] == "lock").await;
    assert_eq!(held["holder"]["node"], guard.node());
    guard.release().await.expect("release");
    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
    await_empty(&observer(&test.hosts).await, root).await;
}

/// The issue's `/sched`: a KeyedMutex root with a key named `locks` (a semaphore's part)
/// and one named `order-1234567890` (ten digits, like a sequence number) is shown as it is,
/// never as a semaphore nor as a lock held by a key; `--kind keyed` lists each key with its
/// holder (its id: `KeyedMutex::id`, `lock --id`), or free.
#[tokio::test]
async fn a_name_that_looks_like_a_recipe_s_is_no_recipe() {
    let test = Test::new("status-sched").await;
    let root = test.root.as_str();
    let session = Session::connect(&test.hosts).await.expect("connect");
    let keyed = KeyedMutex::new(&session, root).unwrap().id("worker-7");
    let guard = keyed.unwrap().lock("locks").await.expect("lock the key");
    let children = |names: &str| format!("{root}: no contenders; children: {names}\n");
    assert_eq!(status(&test, &[root]).await, (Some(0), children("locks")));

    let client = observer(&test.hosts).await;
    let idle = format!("{root}/order-1234567890");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client
        .create(&idle, b"", &persistent)
        .await
        .expect("an idle key");
    let both = children("locks, order-1234567890");
    assert_eq!(status(&test, &[root]).await, (Some(0), both));
    let told = status_json(&test, &[root]).await;
    assert_eq!(told["kind"], "unknown");
    assert_eq!(
        told["children"],
        serde_json::json!(["locks", "order-1234567890"])
    );

    let key = format!("{root}/locks");
    let mut waiter = start(&mut test.command(&["lock", "--id", "worker-8", &key]));
    await_count(&client, &key, 2).await;
    let keys = format!("{root}: locks held by worker-7 (1 waiting), order-1234567890 free\n");
    assert_eq!(
        status(&test, &["--kind", "keyed", root]).await,
        (Some(0), keys)
    );
    let listed = status_json(&test, &["--kind", "keyed", root]).await;
    assert_eq!(listed["kind"], "keyed");
    let locks = &listed["keys"][0];
    assert_eq!(
        (&locks["key"], &locks["holder"]["id"]),
        (&"locks".into(), &"worker-7".into())
    );
    assert_eq!(locks["holder"]["token"], guard.fencing_token());
    assert_eq!(locks["waiters"][0]["id"], "worker-8");
    let idle_key = &listed["keys"][1];
    assert_eq!(
        (&idle_key["key"], &idle_key["holder"]),
        (&"order-1234567890".into(), &Value::Null)
    );

    signal(&waiter, Signal::SIGINT);
    assert_eq!(
        exit_within(&mut waiter, PATIENCE).await.code(),
        Some(128 + 2)
    );
    guard.release().await.expect("release");
    client
        .delete(&idle, None)
        .await
        .expect("delete the idle key");
    await_empty(&client, &key).await;
}

/// `--kind` says what PATH is: a group's members with their data; an empty semaphore that
/// records no maximum (as Curator's leaves it) is shown as its two parts until
/// `--kind semaphore` says it is one.
#[tokio::test]
async fn kind_says_what_a_path_is() {
    let test = Test::new("status-kind").await;
    let root = test.root.as_str();
    let session = Session::connect(&test.hosts).await.expect("connect");
    let group = Group::new(&session, root).expect("a group");
    let member = group
        .join("replica-1", "10.0.0.7:8080")
        .await
        .expect("join");
    let expected = format!("{root}: no contenders; children: replica-1\n");
    assert_eq!(status(&test, &[root]).await, (Some(0), expected));
    let members = format!("{root}: members: replica-1=10.0.0.7:8080\n");
    assert_eq!(
        status(&test, &["--kind", "group", root]).await,
        (Some(0), members)
    );
    let listed = status_json(&test, &["--kind", "group", root]).await;
    assert_eq!(listed["kind"], "group");
    assert_eq!(listed["members"][0]["data"], "10.0.0.7:8080");
    member.leave().await.expect("leave");

    // Persistent, as Curator leaves them: a root of its own, which no container reaper
    // deletes under it.
    let client = observer(&test.hosts).await;
    let semaphore = zk_harness::unique_root("cli-status-semaphore");
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let parts = [format!("{semaphore}/leases"), format!("{semaphore}/locks")];
    for node in [&semaphore].into_iter().chain(&parts) {
        client.create(node, b"", &persistent).await.expect("create");
    }
    let shown = format!("{semaphore}: no contenders; children: leases, locks\n");
    assert_eq!(status(&test, &[&semaphore]).await, (Some(0), shown));
    let empty = format!("{semaphore}: 0 leases; nobody waiting\n");
    assert_eq!(
        status(&test, &["--kind", "semaphore", &semaphore]).await,
        (Some(0), empty)
    );
    for node in parts.iter().chain([&semaphore]) {
        client.delete(node, None).await.expect("delete");
    }
    assert_eq!(client.check_stat(&semaphore).await.expect("check"), None);
    await_empty(&client, root).await;
}

/// `observe --kind keyed` prints a line when a key's lock changes hands (a watch on every
/// key, not only on the root).
#[tokio::test]
async fn observe_kind_keyed_follows_every_key() {
    let test = Test::new("observe-keyed").await;
    let root = test.root.as_str();
    let mut observe = test.command(&["observe", "--json", "--kind", "keyed", root]);
    let mut observe = start(observe.stdout(Stdio::piped()));
    let mut lines = BufReader::new(observe.stdout.take().expect("stdout")).lines();
    line_where(&mut lines, |line| line["kind"] == "missing").await;

    let session = Session::connect(&test.hosts).await.expect("connect");
    let keyed = KeyedMutex::new(&session, root).unwrap();
    let a = keyed
        .clone()
        .id("worker-a")
        .unwrap()
        .lock("a")
        .await
        .expect("a");
    let b = keyed
        .clone()
        .id("worker-b")
        .unwrap()
        .lock("b")
        .await
        .expect("b");
    let holder = |line: &Value, key: &str| -> Value {
        let keys = line["keys"].as_array().cloned().unwrap_or_default();
        let key = keys.into_iter().find(|k| k["key"] == key);
        key.map_or(Value::Null, |key| key["holder"]["id"].clone())
    };
    line_where(&mut lines, |line| {
        holder(line, "a") == "worker-a" && holder(line, "b") == "worker-b"
    })
    .await;
    // The key's path stays (a container, deleted some time later): the root's children do
    // not change, only the key's.
    a.release().await.expect("release a");
    line_where(&mut lines, |line| {
        holder(line, "a").is_null() && holder(line, "b") == "worker-b"
    })
    .await;
    let c = Mutex::new(&session, &format!("{root}/a"))
        .unwrap()
        .id("worker-c");
    let c = c.unwrap().lock().await.expect("a again");
    line_where(&mut lines, |line| holder(line, "a") == "worker-c").await;

    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
    b.release().await.expect("release b");
    c.release().await.expect("release c");
    let client = observer(&test.hosts).await;
    for key in ["a", "b"] {
        await_empty(&client, &format!("{root}/{key}")).await;
    }
}

/// `observe --kind group` prints a line when a member comes, when its data is set (a data
/// watch on every member), and when it leaves.
#[tokio::test]
async fn observe_kind_group_follows_members_and_their_data() {
    let test = Test::new("observe-group").await;
    let root = test.root.as_str();
    let session = Session::connect(&test.hosts).await.expect("connect");
    let member = Group::new(&session, root)
        .unwrap()
        .join("replica-1", "10.0.0.7:8080")
        .await
        .expect("join");
    let mut observe = test.command(&["observe", "--json", "--kind", "group", root]);
    let mut observe = start(observe.stdout(Stdio::piped()));
    let mut lines = BufReader::new(observe.stdout.take().expect("stdout")).lines();
    let data = |line: &Value| line["members"][0]["data"].clone();
    line_where(&mut lines, |line| data(line) == "10.0.0.7:8080").await;

    let client = observer(&test.hosts).await;
    let node = format!("{root}/replica-1");
    client
        .set_data(&node, b"10.0.0.8:8080", None)
        .await
        .expect("set the member's data");
    line_where(&mut lines, |line| data(line) == "10.0.0.8:8080").await;
    member.leave().await.expect("leave");
    // No members, or no group any more (an empty container root is deleted some time later).
    line_where(&mut lines, |line| {
        line["members"] == serde_json::json!([]) || line["kind"] == "missing"
    })
    .await;

    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
    await_empty(&client, root).await;
}

/// Works what `worker` is granted: each hold until it is moved away or lost, then released.
/// Stop the task to leave.
fn work(worker: &Arc<Worker>) -> tokio::task::JoinHandle<()> {
    let worker = worker.clone();
    tokio::spawn(async move {
        while let Ok(hold) = worker.next_partition().await {
            tokio::spawn(async move {
                tokio::select! {
                    _ = hold.moved() => {}
                    _ = hold.lost() => {}
                }
                let _ = hold.release().await;
            });
        }
    })
}

/// Leaves, once the task that works `worker`'s partitions stopped.
async fn leave(worker: Arc<Worker>, working: tokio::task::JoinHandle<()>) {
    working.abort();
    let _ = working.await;
    let worker = Arc::into_inner(worker).expect("the only handle left");
    bounded("leave", PATIENCE, worker.leave())
        .await
        .expect("leave");
}

/// Waits until `worker` sees `members` and holds what the assignment gives it.
async fn settled(worker: &Worker, members: &[&str]) {
    let mut states = worker.states();
    let waited = states.wait_for(|s| s.members == members && s.owned.keys().eq(s.assigned.iter()));
    let waited = tokio::time::timeout(PATIENCE, waited).await;
    assert!(
        waited.is_ok(),
        "not settled: {:?}",
        *worker.states().borrow()
    );
}

/// A partitioner's path is told by its structure: `status` shows its members, how many
/// partitions each holds, and each partition's holder; `observe` prints a line when a
/// member joins and when one leaves (watches on the members, their data and the locks).
#[tokio::test]
async fn a_partitioner_shows_its_members_and_who_holds_each_partition() {
    let test = Test::new("status-partitioner").await;
    let root = test.root.as_str();
    let mut observe = test.command(&["observe", "--json", root]);
    let mut observe = start(observe.stdout(Stdio::piped()));
    let mut lines = BufReader::new(observe.stdout.take().expect("stdout")).lines();
    line_where(&mut lines, |line| line["kind"] == "missing").await;

    let partitions = ["p0", "p1", "p2", "p3"];
    let session = Session::connect(&test.hosts).await.expect("connect");
    let partitioner = Partitioner::new(&session, root, partitions).unwrap();
    let a = Arc::new(
        partitioner
            .clone()
            .id("a")
            .unwrap()
            .join()
            .await
            .expect("a"),
    );
    let working_a = work(&a);
    settled(&a, &["a"]).await;
    let held_by = |line: &Value, id: &str| -> usize {
        let partitions = line["partitions"].as_array().cloned().unwrap_or_default();
        (partitions.iter())
            .filter(|p| p["holder"]["id"] == id)
            .count()
    };
    line_where(&mut lines, |line| {
        line["kind"] == "partitioner" && held_by(line, "a") == 4
    })
    .await;

    let b = Arc::new(
        partitioner
            .clone()
            .id("b")
            .unwrap()
            .join()
            .await
            .expect("b"),
    );
    let working_b = work(&b);
    settled(&a, &["a", "b"]).await;
    settled(&b, &["a", "b"]).await;
    line_where(&mut lines, |line| {
        held_by(line, "a") == 2 && held_by(line, "b") == 2
    })
    .await;

    // `status`, told from the nodes and as `--kind partitioner`: one line with the members
    // and each partition's holder.
    let mut owners: Vec<(String, &str)> = (a.owned().into_keys().map(|p| (p, "a")))
        .chain(b.owned().into_keys().map(|p| (p, "b")))
        .collect();
    owners.sort();
    let held: Vec<String> = (owners.iter())
        .map(|(partition, id)| format!("{partition} held by {id}"))
        .collect();
    let expected = format!(
        "{root}: members: a (2 held), b (2 held); {}\n",
        held.join(", ")
    );
    assert_eq!(status(&test, &[root]).await, (Some(0), expected.clone()));
    assert_eq!(
        status(&test, &["--kind", "partitioner", root]).await,
        (Some(0), expected)
    );
    let listed = status_json(&test, &[root]).await;
    assert_eq!(listed["kind"], "partitioner");
    assert_eq!(listed["members"][1]["id"], "b");
    assert_eq!(listed["members"][1]["held"], 2);
    assert_eq!(listed["partitions"][0]["key"], "p0");
    assert!(listed["partitions"][0]["holder"]["token"].as_u64() > Some(0));

    leave(b, working_b).await;
    line_where(&mut lines, |line| {
        held_by(line, "a") == 4 && line["members"].as_array().map(Vec::len) == Some(1)
    })
    .await;
    leave(a, working_a).await;
    signal(&observe, Signal::SIGTERM);
    assert_eq!(exit_within(&mut observe, PATIENCE).await.code(), Some(0));
    let client = observer(&test.hosts).await;
    await_empty(&client, &format!("{root}/members")).await;
    for partition in partitions {
        await_empty(&client, &format!("{root}/partitions/{partition}")).await;
    }
}
