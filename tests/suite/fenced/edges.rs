//! Fenced writes (issue #27): what a stale or odd holder can and
//! cannot write, bad input, the error each failure gets, and ops on the holder's own node.

use std::pin::pin;
use std::time::Duration;

use zk_harness::{
    await_empty, bounded, observer, session, tolerant_session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, LeaderElection, Loss, Mutex, Written};
use zookeeper_client::{CreateMode, SessionState};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

use super::{data, state_of};

/// Waits until `session`'s client is in state `want`.
async fn await_state(session: &zk_recipes::Session, want: SessionState) {
    let client = session.client().expect("a live session");
    let mut states = client.state_watcher();
    bounded(&format!("the client is {want:?}"), PATIENCE, async {
        while states.state() != want {
            states.changed().await;
        }
    })
    .await;
}

/// The docs promise that a transaction is refused only when it does not fit the servers'
/// request limit. A thousand checks of one short path take about 50 KB on the wire (the
/// servers take them from a plain client, below); the estimate counts 1 KiB per operation.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_transaction_that_fits_the_request_limit_is_sent() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-fits");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    guard
        .fenced()
        .create(&state, b"", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();

    let mut plain = observer.new_multi_writer();
    for _ in 0..1000 {
        plain.add_check_version(&state, 0).unwrap();
    }
    assert_eq!(
        plain.commit().await.expect("the servers take it").len(),
        1000
    );
    let mut many = guard.fenced();
    for _ in 0..1000 {
        many = many.check(&state, 0);
    }
    let committed = many.commit().await;

    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
    let written = committed.unwrap_or_else(|err| {
        panic!("1000 checks of {state:?} (~50 KB) fit the 1 MiB request limit: {err}")
    });
    assert_eq!(written, vec![Written::Checked; 1000]);
}

/// A single write close to the node size limit is not refused by the size estimate.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_write_near_the_node_limit_commits() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-near");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let big = vec![b'x'; 900 * 1024];
    guard
        .fenced()
        .create(&state, &big, CreateMode::Persistent)
        .commit()
        .await
        .unwrap();
    assert_eq!(data(&observer, &state).await.len(), big.len());
    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// Bad input is refused at once, even with the connection frozen (so nothing waited for a
/// reply), nothing is created, and the hold and session are untouched.
#[tokio::test(flavor = "multi_thread")]
async fn bad_fenced_input_is_refused_at_once_with_nothing_sent_and_the_hold_untouched() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-bad");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let holder = tolerant_session(&proxy.address(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    proxy.freeze();
    let persistent = CreateMode::Persistent;
    for bad in [
        "", "relative", "/a//b", "/a/./b", "/a/../b", "/a/", "/a\u{1}b", "/a\0b",
    ] {
        let refused = tokio::time::timeout(
            Duration::from_millis(500),
            guard
                .fenced()
                .create(&state, b"", persistent)
                .set_data(bad, b"x", None)
                .commit(),
        )
        .await
        .unwrap_or_else(|_| panic!("{bad:?} was sent (waited for a frozen server)"));
        assert!(
            matches!(&refused, Err(Error::InvalidPath { path, .. }) if path == bad),
            "{bad:?}: {refused:?}"
        );
    }
    let mut too_many = guard.fenced();
    for i in 0..3 {
        too_many = too_many.create(&format!("{state}-{i}"), &vec![0; 400 * 1024], persistent);
    }
    let refused = tokio::time::timeout(Duration::from_millis(500), too_many.commit())
        .await
        .expect("an oversized transaction was sent");
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    proxy.restore();

    assert!(!guard.is_lost(), "bad input is no loss");
    guard
        .fenced()
        .check(guard.node(), -1)
        .commit()
        .await
        .expect("the hold still fences after bad input");
    assert_eq!(observer.check_stat(&state).await.unwrap(), None);
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}

