//! A member sets its data (issue #35 §5, Curator's `setThisData`): written into its own
//! node and shown by views (watch counts read from the server), kept for the node made
//! again after expiry, written through the remake when set while away, refused with a
//! clear error; and a membership whose id was taken never writes, neither at once nor
//! after waiting.

use std::collections::BTreeMap;

use zk_harness::{
    all_but, await_watch, bounded, expire_session, live_client, observer, plain_client, session,
    unique_root, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::{Error, Group, Presence};
use zookeeper_client::{Acls, CreateMode, Permission};

use super::{QUIET, SESSION_TIMEOUT, WRITES};

/// ZooKeeper's opcode of a setData request.
const SET_DATA: i32 = 5;

#[tokio::test]
async fn set_data_is_written_shown_by_views_and_kept_across_expiry() {
    // Its own server: the watch counts are the whole server's.
    let zk = Ensemble::start(1).await;
    let root = unique_root("group-set-this-data");
    let hosts = zk.connect_string();
    let m = session(&hosts, SESSION_TIMEOUT).await;
    let member = Group::new(&m, &root)
        .unwrap()
        .join("m", "v1")
        .await
        .unwrap();
    let node = member.node().to_owned();
    let o = session(&hosts, SESSION_TIMEOUT).await;
    let mut view = Group::new(&o, &root)
        .unwrap()
        .watch_members()
        .await
        .unwrap();
    let observer = observer(&hosts).await;
    // The member watches its node, and so does the view: one data watch each.
    let watched = BTreeMap::from([(node.clone(), 2)]);
    zk.await_watched_under(&root, &watched).await;

    for data in [&b"v2"[..], b"v3"] {
        member.set_data(data).await.unwrap();
        // In the node once it returned.
        assert_eq!(observer.get_data(&node).await.unwrap().0, data);
        await_watch("the view shows it", &mut view, |m| {
            m.len() == 1 && m[0].data.as_deref() == Some(data)
        })
        .await;
        assert_eq!(view.borrow()[0].created, member.created(), "the same node");
    }
    zk.await_watched_under(&root, &watched).await;
    zk.await_child_watch_count(1).await;

    // Kept: the node made again after expiry carries the data last set.
    let before = live_client(&m);
    expire_session(&hosts, before.session()).await;
    drop(before);
    await_watch("made again with v3", &mut view, |m| {
        m.len() == 1 && m[0].created != member.created() && m[0].data.as_deref() == Some(b"v3")
    })
    .await;
    let (_, made) = observer.get_data(&node).await.unwrap();
    assert_eq!(made.version, 0, "made with it, not written after");
    zk.await_watched_under(&root, &watched).await;

    member.leave().await.unwrap();
    await_watch("gone", &mut view, |m| m.is_empty()).await;
    zk_harness::await_empty(&observer, &root).await;
}

/// Set while cut off, the data waits; the call, dropped, leaves it kept; the session
/// expires meanwhile, and the node made again on the new one is created with it.
#[tokio::test(flavor = "multi_thread")]
async fn data_set_while_away_goes_in_with_the_node_made_again() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-data-away", 0, SESSION_TIMEOUT).await;
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let member = Group::new(&s, &fx.root)
        .unwrap()
        .join("m", "v1")
        .await
        .unwrap();
    let node = member.node().to_owned();
    let before = live_client(&s);
    let old_owner = before.session_id().0;

    proxy.cut();
    let waited = tokio::time::timeout(QUIET, member.set_data("v2")).await;
    assert!(waited.is_err(), "returned while cut off: {waited:?}");
    expire_session(&fx.hosts, before.session()).await;
    drop(before);
    proxy.restore();

    let (data, made) = bounded("the node made again", PATIENCE, async {
        loop {
            let (stat, watcher) = fx.observer.check_and_watch_stat(&node).await.unwrap();
            if stat.is_some_and(|stat| stat.ephemeral_owner != old_owner) {
                break fx.observer.get_data(&node).await.unwrap();
            }
            watcher.changed().await;
        }
    })
    .await;
    assert_eq!(data, b"v2");
    assert_eq!(made.version, 0, "created with it");
    assert_eq!(member.presence(), Presence::Present);
    member.set_data("v3").await.unwrap();
    let (data, after) = fx.observer.get_data(&node).await.unwrap();
    assert_eq!((data.as_slice(), after.version), (&b"v3"[..], 1));

    member.leave().await.unwrap();
    s.close();
    fx.nothing_left().await;
}

