//! Revocation (issue #27): a request is heard only when made, is not
//! lost, survives what a holder rides out, and asking writes only into a contender's node.

use std::time::Duration;

use zk_harness::{
    await_empty, bounded, observer, session, tolerant_session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{revoke, Error, LeaderElection, Mutex};
use zookeeper_client::SessionState;

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request that was not made is given to be (wrongly) heard.
const QUIET: Duration = Duration::from_millis(300);

/// `revoke` takes the node of a contender. Given a path that is no contender's node (here
/// the lock's own path, an easy mistake: `zk-recipes revoke` takes the lock path), nobody
/// is asked, so it must say so and write nothing; today it overwrites the node's data and
/// answers `true` while the holder never hears.
#[tokio::test(flavor = "multi_thread")]
async fn revoke_of_a_node_that_is_no_contenders_writes_nothing_and_says_nobody_was_asked() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-revoke-root");
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let asker = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let before = observer.get_data(&root).await.unwrap().0;

    let asked = revoke(&asker, &root).await;
    let after = observer.get_data(&root).await.unwrap().0;
    let heard = tokio::time::timeout(QUIET, guard.revocation_requested()).await;
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;

    assert!(
        matches!(asked, Ok(false) | Err(Error::InvalidArgument(_))),
        "revoke({root:?}), the lock path, not a holder's node: {asked:?} (holder heard: {})",
        heard.is_ok()
    );
    assert_eq!(
        after, before,
        "revoke wrote into {root:?}, no contender's node"
    );
}

/// A leader asked to let go learns it even if it proclaims (its own write into its node)
/// before it looks: a request is never silently withdrawn by the holder's own writes.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_to_let_go_is_not_erased_by_the_leaders_proclaim() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-revoke-proclaim");
    let observer = observer(&zk.connect_string()).await;
    let leader = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let asker = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&leader, &root, "node-a").unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = candidate.leadership().await.unwrap();

    assert!(revoke(&asker, leadership.node()).await.unwrap());
    leadership.proclaim(b"10.0.0.7:8080").await.unwrap();
    let heard =
        tokio::time::timeout(Duration::from_secs(3), leadership.revocation_requested()).await;
    let marker = observer.get_data(leadership.node()).await.unwrap().0;
    candidate.resign().await.unwrap();
    await_empty(&observer, &root).await;

    assert!(
        matches!(heard, Ok(Ok(()))),
        "asked, then proclaimed: the request is gone ({heard:?}); the node holds {:?}",
        String::from_utf8_lossy(&marker)
    );
}

/// Only Curator's marker is a request: other writes into the node (an operator's hint,
/// something like the marker) are not; a dropped wait is cancel safe (asked again many
/// times, then heard); nothing stays watched once the hold is released.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_marker_is_a_request_and_cancelled_waits_leave_no_watch() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-revoke-only");
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let mut waiting = Box::pin(guard.revocation_requested());
    for hint in [
        &b"hint"[..],
        b"",
        b"__REVOKE__ ",
        b"__revoke__",
        b"__REVOKE",
    ] {
        observer.set_data(guard.node(), hint, None).await.unwrap();
        tokio::select! {
            done = &mut waiting => panic!("{:?} heard as a request: {done:?}",
                String::from_utf8_lossy(hint)),
            () = tokio::time::sleep(QUIET / 3) => {}
        }
    }
    drop(waiting);
    for _ in 0..50 {
        let cancelled =
            tokio::time::timeout(Duration::from_millis(5), guard.revocation_requested());
        assert!(cancelled.await.is_err(), "heard without a request");
    }
    let node = guard.node().to_owned();
    assert!(
        zk.watchers(&node).await.len() <= 1,
        "one session watches its node"
    );
    assert!(revoke(&observer_session(zk).await, &node).await.unwrap());
    bounded(
        "the holder hears it",
        PATIENCE,
        guard.revocation_requested(),
    )
    .await
    .unwrap();
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
    assert!(
        zk.watchers(&node).await.is_empty(),
        "a watch outlived the hold"
    );
}

async fn observer_session(zk: &Ensemble) -> zk_recipes::Session {
    session(&zk.connect_string(), SESSION_TIMEOUT).await
}

