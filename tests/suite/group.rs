//! Group membership and the live views (members, leader) against real ZooKeeper servers;
//! `group/join_within.rs`: a join that waits, bounded, for another session's node to go;
//! `group/data.rs`: a member sets its data.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::watch;
use zk_harness::{
    await_empty, await_events, await_watch, bounded, digest_session, expire_session, live_client,
    observer, plain_client, record_events, session, unique_root, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::{Error, Group, LeaderElection, Loss, Member, NodeAcl, Presence, SessionEvent};

const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a write that must not come is given to come.
const QUIET: Duration = Duration::from_millis(500);

/// ZooKeeper's opcodes of the requests that write: create, delete, setData, multi,
/// create2, createContainer, createTTL.
const WRITES: [i32; 7] = [1, 2, 5, 14, 15, 19, 21];

fn ids(members: &[Member]) -> Vec<&str> {
    members.iter().map(|m| m.id.as_str()).collect()
}

/// Every value the view publishes from now on, checked to list each member once.
fn record(mut view: watch::Receiver<Vec<Member>>) -> tokio::task::JoinHandle<Vec<Vec<String>>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        loop {
            let now: Vec<String> = view
                .borrow_and_update()
                .iter()
                .map(|m| m.id.clone())
                .collect();
            let mut unique = now.clone();
            unique.dedup();
            assert_eq!(unique, now, "a member shown twice (or out of order)");
            seen.push(now);
            if view.changed().await.is_err() {
                return seen;
            }
        }
    })
}

#[tokio::test]
async fn members_join_and_leave_and_the_view_follows() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group");
    let hosts = zk.connect_string();
    let (a, b) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let watcher = session(&hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&watcher, &root).unwrap();
    let mut view = group.watch_members().await.unwrap();
    assert!(view.borrow().is_empty(), "no group yet: no members");

    let ma = Group::new(&a, &root)
        .unwrap()
        .join("a", "addr-a")
        .await
        .unwrap();
    let mb = Group::new(&b, &root)
        .unwrap()
        .join("b", vec![1, 2, 3])
        .await
        .unwrap();
    assert_eq!(ma.node(), format!("{root}/a"));
    assert_eq!(ma.presence(), Presence::Present);
    await_watch("both members", &mut view, |m| ids(m) == ["a", "b"]).await;
    assert_eq!(view.borrow()[0].data.as_deref(), Some(&b"addr-a"[..]));
    assert_eq!(view.borrow()[1].data.as_deref(), Some(&[1, 2, 3][..]));
    assert_eq!(group.members().await.unwrap(), *view.borrow());

    // The node is Curator's GroupMember layout: <path>/<id>, ephemeral, data as payload.
    let zk_client = observer(&hosts).await;
    let (data, stat) = zk_client.get_data(&format!("{root}/a")).await.unwrap();
    assert_eq!(data, b"addr-a");
    assert_eq!(stat.ephemeral_owner, live_client(&a).session_id().0);

    ma.leave().await.unwrap();
    await_watch("a left", &mut view, |m| ids(m) == ["b"]).await;
    drop(mb); // dropping leaves too, in the background
    await_watch("b left", &mut view, |m| m.is_empty()).await;
    await_empty(&zk_client, &root).await;
}

#[tokio::test]
async fn bad_input_is_refused_at_once_and_creates_nothing() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-bad");
    let hosts = zk.connect_string();
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&s, &root).unwrap();
    for id in ["", ".", "..", "a/b", "nul\0", "\u{1}", "\u{10000}"] {
        match group.join(id, "x").await {
            Err(Error::InvalidArgument(reason)) => {
                assert!(reason.contains("member id"), "{reason}")
            }
            other => panic!("id {id:?}: {other:?}"),
        }
    }
    match group.join("big", vec![0u8; 961 * 1024]).await {
        Err(Error::InvalidArgument(reason)) => assert!(reason.contains("bytes"), "{reason}"),
        other => panic!("oversized data: {other:?}"),
    }
    assert!(matches!(
        Group::new(&s, "no/slash"),
        Err(Error::InvalidPath { .. })
    ));
    let zk_client = observer(&hosts).await;
    assert_eq!(
        zk_client.check_stat(&root).await.unwrap(),
        None,
        "nothing created"
    );
}