/// Each failure has its own variant: a connection that is down (tolerated) is
/// `Disconnected` at once; a closed session is `Lost`; the hold keeps fencing after the
/// connection comes back.
#[tokio::test(flavor = "multi_thread")]
async fn a_down_connection_is_disconnected_and_a_closed_session_is_lost() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-variants");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let holder = tolerant_session(&proxy.address(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    proxy.cut();
    await_state(&holder, SessionState::Disconnected).await;
    let down = guard
        .fenced()
        .create(&state, b"down", CreateMode::Persistent)
        .commit()
        .await;
    assert!(matches!(down, Err(Error::Disconnected)), "{down:?}");
    proxy.restore();
    await_state(&holder, SessionState::SyncConnected).await;
    guard
        .fenced()
        .create(&state, b"back", CreateMode::Persistent)
        .commit()
        .await
        .expect("a tolerated disconnection is no loss");

    let late = guard.fenced();
    holder.close();
    let closed = late.set_data(&state, b"closed", None).commit().await;
    assert!(matches!(closed, Err(Error::Lost { .. })), "{closed:?}");
    assert_eq!(data(&observer, &state).await, b"back");
    drop(guard);
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// A proclaim, whose read of the leader's node comes before its fenced write, is
/// `Disconnected` at once on a down connection, as the write is (it waited for the
/// connection, past the session's close); the leader proclaims once it is back, and a
/// closed session's proclaim is `Lost`.
#[tokio::test(flavor = "multi_thread")]
async fn a_proclaim_on_a_down_connection_is_disconnected_at_once() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("proclaim-down");
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let holder = tolerant_session(&proxy.address(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&holder, &root, "a").unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = candidate.leadership().await.unwrap();

    proxy.cut();
    await_state(&holder, SessionState::Disconnected).await;
    let down = bounded("the proclaim", PATIENCE, leadership.proclaim(b"down")).await;
    assert!(matches!(down, Err(Error::Disconnected)), "{down:?}");
    proxy.restore();
    await_state(&holder, SessionState::SyncConnected).await;
    leadership
        .proclaim(b"back")
        .await
        .expect("a tolerated disconnection is no loss");
    assert_eq!(data(&observer, leadership.node()).await, b"a\0back");

    drop(holder.close());
    let closed = leadership.proclaim(b"closed").await;
    assert!(matches!(closed, Err(Error::Lost { .. })), "{closed:?}");
    drop(leadership);
    drop(candidate);
    await_empty(&observer, &root).await;
}

