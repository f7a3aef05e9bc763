//! `zk-recipes revoke PATH` and `lock --on-revoke`: asking the holder to let go, against a
//! real ZooKeeper server.

use crate::support;

use std::time::Duration;

use nix::sys::signal::Signal;
use support::{await_lines, exit_within, lock_running, output_within, signal, Test};
use zk_harness::PATIENCE;

/// Writes its lock node to `$0`, then sleeps; on SIGTERM writes `TERM` to `$1` and exits 0.
const TRAPS_TERM: &str = r#"trap 'echo TERM > "$1"; exit 0' TERM
echo "$ZK_LOCK_NODE" > "$0"; sleep 60 & wait"#;

#[tokio::test]
async fn a_holder_that_releases_on_revoke_stops_cmd_and_exits_80() {
    let test = Test::new("on-revoke-release").await;
    let (mut lock, node) = lock_running(&test, &["--on-revoke", "release"], TRAPS_TERM).await;

    let (asked, _) = output_within(&mut test.command(&["revoke", &test.root])).await;
    assert_eq!(asked.status.code(), Some(0), "{asked:?}");
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), node);
    await_lines(&test.scratch.file("termed"), 1).await;
    assert_eq!(exit_within(&mut lock, PATIENCE).await.code(), Some(80));
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn a_holder_that_ignores_revoke_keeps_holding() {
    let test = Test::new("on-revoke-ignore").await;
    let (mut lock, node) = lock_running(&test, &[], TRAPS_TERM).await;

    let (asked, _) = output_within(&mut test.command(&["revoke", &test.root])).await;
    assert_eq!(asked.status.code(), Some(0), "{asked:?}");
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), node);
    let kept = tokio::time::timeout(Duration::from_millis(500), lock.wait()).await;
    assert!(
        kept.is_err(),
        "an ignored request stopped the holder: {kept:?}"
    );
    assert_eq!(test.children().await.len(), 1);
    signal(&lock, Signal::SIGTERM);
    exit_within(&mut lock, PATIENCE).await;
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn revoke_where_nobody_holds_says_so_and_exits_81() {
    let test = Test::new("revoke-nobody").await;
    let (asked, _) = output_within(&mut test.command(&["revoke", &test.root])).await;
    assert_eq!(asked.status.code(), Some(81), "{asked:?}");
    assert!(String::from_utf8_lossy(&asked.stderr).contains("nobody holds"));
    assert!(asked.stdout.is_empty());
    let (bad, _) = output_within(&mut test.command(&["revoke", "relative"])).await;
    assert_eq!(bad.status.code(), Some(64), "{bad:?}");
}

#[tokio::test]
async fn a_leader_that_releases_on_revoke_stops_cmd_resigns_and_exits_80() {
    let test = Test::new("elect-on-revoke").await;
    let started = test.scratch.file("started");
    let script = r#"trap 'echo TERM > "$1"; exit 0' TERM
echo "$ZK_LEADER_NODE" > "$0"; sleep 60 & wait"#;
    let mut elect = test.command(&["elect", "--on-revoke", "release", "--id", "a", &test.root]);
    elect.args(["--", "sh", "-c", script]);
    let mut elect = support::start(elect.arg(&started).arg(test.scratch.file("termed")));
    let node = await_lines(&started, 1).await.remove(0);

    let (asked, _) = output_within(&mut test.command(&["revoke", &test.root])).await;
    assert_eq!(String::from_utf8_lossy(&asked.stdout).trim(), node);
    await_lines(&test.scratch.file("termed"), 1).await;
    assert_eq!(exit_within(&mut elect, PATIENCE).await.code(), Some(80));
    assert!(test.children().await.is_empty());
}

/// `revoke` asks contenders only (issue 33 §5): on a group's path, a member whose id ends
/// in ten digits (`web-1700000000`, a node that looks sequential) is nobody to ask; its
/// address is not overwritten, and `revoke` says nobody was asked.
#[tokio::test]
async fn revoke_on_a_group_leaves_a_member_whose_id_ends_in_ten_digits_alone() {
    let test = Test::new("revoke-member").await;
    let session = zk_recipes::Session::connect(&test.hosts).await.unwrap();
    let group = zk_recipes::Group::new(&session, &test.root).unwrap();
    let member = group.join("web-1700000000", "10.0.0.7:80").await.unwrap();
    let observer = zk_harness::observer(&test.hosts).await;
    let before = observer.get_data(member.node()).await.unwrap();

    let (asked, _) = output_within(&mut test.command(&["revoke", &test.root])).await;
    let after = observer.get_data(member.node()).await.unwrap();
    member.leave().await.unwrap();
    assert!(test.children().await.is_empty());

    assert_eq!(
        (after.0.as_slice(), after.1.version),
        (&b"10.0.0.7:80"[..], before.1.version),
        "the member's node was written: {asked:?}"
    );
    assert_eq!(asked.status.code(), Some(81), "{asked:?}");
    assert!(asked.stdout.is_empty(), "{asked:?}");
}