/// A member's id that is a contender's node name (`_c_<uuid>-lock-<seq>`, kazoo's
/// `<hex>__lock__<seq>`) is refused, by `check_name` and `join`, before anything is sent:
/// `revoke` would take the member's node for a contender's and overwrite its data.
#[tokio::test]
async fn a_member_id_named_as_a_contender_is_refused() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-contender-id");
    let hosts = zk.connect_string();
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&s, &root).unwrap();
    for id in [
        "_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-lock-0000000001",
        "_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-latch--000000001",
        "9f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e__lock__0000000003",
    ] {
        assert!(
            matches!(
                zk_recipes::check_name(&root, id),
                Err(Error::InvalidPath { .. })
            ),
            "check_name {id:?}"
        );
        match group.join(id, "10.0.0.1:80").await {
            Err(Error::InvalidArgument(reason)) => {
                assert!(reason.contains("member id"), "{reason}")
            }
            other => panic!("id {id:?}: {other:?}"),
        }
    }
    // Names near it are members' ids as any other.
    for id in ["_c_x", "member-0000000001", "lock-0000000001"] {
        zk_recipes::check_name(&root, id).unwrap();
    }
    let zk_client = observer(&hosts).await;
    assert_eq!(
        zk_client.check_stat(&root).await.unwrap(),
        None,
        "nothing created"
    );
}

#[tokio::test]
async fn an_id_held_by_another_live_session_is_refused_and_not_touched() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-dup");
    let hosts = zk.connect_string();
    let (first, second) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let held = Group::new(&first, &root)
        .unwrap()
        .join("w", "first")
        .await
        .unwrap();
    let refused = Group::new(&second, &root)
        .unwrap()
        .join("w", "second")
        .await;
    assert!(
        matches!(&refused, Err(Error::IdTaken { node }) if *node == format!("{root}/w")),
        "{refused:?}"
    );
    let zk_client = observer(&hosts).await;
    let (data, stat) = zk_client.get_data(&format!("{root}/w")).await.unwrap();
    assert_eq!(
        (data.as_slice(), stat.version),
        (&b"first"[..], 0),
        "untouched"
    );
    assert_eq!(stat.ephemeral_owner, live_client(&first).session_id().0);
    // The same session joining twice under one id is refused too: one node, one member.
    let twice = Group::new(&first, &root).unwrap().join("w", "again").await;
    assert!(matches!(twice, Err(Error::IdTaken { .. })), "{twice:?}");
    held.leave().await.unwrap();
    await_empty(&zk_client, &root).await;
}

#[tokio::test]
async fn a_member_survives_its_sessions_expiry_and_watchers_see_it_back() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-expiry");
    let hosts = zk.connect_string();
    let member_session = session(&hosts, SESSION_TIMEOUT).await;
    let watcher = session(&hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&watcher, &root).unwrap();
    let member = Group::new(&member_session, &root)
        .unwrap()
        .join("m", "data")
        .await
        .unwrap();
    let mut view = group.watch_members().await.unwrap();
    let seen = record(view.clone());
    await_watch("the member", &mut view, |m| ids(m) == ["m"]).await;

    let before = live_client(&member_session);
    let old_owner = before.session_id().0;
    expire_session(&hosts, before.session()).await;
    drop(before);

    let mut presences = member.presences();
    await_watch("present on a new session", &mut presences, |p| {
        *p == Presence::Present
            && member_session
                .client()
                .is_some_and(|c| c.session_id().0 != old_owner)
    })
    .await;
    let zk_client = observer(&hosts).await;
    let owner = |stat: zookeeper_client::Stat| stat.ephemeral_owner;
    let (data, stat) = bounded("the node", PATIENCE, async {
        loop {
            match zk_client.get_data(&format!("{root}/m")).await {
                Ok((data, stat)) if owner(stat) != old_owner => break (data, stat),
                _ => tokio::task::yield_now().await,
            }
        }
    })
    .await;
    assert_eq!(data, b"data");
    assert_eq!(owner(stat), live_client(&member_session).session_id().0);
    await_watch("the member back", &mut view, |m| ids(m) == ["m"]).await;
    assert_eq!(view.borrow()[0].data.as_deref(), Some(&b"data"[..]));

    member.leave().await.unwrap();
    await_watch("gone", &mut view, |m| m.is_empty()).await;
    watcher.close();
    let seen = bounded("the recorder", PATIENCE, seen).await.unwrap();
    assert!(seen.iter().all(|ids| ids.len() <= 1), "{seen:?}");
    await_empty(&zk_client, &root).await;
}