/// A fenced delete of the holder's own node commits with the rest, as written while held;
/// the guard then reads as lost (the node is gone), the next contender holds, and release
/// says the hold was over without leaving anything.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_delete_of_the_holders_own_node_ends_the_hold_cleanly() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-own");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let other = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&holder, &root).unwrap();
    let guard = mutex.lock().await.unwrap();
    let waiter = Mutex::new(&other, &root).unwrap();
    let mut next = pin!(waiter.lock());
    tokio::select! {
        biased;
        got = &mut next => panic!("the waiter got the lock while held: {got:?}"),
        () = tokio::time::sleep(Duration::from_millis(200)) => {}
    }

    let node = guard.node().to_owned();
    let written = guard
        .fenced()
        .create(&state, b"last", CreateMode::Persistent)
        .delete(&node, None)
        .commit()
        .await
        .unwrap();
    assert_eq!(written[1], Written::Deleted);
    let loss = bounded("the guard hears its node went", PATIENCE, guard.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    let next = bounded("the next contender holds", PATIENCE, next)
        .await
        .unwrap();
    let after = guard
        .fenced()
        .set_data(&state, b"stale", None)
        .commit()
        .await;
    assert!(matches!(after, Err(Error::Lost { .. })), "{after:?}");
    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    assert_eq!(data(&observer, &state).await, b"last");
    next.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// A reentered guard keeps fencing after its sibling is released; a builder made before the
/// last release is refused after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_reentered_guard_fences_until_the_last_release_and_an_old_builder_is_refused() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-reenter");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let first = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let second = first.reenter();
    first.release().await.unwrap();
    second
        .fenced()
        .create(&state, b"second", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();
    let early = second.fenced().set_data(&state, b"after release", None);
    second.release().await.unwrap();
    let refused = early.commit().await;
    assert!(matches!(refused, Err(Error::Lost { .. })), "{refused:?}");
    assert_eq!(data(&observer, &state).await, b"second");
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// A leader deposed behind its back (its node deleted by an operator while it hears nothing)
/// is refused by the servers; the new leader's proclamation is what observers see.
#[tokio::test(flavor = "multi_thread")]
async fn a_deposed_leaders_proclaim_is_refused_by_the_servers() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-deposed");
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let a = session(&proxy.address(), SESSION_TIMEOUT).await;
    let b = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let election_a = LeaderElection::new(&a, &root, "node-a").unwrap();
    let candidate_a = election_a.join().await.unwrap();
    let leading_a = candidate_a.leadership().await.unwrap();
    leading_a.proclaim(b"a:1").await.unwrap();
    let election_b = LeaderElection::new(&b, &root, "node-b").unwrap();
    let candidate_b = election_b.join().await.unwrap();

    proxy.freeze();
    observer.delete(leading_a.node(), None).await.unwrap();
    let leading_b = bounded("b leads", PATIENCE, candidate_b.leadership())
        .await
        .unwrap();
    leading_b.proclaim(b"b:2").await.unwrap();
    assert!(!leading_a.is_lost(), "the frozen leader cannot have heard");
    let mut stale = pin!(leading_a.proclaim(b"a:stale"));
    tokio::select! {
        biased;
        done = &mut stale => panic!("answered while frozen: {done:?}"),
        () = std::future::ready(()) => {}
    }
    proxy.restore();
    let refused = bounded("the servers answer", PATIENCE, stale).await;
    assert!(matches!(refused, Err(Error::Lost { .. })), "{refused:?}");
    let leader = election_b.leader().await.unwrap().expect("a leader");
    assert_eq!(leader.id.as_deref(), Some("node-b"));
    assert_eq!(leader.proclaimed.as_deref(), Some(&b"b:2"[..]));

    candidate_b.resign().await.unwrap();
    drop(candidate_a);
    await_empty(&observer, &root).await;
}

/// Someone changes the ACL of the holder's node so that it cannot be read (a write into
/// the holder's node, not a loss: the node and the session are intact, `is_lost()` says
/// so). A fenced write must not then say `Lost` (the hold is over); it is refused for want
/// of permission (`NoAuth`), and the guard still releases.
#[tokio::test(flavor = "multi_thread")]
async fn an_acl_change_on_the_holders_node_is_not_reported_as_a_loss() {
    use zookeeper_client::{Acl, AuthId, Permission};
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-acl");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let write_only = [Acl::new(Permission::WRITE, AuthId::anyone())];
    observer
        .set_acl(guard.node(), &write_only, None)
        .await
        .unwrap();

    let refused = guard
        .fenced()
        .create(&state, b"x", CreateMode::Persistent)
        .commit()
        .await;
    let lost = guard.is_lost();
    let exists = observer.check_stat(guard.node()).await.unwrap().is_some();
    let released = guard.release().await;
    if observer.check_stat(&state).await.unwrap().is_some() {
        observer.delete(&state, None).await.unwrap();
    }
    await_empty(&observer, &root).await;

    assert!(exists && !lost, "the hold is intact");
    assert!(released.is_ok(), "{released:?}");
    assert!(
        matches!(refused, Err(Error::NoAuth { .. })),
        "the hold is intact (node there, not lost) yet the commit says: {refused:?}"
    );
}

/// An ephemeral node created in a fenced transaction belongs to the holder's session.
#[tokio::test(flavor = "multi_thread")]
async fn an_ephemeral_created_in_a_fenced_transaction_is_the_holders_sessions() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-ephemeral");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    guard
        .fenced()
        .create(&state, b"e", CreateMode::Ephemeral)
        .commit()
        .await
        .unwrap();
    let (_, stat) = observer.get_data(&state).await.unwrap();
    let (_, own) = observer.get_data(guard.node()).await.unwrap();
    assert_eq!(stat.ephemeral_owner, own.ephemeral_owner);
    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// A proclamation too large for a node is refused before sending; the leadership and what
/// it advertised are untouched.
#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_proclamation_is_refused_and_changes_nothing() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-proclaim-big");
    let observer = observer(&zk.connect_string()).await;
    let leader = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&leader, &root, "node-a").unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = candidate.leadership().await.unwrap();
    leadership.proclaim(b"small").await.unwrap();
    let big = leadership.proclaim(&vec![b'x'; 960 * 1024]).await;
    assert!(matches!(big, Err(Error::InvalidArgument(_))), "{big:?}");
    assert!(!leadership.is_lost());
    let leader = election.leader().await.unwrap().expect("a leader");
    assert_eq!(leader.proclaimed.as_deref(), Some(&b"small"[..]));
    candidate.resign().await.unwrap();
    await_empty(&observer, &root).await;
}