/// A holder whose session tolerates a suspension and rides out a cut connection still holds;
/// a wait for a request begun while the connection was down must not fail for it (the
/// documented error is `Lost`, when the hold ends) and must hear a request made after.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_for_a_request_rides_out_a_tolerated_disconnection() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-revoke-blip");
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let holder = tolerant_session(&proxy.address(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let client = holder.client().expect("a live session");
    let mut states = client.state_watcher();

    proxy.cut();
    bounded("the holder sees the cut", PATIENCE, async {
        while states.state() != SessionState::Disconnected {
            states.changed().await;
        }
    })
    .await;
    let mut waiting = Box::pin(guard.revocation_requested());
    let early = tokio::time::timeout(QUIET, &mut waiting).await;
    proxy.restore();
    let outcome = match early {
        Ok(done) => Err(done),
        Err(_) => {
            let asked = async {
                bounded("the holder reconnects", PATIENCE, async {
                    while states.state() != SessionState::SyncConnected {
                        states.changed().await;
                    }
                })
                .await;
                assert!(!guard.is_lost(), "a tolerated blip is no loss");
                revoke(&observer_session(zk).await, guard.node()).await
            };
            let (heard, asked) = bounded("the holder hears it", PATIENCE, async {
                tokio::join!(&mut waiting, asked)
            })
            .await;
            assert!(asked.unwrap());
            Ok(heard)
        }
    };
    drop(waiting);
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
    match outcome {
        Ok(heard) => heard.expect("heard once asked"),
        Err(done) => panic!("the wait ended while the hold was intact, disconnected: {done:?}"),
    }
}

/// `Participant::id` is "the id the candidate joined with", and `__REVOKE__` is refused as
/// an id; `contenders()` shows an asked holder with no id and `revocation_requested`. An
/// asked leader must not be shown by `leader()` with Curator's marker as its id.
#[tokio::test(flavor = "multi_thread")]
async fn an_asked_leader_is_not_shown_with_the_marker_as_its_id() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-revoke-leader-id");
    let observer = observer(&zk.connect_string()).await;
    let leader = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&leader, &root, "node-a").unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = candidate.leadership().await.unwrap();
    assert!(revoke(&observer_session(zk).await, leadership.node())
        .await
        .unwrap());
    let shown = election.leader().await.unwrap().expect("a leader");
    let contenders = Mutex::new(&leader, &root)
        .unwrap()
        .contenders()
        .await
        .unwrap();
    candidate.resign().await.unwrap();
    await_empty(&observer, &root).await;
    assert!(contenders[0].revocation_requested && contenders[0].id.is_none());
    // As the contenders show it: no id (not the marker, nor an empty one).
    assert_eq!(shown.id, None, "leader() shows an id: {shown:?}");
}

/// A holder whose node was made unreadable to it (an operator's ACL change: the hold is
/// intact) cannot look for a request; it must be told so with the crate's one variant for
/// a refusal by ACL, `Error::NoAuth { path }`, not a raw client error.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_on_an_unreadable_node_is_refused_as_no_auth() {
    use zookeeper_client::{Acl, AuthId, Permission};
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-revoke-acl");
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let write_only = [Acl::new(Permission::WRITE, AuthId::anyone())];
    observer
        .set_acl(guard.node(), &write_only, None)
        .await
        .unwrap();
    let waited = bounded("the wait ends", PATIENCE, guard.revocation_requested()).await;
    let lost = guard.is_lost();
    let node = guard.node().to_owned();
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
    assert!(!lost, "the hold is intact");
    assert!(
        matches!(&waited, Err(Error::NoAuth { path }) if *path == node),
        "{waited:?}"
    );
}

/// A leadership is `Clone`: a clone waiting for a request hears the end of the term when
/// another clone resigns, with `Lost`, and no watch is left.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_on_a_leadership_clone_ends_when_another_clone_resigns() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-revoke-clone");
    let observer = observer(&zk.connect_string()).await;
    let leader = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&leader, &root, "node-a").unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = candidate.leadership().await.unwrap();
    let node = leadership.node().to_owned();
    let waiting = tokio::spawn({
        let clone = leadership.clone();
        async move { clone.revocation_requested().await }
    });
    tokio::task::yield_now().await;
    leadership.release().await.unwrap();
    let heard = bounded("the wait ends", PATIENCE, waiting).await.unwrap();
    assert!(matches!(heard, Err(Error::Lost { .. })), "{heard:?}");
    drop(candidate);
    await_empty(&observer, &root).await;
    assert!(zk.watchers(&node).await.is_empty());
}