#[tokio::test]
async fn a_deleted_member_node_is_made_again() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-deleted");
    let hosts = zk.connect_string();
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let member = Group::new(&s, &root).unwrap().join("m", "d").await.unwrap();
    let zk_client = observer(&hosts).await;
    let node = format!("{root}/m");
    let (_, first) = zk_client.get_data(&node).await.unwrap();
    zk_client.delete(&node, None).await.unwrap();
    bounded("made again", PATIENCE, async {
        loop {
            let (stat, watcher) = zk_client.check_and_watch_stat(&node).await.unwrap();
            if stat.is_some_and(|stat| stat.czxid != first.czxid) {
                return;
            }
            watcher.changed().await;
        }
    })
    .await;
    member.leave().await.unwrap();
    await_empty(&zk_client, &root).await;
}

/// Every path under `root` in `ids`, watched by `sessions` sessions.
fn watched(
    root: &str,
    ids: impl IntoIterator<Item = usize>,
    sessions: usize,
) -> BTreeMap<String, usize> {
    ids.into_iter()
        .map(|i| (format!("{root}/m{i}"), sessions))
        .collect()
}

#[tokio::test]
async fn each_view_sets_one_children_watch_and_one_data_watch_per_member() {
    // Its own server: the watch counts are the whole server's.
    let zk = Ensemble::start(1).await;
    let root = unique_root("group-herd");
    let hosts = zk.connect_string();
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let mut members = Vec::new();
    for i in 0..5 {
        members.push(
            Group::new(&s, &root)
                .unwrap()
                .join(&format!("m{i}"), "x")
                .await
                .unwrap(),
        );
    }
    // A member watches its own node (a data watch each, set once it joined), nothing else.
    zk.await_watched_under(&root, &watched(&root, 0..5, 1))
        .await;
    assert_eq!(
        zk.watch_count().await,
        5,
        "one exists watch per member, on its own node"
    );
    // Three observers, each on its own session (a server counts one watch per session and
    // path): each sets one children watch, and one data watch on each member's node.
    let mut views = Vec::new();
    let mut observers = Vec::new();
    for _ in 0..3 {
        let observer_session = session(&hosts, SESSION_TIMEOUT).await;
        let group = Group::new(&observer_session, &root).unwrap();
        views.push(group.watch_members().await.unwrap());
        observers.push(observer_session);
    }
    zk.await_child_watch_count(3).await;
    zk.await_watched_under(&root, &watched(&root, 0..5, 4))
        .await;
    assert_eq!(zk.watch_count().await, 5 * 4, "no other data watch");
    members.pop().unwrap().leave().await.unwrap();
    for view in &mut views {
        await_watch("four members", view, |m| m.len() == 4).await;
    }
    zk.await_child_watch_count(3).await;
    zk.await_watched_under(&root, &watched(&root, 0..4, 4))
        .await;
    // A write into a member's node is read once by each view, whose watch is set again.
    let zk_client = observer(&hosts).await;
    zk_client
        .set_data(&format!("{root}/m0"), b"y", None)
        .await
        .unwrap();
    for view in &mut views {
        await_watch("m0 written", view, |m| {
            m[0].data.as_deref() == Some(&b"y"[..])
        })
        .await;
    }
    zk.await_watched_under(&root, &watched(&root, 0..4, 4))
        .await;
    zk.await_child_watch_count(3).await;
    drop(members);
    await_empty(&zk_client, &root).await;
}