/// A stream of writes into the holder's node (hints, markers) while it commits fenced
/// writes: no commit fails and the hold is never lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_of_writes_into_the_holders_node_never_fences_or_loses_it() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-hints");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    guard
        .fenced()
        .create(&state, b"0", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();
    let node = guard.node().to_owned();
    let hinting = async {
        for i in 0..300u32 {
            let hint: &[u8] = if i % 3 == 0 { b"__REVOKE__" } else { b"hint" };
            observer.set_data(&node, hint, None).await.unwrap();
        }
    };
    let writing = async {
        for i in 0..300u32 {
            guard
                .fenced()
                .set_data(&state, i.to_string().as_bytes(), None)
                .commit()
                .await
                .unwrap_or_else(|err| panic!("write {i} fenced by a hint: {err}"));
        }
    };
    bounded("hints and writes", PATIENCE, async {
        tokio::join!(hinting, writing)
    })
    .await;
    assert!(!guard.is_lost(), "a hint is no loss");
    assert_eq!(data(&observer, &state).await, b"299");
    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// A commit whose request never reached the servers (the connection broke with it in
/// flight) says the outcome is unknown (`ConnectionLoss`), is not sent again by itself, and
/// the tolerated hold fences again once reconnected.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_lost_in_flight_is_connection_loss_and_is_not_sent_again() {
    const MULTI: i32 = 14;
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-in-flight");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let holder = tolerant_session(&proxy.address(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    proxy.drop_requests(MULTI, 1);
    let lost = bounded(
        "the commit ends",
        PATIENCE,
        guard
            .fenced()
            .create(&state, b"in flight", CreateMode::Persistent)
            .commit(),
    )
    .await;
    assert!(matches!(lost, Err(Error::ConnectionLoss)), "{lost:?}");
    assert_eq!(proxy.dropped(), 1);
    assert_eq!(
        observer.check_stat(&state).await.unwrap(),
        None,
        "not sent again"
    );
    await_state(&holder, SessionState::SyncConnected).await;
    guard
        .fenced()
        .create(&state, b"again", CreateMode::Persistent)
        .commit()
        .await
        .expect("the tolerated hold fences again");
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// Once `close()` has returned, a hold of that session writes nothing, even while its
/// client lives on (a `Client` taken from the session, a request in flight) and before the
/// hold has heard of the close: the servers would still accept it, the node being there.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_written_once_the_session_is_closed() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-closed");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let kept = holder.client().expect("a live session");

    holder.close();
    let closed = guard
        .fenced()
        .create(&state, b"after close", CreateMode::Persistent)
        .commit()
        .await;
    assert!(matches!(closed, Err(Error::Lost { .. })), "{closed:?}");
    assert_eq!(observer.check_stat(&state).await.unwrap(), None, "written");
    drop((guard, kept));
    await_empty(&observer, &root).await;
}