/// A taken membership never writes its data: set after it was taken, it fails at once
/// and sends nothing; set while it was away (its session expiring while another session
/// took the id), it fails once taken, and the taker's node stays as the taker made it.
#[tokio::test(flavor = "multi_thread")]
async fn a_taken_membership_never_writes_its_data() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-data-taken", 0, SESSION_TIMEOUT).await;
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let taker = plain_client(&fx.hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&s, &fx.root).unwrap();
    let (x, y) = (
        group.join("x", "mine").await.unwrap(),
        group.join("y", "mine").await.unwrap(),
    );
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());

    // x: taken while present (deleted and made again by another session in one multi).
    let mut take = taker.new_multi_writer();
    take.add_delete(x.node(), None).unwrap();
    take.add_create(x.node(), b"taker's", &ephemeral).unwrap();
    take.commit().await.unwrap();
    await_watch("taken", &mut x.presences(), |p| *p == Presence::Taken).await;
    let sent = proxy.requests().len();
    let refused = bounded("refused at once", QUIET, x.set_data("over")).await;
    assert!(
        matches!(&refused, Err(Error::Lost { node }) if node == x.node()),
        "{refused:?}"
    );
    let writes: Vec<i32> = proxy
        .sent_since(sent)
        .into_iter()
        .filter(|op| WRITES.contains(op))
        .collect();
    assert!(writes.is_empty(), "a taken membership sent {writes:?}");

    // y: set while away; its id is taken before it is heard of again.
    let before = live_client(&s);
    proxy.cut();
    let setting = {
        let set = async move {
            let set = y.set_data("set while away").await;
            (y, set)
        };
        tokio::spawn(set)
    };
    expire_session(&fx.hosts, before.session()).await;
    drop(before);
    let y_node = format!("{}/y", fx.root);
    taker.create(&y_node, b"taker's", &ephemeral).await.unwrap();
    let (_, taken) = taker.get_data(&y_node).await.unwrap();
    let sent = proxy.requests().len();
    proxy.restore();
    let (y, set) = bounded("the set", PATIENCE, setting).await.unwrap();
    assert!(matches!(&set, Err(Error::Lost { .. })), "{set:?}");
    assert_eq!(y.presence(), Presence::Taken);
    let set_data: Vec<i32> = proxy
        .sent_since(sent)
        .into_iter()
        .filter(|&op| op == SET_DATA)
        .collect();
    assert!(
        set_data.is_empty(),
        "a taken membership wrote: {set_data:?}"
    );

    bounded("leave", PATIENCE, x.leave()).await.unwrap();
    bounded("leave", PATIENCE, y.leave()).await.unwrap();
    for node in [format!("{}/x", fx.root), y_node] {
        let (data, after) = taker.get_data(&node).await.unwrap();
        assert_eq!(data, b"taker's", "{node}");
        assert_eq!(after.ephemeral_owner, taker.session_id().0);
        if node.ends_with("/y") {
            assert_eq!((after.version, after.mzxid), (taken.version, taken.mzxid));
        }
        taker.delete(&node, None).await.unwrap();
    }
    s.close();
    fx.nothing_left().await;
}

/// Data too large is refused before anything is sent; a write the servers refuse (the
/// node's ACL changed to deny writing) is named, leaves the node as it was, and the next
/// set, once allowed, is written.
#[tokio::test(flavor = "multi_thread")]
async fn set_data_that_is_too_large_or_refused_is_a_clear_error() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-data-refused", 1, SESSION_TIMEOUT).await;
    let member = Group::new(&fx.sessions[0], &fx.root)
        .unwrap()
        .join("m", "v1")
        .await
        .unwrap();
    let node = member.node().to_owned();
    let too_large = member.set_data(vec![0u8; 961 * 1024]).await;
    assert!(
        matches!(&too_large, Err(Error::InvalidArgument(reason)) if reason.contains("bytes")),
        "{too_large:?}"
    );

    fx.observer
        .set_acl(&node, &all_but(Permission::WRITE), None)
        .await
        .unwrap();
    let refused = bounded("refused", PATIENCE, member.set_data("v2")).await;
    assert!(
        matches!(&refused, Err(Error::NoAuth { path }) if *path == node),
        "{refused:?}"
    );
    let (data, stat) = fx.observer.get_data(&node).await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"v1"[..], 0));

    fx.observer
        .set_acl(&node, &Acls::anyone_all(), None)
        .await
        .unwrap();
    bounded("written", PATIENCE, member.set_data("v3"))
        .await
        .unwrap();
    assert_eq!(fx.observer.get_data(&node).await.unwrap().0, b"v3");
    assert!(!member.is_lost());

    member.leave().await.unwrap();
    fx.nothing_left().await;
}