#[tokio::test]
async fn a_members_data_set_by_its_owner_shows_in_the_views() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-set-data");
    let hosts = zk.connect_string();
    let (m, o) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let member = Group::new(&m, &root)
        .unwrap()
        .join("m", "v1")
        .await
        .unwrap();
    let group = Group::new(&o, &root).unwrap();
    let mut view = group.watch_members().await.unwrap();
    assert_eq!(view.borrow()[0].data.as_deref(), Some(&b"v1"[..]));
    assert_eq!(view.borrow()[0].created, member.created());
    // The member's own session writes its node (Curator's `setThisData`), twice.
    let own = live_client(&m);
    for data in [&b"v2"[..], b"v3"] {
        own.set_data(member.node(), data, None).await.unwrap();
        await_watch("the new data", &mut view, |m| {
            m[0].data.as_deref() == Some(data)
        })
        .await;
        assert_eq!(group.members().await.unwrap(), *view.borrow());
    }
    assert_eq!(view.borrow()[0].created, member.created(), "the same node");
    member.leave().await.unwrap();
    await_watch("gone", &mut view, |m| m.is_empty()).await;
    await_empty(&observer(&hosts).await, &root).await;
}

/// How an observer's connection blips while a member is replaced.
#[derive(Clone, Copy, Debug)]
enum Blip {
    /// Cut (the client sees it: Suspended, then Reconnected).
    Cut,
    /// Muted: what the client sends is held back, notifications still reach it.
    Mute,
}