/// Semaphores are not revocable (as in Curator): `revoke` on a semaphore's path, or on its
/// `leases` folder (whose nodes are contenders', but no queue whose first holds), asks
/// nobody and writes no lease's node.
#[tokio::test]
async fn revoke_on_a_semaphore_asks_no_lease() {
    let test = Test::new("revoke-semaphore").await;
    let (_session, leases) = test.hold_leases(2, 2).await;
    let observer = zk_harness::observer(&test.hosts).await;
    let versions = || async {
        let mut versions = Vec::new();
        for lease in &leases {
            versions.push(
                observer
                    .check_stat(lease.node())
                    .await
                    .unwrap()
                    .unwrap()
                    .version,
            );
        }
        versions
    };
    let before = versions().await;

    let folder = format!("{}/leases", test.root);
    for path in [&test.root, &folder] {
        let (asked, _) = output_within(&mut test.command(&["revoke", path])).await;
        assert_eq!(asked.status.code(), Some(81), "{path}: {asked:?}");
        assert!(asked.stdout.is_empty(), "{path}: {asked:?}");
    }
    assert_eq!(versions().await, before, "a lease's node was written");
    for lease in leases {
        lease.release().await.expect("release");
    }
    assert!(zk_harness::children(&observer, &folder).await.is_empty());
}

/// `revoke` on paths that hold no queue of their own asks nobody and writes nothing: a
/// `KeyedMutex` root whose key is held (its children are keys), and a folder whose child is
/// a persistent node named as a contender's (no contender: contenders are ephemeral).
#[tokio::test]
async fn revoke_where_no_queue_is_writes_nothing() {
    let test = Test::new("revoke-no-queue").await;
    let observer = zk_harness::observer(&test.hosts).await;
    let session = zk_recipes::Session::connect(&test.hosts)
        .await
        .expect("connect");
    let keyed = format!("{}/keyed", test.root);
    let keys = zk_recipes::KeyedMutex::new(&session, &keyed).expect("a keyed mutex");
    let held = keys.lock("k").await.expect("lock");
    let folder = format!("{}/folder", test.root);
    let lookalike = format!("{folder}/_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-lock-0000000001");
    zk_harness::persistent(&observer, &folder).await;
    zk_harness::persistent(&observer, &lookalike).await;
    let versions = || async {
        let mut versions = Vec::new();
        for node in [held.node(), lookalike.as_str()] {
            versions.push(observer.check_stat(node).await.unwrap().unwrap().version);
        }
        versions
    };
    let before = versions().await;

    for path in [&keyed, &folder] {
        let (asked, _) = output_within(&mut test.command(&["revoke", path])).await;
        assert_eq!(asked.status.code(), Some(81), "{path}: {asked:?}");
        assert!(asked.stdout.is_empty(), "{path}: {asked:?}");
    }
    assert_eq!(versions().await, before, "a node was written");
    held.release().await.expect("release");
    observer.delete(&lookalike, None).await.unwrap();
    observer.delete(&folder, None).await.unwrap();
    assert!(zk_harness::children(&observer, &format!("{keyed}/k"))
        .await
        .is_empty());
}

/// `revoke` whose stdout was closed before it printed (`revoke PATH | true`) has asked the
/// holder all the same: it exits 0, not with a panic on the broken pipe.
#[tokio::test]
async fn revoke_into_a_closed_pipe_asks_and_exits_0() {
    let test = Test::new("revoke-closed-pipe").await;
    let (_session, guard) = test.hold_lock().await;

    let mut revoke = test.command(&["revoke", &test.root]);
    let mut revoke = support::start(revoke.stdout(support::closed_pipe()));
    assert_eq!(exit_within(&mut revoke, PATIENCE).await.code(), Some(0));
    let asked = tokio::time::timeout(PATIENCE, guard.revocation_requested()).await;
    assert!(matches!(asked, Ok(Ok(()))), "{asked:?}");
    guard.release().await.expect("release");
    assert!(test.children().await.is_empty());
}