/// A request to let go belongs to the node, heard by every handle of it (issue 33 §2): a
/// leader asked, which then proclaims (its own write replaces the marker), and whose
/// connection is cut long enough to suspend (the session survives), leads again on the
/// same node with the same term; the new leadership hears the request made to its node.
#[tokio::test(flavor = "multi_thread")]
async fn a_request_heard_before_a_proclaim_is_heard_by_the_next_term_on_the_node() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke-next-term");
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let leader = session(&proxy.address(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&leader, &root, "node-a").unwrap();
    let candidate = election.join().await.unwrap();
    let first = candidate.leadership().await.unwrap();
    assert!(revoke(&observer_session(zk).await, first.node())
        .await
        .unwrap());
    first.proclaim(b"10.0.0.7:8080").await.unwrap();

    proxy.cut();
    let loss = bounded("the cut suspends the leadership", PATIENCE, first.lost()).await;
    proxy.restore();
    let next = bounded("it leads again", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    let heard = tokio::time::timeout(PATIENCE, next.revocation_requested()).await;
    let (term, node) = (next.term(), next.node().to_owned());
    let data = observer.get_data(&node).await.unwrap().0;
    candidate.resign().await.unwrap();
    await_empty(&observer, &root).await;

    assert_eq!(loss, zk_recipes::Loss::Suspended);
    assert_eq!(
        (term, node.as_str()),
        (first.term(), first.node()),
        "a new term on the same node"
    );
    assert_eq!(
        data, b"node-a\x0010.0.0.7:8080",
        "the marker was overwritten"
    );
    assert!(
        matches!(heard, Ok(Ok(()))),
        "the next term on the asked node never hears the request: {heard:?}"
    );
}

/// `revoke` asks contenders only (issue 33 §5): a group member whose id ends in ten digits
/// (`member-0000000001`, an ephemeral node that looks sequential) is no contender; nobody
/// is asked and its data is not touched.
#[tokio::test(flavor = "multi_thread")]
async fn revoke_of_a_group_member_whose_id_ends_in_ten_digits_writes_nothing() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke-member");
    let observer = observer(&zk.connect_string()).await;
    let member_session = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let asker = observer_session(zk).await;
    let group = zk_recipes::Group::new(&member_session, &root).unwrap();
    let member = group
        .join("member-0000000001", "10.0.0.1:80")
        .await
        .unwrap();
    let before = observer.get_data(member.node()).await.unwrap();

    let asked = revoke(&asker, member.node()).await;
    let asked_all = Mutex::new(&asker, &root).unwrap().revoke_holders().await;
    let after = observer.get_data(member.node()).await.unwrap();
    member.leave().await.unwrap();
    await_empty(&observer, &root).await;

    assert!(matches!(asked, Ok(false)), "{asked:?}");
    assert!(
        matches!(&asked_all, Ok(asked) if asked.is_empty()),
        "{asked_all:?}"
    );
    assert_eq!(
        (after.0.as_slice(), after.1.version, after.1.mzxid),
        (&b"10.0.0.1:80"[..], before.1.version, before.1.mzxid),
        "the member's node was written"
    );
}

/// Foreign contenders are told by their names too (issue 33 §5): a kazoo `Lock`'s node
/// (`<hex>__lock__<seq>`) and a kazoo `ReadLock`'s (`<hex>__rlock__<seq>`), made by the
/// real kazoo, are asked.
#[tokio::test(flavor = "multi_thread")]
async fn kazoos_lock_and_read_lock_holders_are_asked() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke-kazoo");
    let observer = observer(&zk.connect_string()).await;
    let asker = observer_session(zk).await;
    let mut peer = zk_harness::peers::Peer::kazoo(zk, &root).await;

    let locked = peer.call("lock").await;
    let node = locked
        .strip_prefix("locked ")
        .expect("locked <node>")
        .to_owned();
    let asked_lock = revoke(&asker, &node).await;
    let lock_data = observer.get_data(&node).await.unwrap().0;
    assert_eq!(peer.call("unlock").await, "unlocked");

    assert_eq!(peer.call("read").await, "read");
    let reader = zk_harness::children(&observer, &root).await;
    let reader = format!("{root}/{}", reader.first().expect("the reader's node"));
    let asked_reader = revoke(&asker, &reader).await;
    assert_eq!(peer.call("unread").await, "unread");
    peer.quit().await;
    await_empty(&observer, &root).await;

    assert!(node.contains("__lock__"), "{node}");
    assert!(reader.contains("__rlock__"), "{reader}");
    assert!(matches!(asked_lock, Ok(true)), "{asked_lock:?}");
    assert_eq!(lock_data, b"__REVOKE__");
    assert!(matches!(asked_reader, Ok(true)), "{asked_reader:?}");
}

/// A request belongs to the node (issue 33 §2) also when the holder writes into its own
/// node through `fenced()`, not `proclaim`: the write reads the node first, so a request
/// made before it stays heard after the write replaced the marker. A write with no request
/// before it is no request.
#[tokio::test(flavor = "multi_thread")]
async fn a_holders_own_fenced_write_into_its_node_does_not_withdraw_a_request() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke-own-write");
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let asker = observer_session(zk).await;
    let mutex = Mutex::new(&holder, &root).unwrap();

    let quiet = mutex.lock().await.unwrap();
    quiet
        .fenced()
        .set_data(quiet.node(), b"state 1", None)
        .commit()
        .await
        .unwrap();
    let heard_unasked = tokio::time::timeout(QUIET, quiet.revocation_requested()).await;
    quiet.release().await.unwrap();

    let guard = mutex.lock().await.unwrap();
    assert!(revoke(&asker, guard.node()).await.unwrap());
    let written = guard
        .fenced()
        .set_data(guard.node(), b"state 2", None)
        .commit()
        .await;
    let data = observer.get_data(guard.node()).await.unwrap().0;
    let heard = tokio::time::timeout(PATIENCE, guard.revocation_requested()).await;
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;

    assert!(heard_unasked.is_err(), "asked unasked: {heard_unasked:?}");
    assert!(written.is_ok(), "{written:?}");
    assert_eq!(data, b"state 2", "the marker was written over");
    assert!(
        matches!(heard, Ok(Ok(()))),
        "the holder's own write withdrew the request: {heard:?}"
    );
}