/// `x` leaves and another session joins as `x` with other data while the observer's
/// connection blips (its session survives); once back, its view shows the new node.
async fn a_member_replaced_during_a_blip_shows_its_new_data(blip: Blip) {
    let zk = Ensemble::start(1).await;
    let root = unique_root("group-replaced");
    let hosts = zk.connect_string();
    let proxy = zk.proxy(0).await;
    // Long enough to outlive the blip: the same session comes back.
    let blipped = session(&proxy.address(), Duration::from_secs(20)).await;
    let (first, second) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let old = Group::new(&first, &root)
        .unwrap()
        .join("x", "10.0.0.1:80")
        .await
        .unwrap();
    let group = Group::new(&blipped, &root).unwrap();
    let mut view = group.watch_members().await.unwrap();
    assert_eq!(view.borrow()[0].data.as_deref(), Some(&b"10.0.0.1:80"[..]));

    let mut events = record_events(&blipped);
    match blip {
        Blip::Cut => {
            proxy.cut();
            await_events(&mut events, &[SessionEvent::Suspended], PATIENCE).await;
        }
        Blip::Mute => proxy.mute(),
    }
    old.leave().await.unwrap();
    let new = Group::new(&second, &root)
        .unwrap()
        .join("x", "10.0.0.2:80")
        .await
        .unwrap();
    proxy.restore();
    if let Blip::Cut = blip {
        await_events(&mut events, &[SessionEvent::Reconnected], PATIENCE).await;
    }
    await_watch("the new x", &mut view, |m| {
        m.len() == 1 && m[0].data.as_deref() == Some(&b"10.0.0.2:80"[..])
    })
    .await;
    assert_eq!(view.borrow()[0].created, new.created(), "{blip:?}");
    assert_eq!(group.members().await.unwrap(), *view.borrow());
    assert!(
        !events.borrow().contains(&SessionEvent::Expired),
        "the observer's session survived"
    );
    new.leave().await.unwrap();
    await_watch("empty", &mut view, |m| m.is_empty()).await;
    await_empty(&observer(&hosts).await, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_replaced_during_a_cut_shows_its_new_data_once_back() {
    a_member_replaced_during_a_blip_shows_its_new_data(Blip::Cut).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_member_replaced_during_a_mute_shows_its_new_data_once_back() {
    a_member_replaced_during_a_blip_shows_its_new_data(Blip::Mute).await;
}

#[tokio::test]
async fn a_member_node_the_observer_may_not_read_is_listed_without_data() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-unreadable");
    let hosts = zk.connect_string();
    let open = session(&hosts, SESSION_TIMEOUT).await;
    let a = Group::new(&open, &root)
        .unwrap()
        .join("a", "A")
        .await
        .unwrap();
    let private = digest_session(&hosts, SESSION_TIMEOUT, "billing-svc", "another password").await;
    let secret = Group::new(&private, &root)
        .unwrap()
        .node_acl(NodeAcl::CreatorOnly)
        .join("x", "secret")
        .await
        .unwrap();
    let o = session(&hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&o, &root).unwrap();
    let listed = group.members().await.unwrap();
    let expected = |a_data: &[u8]| {
        vec![
            Member {
                id: "a".into(),
                data: Some(a_data.to_vec()),
                created: a.created(),
            },
            Member {
                id: "x".into(),
                data: None,
                created: secret.created(),
            },
        ]
    };
    assert_eq!(listed, expected(b"A"));
    let mut view = group.watch_members().await.unwrap();
    assert_eq!(*view.borrow(), expected(b"A"));
    // The view goes on following the others.
    live_client(&open)
        .set_data(a.node(), b"A2", None)
        .await
        .unwrap();
    await_watch("a's new data", &mut view, |m| *m == expected(b"A2")).await;
    // And the unreadable one: its data changed (not shown), then it left.
    live_client(&private)
        .set_data(secret.node(), b"more", None)
        .await
        .unwrap();
    secret.leave().await.unwrap();
    await_watch("x left", &mut view, |m| ids(m) == ["a"]).await;
    a.leave().await.unwrap();
    await_watch("empty", &mut view, |m| m.is_empty()).await;
    await_empty(&observer(&hosts).await, &root).await;
}

/// The servers tell no session about a node it may not read (ZooKeeper 3.8 drops the
/// notification and the watch): a member node the observer may not read, replaced in one
/// multi by a node of the same name that it may read, is seen by its stat at the listing
/// the replacement causes. Each round: the view shows the new node, as `members()` does.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_member_replaced_in_one_multi_shows_the_new_node() {
    use zookeeper_client::{Acls, CreateMode};
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-unreadable-replaced", 0, SESSION_TIMEOUT).await;
    let taker = plain_client(&fx.hosts, SESSION_TIMEOUT).await;
    // An open group path, made before the private member joins.
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    taker.create(&fx.root, b"", &open).await.unwrap();
    let private = digest_session(&fx.hosts, SESSION_TIMEOUT, "billing-svc", "a password").await;
    let secret = Group::new(&private, &fx.root)
        .unwrap()
        .node_acl(NodeAcl::CreatorOnly)
        .join("x", "secret")
        .await
        .unwrap();
    let o = session(&fx.hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&o, &fx.root).unwrap();
    let mut view = group.watch_members().await.unwrap();
    assert_eq!(view.borrow()[0].data, None);
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let hider = plain_client(&fx.hosts, SESSION_TIMEOUT).await;
    hider
        .auth("digest", b"billing-svc:a password")
        .await
        .unwrap();
    let private_ephemeral = CreateMode::Ephemeral.with_acls(Acls::creator_all());
    for round in 0..3 {
        let mut take = taker.new_multi_writer();
        take.add_delete(secret.node(), None).unwrap();
        take.add_create(secret.node(), format!("r{round}").as_bytes(), &ephemeral)
            .unwrap();
        take.commit().await.unwrap();
        let (_, stat) = taker.get_data(secret.node()).await.unwrap();
        let created = u64::try_from(stat.czxid).unwrap();
        await_watch("the new x", &mut view, |m| {
            m.len() == 1 && m[0].created == created
        })
        .await;
        let shown = format!("r{round}").into_bytes();
        assert_eq!(view.borrow()[0].data.as_deref(), Some(&shown[..]));
        assert_eq!(group.members().await.unwrap(), *view.borrow());
        // Back to a node the observer may not read, for the next round.
        taker.delete(secret.node(), None).await.unwrap();
        await_watch("x gone", &mut view, |m| m.is_empty()).await;
        hider
            .create(secret.node(), b"secret", &private_ephemeral)
            .await
            .unwrap();
        await_watch("x back, unreadable", &mut view, |m| {
            m.len() == 1 && m[0].data.is_none()
        })
        .await;
    }
    drop((secret, hider));
    fx.nothing_left().await;
}

#[tokio::test]
async fn the_leader_view_follows_the_election() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-leader");
    let hosts = zk.connect_string();
    let (a, b, o) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let observer_election = LeaderElection::new(&o, &root, "observer").unwrap();
    let mut leader = observer_election.watch_leader().await.unwrap();
    assert_eq!(*leader.borrow(), None);
    let ca = LeaderElection::new(&a, &root, "a")
        .unwrap()
        .join()
        .await
        .unwrap();
    await_watch("a leads", &mut leader, |l| {
        l.as_ref().is_some_and(|l| l.id.as_deref() == Some("a"))
    })
    .await;
    let cb = LeaderElection::new(&b, &root, "b")
        .unwrap()
        .join()
        .await
        .unwrap();
    ca.resign().await.unwrap();
    await_watch("b leads", &mut leader, |l| {
        l.as_ref().is_some_and(|l| l.id.as_deref() == Some("b"))
    })
    .await;
    // Read first: a borrow held across an await would keep the view from publishing.
    let now = observer_election.leader().await.unwrap();
    assert_eq!(*leader.borrow(), now);
    cb.resign().await.unwrap();
    await_watch("no leader", &mut leader, Option::is_none).await;
    await_empty(&observer(&hosts).await, &root).await;
}

