//! A join that waits (issue #35 §4): a replica restarted at once after a SIGKILL joins
//! under its id once the servers expired its previous session (its node watched, not
//! polled); a live member's node is never taken, and the wait gives up at its bound with
//! no watch left behind.

use std::time::{Duration, Instant};

use zk_harness::{
    await_watch, bounded, live_client, session, session_id, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::{Error, Group, Presence};
use zookeeper_client::{Acls, CreateMode};

use super::SESSION_TIMEOUT;

/// ZooKeeper's opcode of an exists request.
const EXISTS: i32 = 3;

/// Waits until `session` (a `0x…` id) no longer watches `path`. The servers raise no event
/// when a watch is removed: this looks at `wchp` again, bounded by [`PATIENCE`].
async fn await_unwatched(zk: &Ensemble, path: &str, session: &str) {
    bounded("the watch removed", PATIENCE, async {
        while zk.watchers(path).await.contains(session) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// `kill -9` of a member, then a restart at once: its previous session's node is still
/// there, so a plain join is refused; a join that waits joins once the servers expired
/// that session, having watched the node (one look, no polling). The killed run's
/// membership, heard of again, finds its id taken and leaves the new node alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_at_once_joins_once_its_killed_runs_node_is_gone() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-join-within", 0, SESSION_TIMEOUT).await;
    let killed_proxy = zk.proxy(0).await;
    let killed = session(&killed_proxy.address(), SESSION_TIMEOUT).await;
    let old = Group::new(&killed, &fx.root)
        .unwrap()
        .join("r2", "first run")
        .await
        .unwrap();
    let node = old.node().to_owned();
    // SIGKILL: nothing more is heard from it; the servers expire it a session timeout on.
    killed_proxy.freeze();

    // A long session: its keeper's own look at the servers (an exists of `/` every third
    // of it) comes at most once while it waits.
    let proxy = zk.proxy(0).await;
    let restarted = session(&proxy.address(), Duration::from_secs(30)).await;
    let group = Group::new(&restarted, &fx.root).unwrap();
    let refused = group.join("r2", "second run").await;
    assert!(
        matches!(&refused, Err(Error::IdTaken { node: n }) if *n == node),
        "{refused:?}"
    );
    let sent = proxy.requests().len();
    let joining = {
        let group = group.clone();
        tokio::spawn(async move { group.join_within("r2", "second run", PATIENCE).await })
    };
    // It waits with a watch on the node.
    zk.await_watcher(&node, &session_id(&restarted)).await;
    let (_, held) = fx.observer.get_data(&node).await.unwrap();
    assert_eq!(held.ephemeral_owner, live_client(&killed).session_id().0);
    let member = bounded("the join", PATIENCE, joining)
        .await
        .unwrap()
        .unwrap();

    let looks = proxy
        .sent_since(sent)
        .into_iter()
        .filter(|&op| op == EXISTS)
        .count();
    // One look at the taken node, the member's own watch once it joined, and maybe one of
    // the session keeper's.
    assert!(
        looks <= 3,
        "{looks} looks: polled: {:?}",
        proxy.sent_since(sent)
    );
    let (data, stat) = fx.observer.get_data(&node).await.unwrap();
    assert_eq!(data, b"second run");
    assert_eq!(stat.ephemeral_owner, live_client(&restarted).session_id().0);
    assert_eq!(member.presence(), Presence::Present);

    // The killed run, heard of again, finds its id taken: it takes nothing back.
    killed_proxy.restore();
    await_watch("taken", &mut old.presences(), |p| *p == Presence::Taken).await;
    bounded("leave", PATIENCE, old.leave()).await.unwrap();
    let (data, after) = fx.observer.get_data(&node).await.unwrap();
    assert_eq!(
        (data.as_slice(), after.version, after.mzxid),
        (&b"second run"[..], stat.version, stat.mzxid)
    );
    member.leave().await.unwrap();
    killed.close();
    restarted.close();
    fx.nothing_left().await;
}

/// A live member keeps its id: a join that waits gives up once its bound has passed, with
/// `IdTaken`, the member's node untouched and the watch it set removed; a persistent node
/// at the path, which never goes by itself, is refused at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_join_that_waits_never_takes_a_live_members_node() {
    const WAIT: Duration = Duration::from_secs(1);
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-join-within-live", 2, SESSION_TIMEOUT).await;
    let live = Group::new(&fx.sessions[0], &fx.root)
        .unwrap()
        .join("r2", "live")
        .await
        .unwrap();
    let node = live.node().to_owned();
    let (_, before) = fx.observer.get_data(&node).await.unwrap();
    let group = Group::new(&fx.sessions[1], &fx.root).unwrap();
    let waiter = session_id(&fx.sessions[1]);

    let started = Instant::now();
    let joining = {
        let group = group.clone();
        tokio::spawn(async move { group.join_within("r2", "restart", WAIT).await })
    };
    zk.await_watcher(&node, &waiter).await;
    let refused = bounded("the join", PATIENCE, joining).await.unwrap();
    let waited = started.elapsed();
    assert!(
        matches!(&refused, Err(Error::IdTaken { node: n }) if *n == node),
        "{refused:?}"
    );
    assert!(waited >= WAIT, "gave up after {waited:?}");
    await_unwatched(zk, &node, &waiter).await;
    let (data, after) = fx.observer.get_data(&node).await.unwrap();
    assert_eq!(data, b"live");
    assert_eq!(
        (after.czxid, after.version, after.ephemeral_owner),
        (before.czxid, before.version, before.ephemeral_owner)
    );
    assert!(!live.is_lost());

    // A persistent node never goes by itself: refused at once, whatever the wait.
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let kept = format!("{}/p", fx.root);
    fx.observer.create(&kept, b"", &persistent).await.unwrap();
    let refused = bounded(
        "refused at once",
        WAIT,
        group.join_within("p", "x", PATIENCE),
    )
    .await;
    assert!(matches!(refused, Err(Error::IdTaken { .. })), "{refused:?}");
    await_unwatched(zk, &kept, &waiter).await;

    fx.observer.delete(&kept, None).await.unwrap();
    live.leave().await.unwrap();
    fx.nothing_left().await;
}