#[tokio::test]
async fn the_leader_view_carries_what_the_leader_proclaims() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-leader-proclaims");
    let hosts = zk.connect_string();
    let (a, b, o) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let observed = LeaderElection::new(&o, &root, "observer").unwrap();
    let mut leader = observed.watch_leader().await.unwrap();
    let shows = |id: &'static str, proclaimed: Option<&'static [u8]>| {
        move |l: &Option<zk_recipes::Participant>| {
            l.as_ref().is_some_and(|l| {
                l.id.as_deref() == Some(id) && l.proclaimed.as_deref() == proclaimed
            })
        }
    };
    let ca = LeaderElection::new(&a, &root, "a")
        .unwrap()
        .join()
        .await
        .unwrap();
    let cb = LeaderElection::new(&b, &root, "b")
        .unwrap()
        .join()
        .await
        .unwrap();
    let leading = ca.leadership().await.unwrap();
    await_watch("a leads", &mut leader, shows("a", None)).await;
    for proclaimed in [&b"10.0.0.1:80"[..], b"10.0.0.1:81"] {
        leading.proclaim(proclaimed).await.unwrap();
        await_watch(
            "a's proclamation",
            &mut leader,
            shows("a", Some(proclaimed)),
        )
        .await;
        let now = observed.leader().await.unwrap();
        assert_eq!(*leader.borrow(), now);
    }
    ca.resign().await.unwrap();
    await_watch(
        "b leads, proclaiming nothing yet",
        &mut leader,
        shows("b", None),
    )
    .await;
    cb.leadership()
        .await
        .unwrap()
        .proclaim(b"10.0.0.2:80")
        .await
        .unwrap();
    await_watch(
        "b's proclamation",
        &mut leader,
        shows("b", Some(b"10.0.0.2:80")),
    )
    .await;
    let now = observed.leader().await.unwrap();
    assert_eq!(*leader.borrow(), now);
    cb.resign().await.unwrap();
    await_watch("no leader", &mut leader, Option::is_none).await;
    await_empty(&observer(&hosts).await, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_suspended_view_keeps_the_last_state_and_catches_up_once_back() {
    let zk = Ensemble::start(1).await;
    let root = unique_root("group-suspended");
    let hosts = zk.connect_string();
    let proxy = zk.proxy(0).await;
    // Long enough to outlive the cut: the same session comes back.
    let cut = session(&proxy.address(), Duration::from_secs(20)).await;
    let members = session(&hosts, SESSION_TIMEOUT).await;
    let a = Group::new(&members, &root)
        .unwrap()
        .join("a", "")
        .await
        .unwrap();
    let mut view = Group::new(&cut, &root)
        .unwrap()
        .watch_members()
        .await
        .unwrap();
    await_watch("a", &mut view, |m| ids(m) == ["a"]).await;

    let mut events = record_events(&cut);
    proxy.cut();
    await_events(&mut events, &[SessionEvent::Suspended], PATIENCE).await;
    let b = Group::new(&members, &root)
        .unwrap()
        .join("b", "")
        .await
        .unwrap();
    a.leave().await.unwrap();
    // Nothing reaches the view while suspended: it shows the last state it saw.
    assert_eq!(ids(&view.borrow()), ["a"]);
    assert!(!view.has_changed().unwrap());

    proxy.restore();
    await_events(&mut events, &[SessionEvent::Reconnected], PATIENCE).await;
    await_watch("caught up", &mut view, |m| ids(m) == ["b"]).await;
    b.leave().await.unwrap();
    await_watch("empty", &mut view, |m| m.is_empty()).await;
    await_empty(&observer(&hosts).await, &root).await;
}

#[tokio::test]
async fn a_join_dropped_after_its_create_leaves_no_node() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("group-dropped");
    let hosts = zk.connect_string();
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let zk_client = observer(&hosts).await;
    let node = format!("{root}/x");
    let (none, made) = zk_client.check_and_watch_stat(&node).await.unwrap();
    assert!(none.is_none());
    let group = Group::new(&s, &root).unwrap();
    let joining = tokio::spawn(async move { group.join("x", "").await });
    bounded("the create", PATIENCE, made.changed()).await;
    // Dropped while joining, or just after it joined (the membership, then, with the task).
    joining.abort();
    drop(joining);
    bounded("the node deleted", PATIENCE, async {
        loop {
            let (stat, changed) = zk_client.check_and_watch_stat(&node).await.unwrap();
            if stat.is_none() {
                return;
            }
            changed.changed().await;
        }
    })
    .await;
    await_empty(&zk_client, &root).await;
}

/// A membership whose id was taken (issue 33 §1): another session deletes `x` and makes
/// `<group>/x` its own in one multi. The membership turns `Taken` and is lost; it offers
/// no fenced writes at all (see `Membership`'s docs: the servers cannot tell its node from
/// the taker's), and neither `leave()` nor a drop writes into or deletes the taker's node,
/// nor is the node made again once the taker lets it go.
#[tokio::test(flavor = "multi_thread")]
async fn a_taken_membership_never_writes() {
    use zookeeper_client::{Acls, CreateMode};
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-taken", 0, SESSION_TIMEOUT).await;
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let taker = plain_client(&fx.hosts, SESSION_TIMEOUT).await;
    let group = Group::new(&s, &fx.root).unwrap();
    let (x, y) = (
        group.join("x", "mine").await.unwrap(),
        group.join("y", "mine").await.unwrap(),
    );
    assert!(!x.is_lost() && !y.is_lost());

    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    for member in [&x, &y] {
        let mut take = taker.new_multi_writer();
        take.add_delete(member.node(), None).unwrap();
        take.add_create(member.node(), b"taker's", &ephemeral)
            .unwrap();
        take.commit().await.unwrap();
    }
    for member in [&x, &y] {
        await_watch("taken", &mut member.presences(), |p| *p == Presence::Taken).await;
        assert!(member.is_lost());
        let loss = bounded("the loss", PATIENCE, member.lost()).await;
        assert_eq!(loss, Loss::NodeDeleted);
    }
    let taken = |node: String| {
        let taker = &taker;
        async move {
            let (data, stat) = taker.get_data(&node).await.unwrap();
            (data, stat.version, stat.mzxid, stat.ephemeral_owner)
        }
    };
    let (x_node, y_node) = (x.node().to_owned(), y.node().to_owned());
    let before = (taken(x_node.clone()).await, taken(y_node.clone()).await);
    let sent = proxy.requests().len();

    bounded("leave", PATIENCE, x.leave()).await.unwrap();
    drop(y);
    // Neither a leave nor a drop of a taken membership touches the taker's nodes; nor does
    // the membership make its node again once the taker lets the id go.
    let mut made = Vec::new();
    for node in [&x_node, &y_node] {
        taker.delete(node, None).await.unwrap();
        made.push(taker.check_and_watch_stat(node).await.unwrap().1);
    }
    for watch in made {
        let event = tokio::time::timeout(QUIET, watch.changed()).await;
        assert!(event.is_err(), "the node was made again: {event:?}");
    }
    let writes: Vec<i32> = proxy
        .sent_since(sent)
        .into_iter()
        .filter(|op| WRITES.contains(op))
        .collect();
    assert!(
        writes.is_empty(),
        "a taken membership sent writes: {writes:?}"
    );
    assert_eq!(before.0 .0, b"taker's");
    assert_eq!(before.0 .3, taker.session_id().0);
    assert_eq!(before.1 .0, b"taker's");
    fx.nothing_left().await;
    s.close();
}

/// The loss of a membership says how its node went: here with its session, which expired
/// while it was cut off, and another session took the id meanwhile. It is `Taken`, lost
/// with `SessionExpired`, and leaves the taker's node as it found it.
#[tokio::test(flavor = "multi_thread")]
async fn a_membership_taken_after_its_session_expired_is_lost_with_the_session() {
    use zookeeper_client::{Acls, CreateMode};
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-taken-expired", 0, SESSION_TIMEOUT).await;
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let taker = plain_client(&fx.hosts, SESSION_TIMEOUT).await;
    let member = Group::new(&s, &fx.root)
        .unwrap()
        .join("x", "mine")
        .await
        .unwrap();
    let node = member.node().to_owned();

    let before = live_client(&s);
    proxy.cut();
    expire_session(&fx.hosts, before.session()).await;
    drop(before);
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    taker.create(&node, b"taker's", &ephemeral).await.unwrap();
    let (_, taken) = taker.get_data(&node).await.unwrap();
    proxy.restore();

    await_watch("taken", &mut member.presences(), |p| *p == Presence::Taken).await;
    assert!(member.is_lost());
    assert_eq!(
        bounded("the loss", PATIENCE, member.lost()).await,
        Loss::SessionExpired
    );
    bounded("leave", PATIENCE, member.leave()).await.unwrap();
    let (data, after) = taker.get_data(&node).await.unwrap();
    assert_eq!(data, b"taker's");
    assert_eq!(
        (after.version, after.mzxid, after.ephemeral_owner),
        (taken.version, taken.mzxid, taker.session_id().0)
    );
    taker.delete(&node, None).await.unwrap();
    fx.nothing_left().await;
    s.close();
}

/// A membership that leaves while cut off, after another session took its id meanwhile
/// (an operator deleted `x`, another replica joined as `x`), deletes nothing: its delete,
/// sent once the connection is back, would find the taker's node at the path. Only a node
/// its own session owns is deleted.
#[tokio::test(flavor = "multi_thread")]
async fn a_membership_that_leaves_while_cut_off_never_deletes_the_takers_node() {
    use zookeeper_client::{Acls, CreateMode};
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-leave-taken", 0, SESSION_TIMEOUT).await;
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), Duration::from_secs(20)).await;
    let taker = plain_client(&fx.hosts, SESSION_TIMEOUT).await;
    let member = Group::new(&s, &fx.root)
        .unwrap()
        .join("x", "mine")
        .await
        .unwrap();
    let node = member.node().to_owned();

    proxy.cut();
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let mut take = taker.new_multi_writer();
    take.add_delete(&node, None).unwrap();
    take.add_create(&node, b"taker's", &ephemeral).unwrap();
    take.commit().await.unwrap();
    let (_, taken) = taker.get_data(&node).await.unwrap();
    let leaving = tokio::spawn(member.leave());
    tokio::time::sleep(QUIET).await; // a hold time: the leave is under way while cut off
    proxy.restore();
    let left = bounded("leave", PATIENCE, leaving).await.unwrap();

    let after = taker.get_data(&node).await;
    if after.is_ok() {
        taker.delete(&node, None).await.unwrap();
    }
    fx.nothing_left().await;
    s.close();
    assert!(left.is_ok(), "{left:?}");
    let (data, after) = after.expect("the leave deleted the taker's node");
    assert_eq!(data, b"taker's");
    assert_eq!(
        (after.version, after.mzxid, after.ephemeral_owner),
        (taken.version, taken.mzxid, taker.session_id().0)
    );
}

/// A membership whose session is closed is over: lost with `Loss::Closed`, and its
/// presence says its node is gone (it went with the session), not `Present`.
#[tokio::test(flavor = "multi_thread")]
async fn a_membership_whose_session_was_closed_is_lost_and_absent() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "group-closed", 0, SESSION_TIMEOUT).await;
    let s = session(&fx.hosts, SESSION_TIMEOUT).await;
    let member = Group::new(&s, &fx.root)
        .unwrap()
        .join("a", "x")
        .await
        .unwrap();
    s.close().await;
    let loss = bounded("the loss", PATIENCE, member.lost()).await;
    let presence = member.presence();
    let lost = member.is_lost();
    bounded("leave", PATIENCE, member.leave()).await.unwrap();
    fx.nothing_left().await;
    assert_eq!((loss, lost), (Loss::Closed, true));
    assert_eq!(presence, Presence::Absent, "the node went with its session");
}

#[path = "group/data.rs"]
mod data;
#[path = "group/join_within.rs"]
mod join_within;
