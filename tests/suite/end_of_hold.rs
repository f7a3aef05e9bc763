//! The end of a holding, against real servers: released, dropped, resigned, on a cut or
//! frozen connection, while its session expires. The monitor of a hold stops by itself once
//! the hold ended: it sets no watch after the end, drops none unfired (no removeWatches),
//! keeps no session open, and the node is gone.

use std::time::Duration;

use zk_harness::{
    all_but, await_count, await_empty, bounded, observer, persistent, session, session_id,
    unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, Mutex};
use zookeeper_client::{Acls, Permission};

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// ZooKeeper opcodes.
const EXISTS: i32 = 3;
const REMOVE_WATCHES: i32 = 18;
const MULTI: i32 = 14;

/// A holder whose node's delete the servers refuse (the root denies DELETE), dropped with
/// its session's last handle: the ZooKeeper session ends, and the node with it. Nothing
/// of the holding may keep the session open once its owner dropped everything.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_session_ends_even_when_its_holders_delete_was_refused() {
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    let root = unique_root("review-refused-delete");
    persistent(&admin, &root).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    // The holder watches its node (set shortly after acquisition).
    ensemble.await_watcher(guard.node(), &session_id(&s)).await;
    admin
        .set_acl(&root, &all_but(Permission::DELETE), None)
        .await
        .unwrap();
    drop(guard);
    drop(s);
    await_empty(&admin, &root).await;
    admin
        .set_acl(&root, &Acls::anyone_all(), None)
        .await
        .unwrap();
    admin.delete(&root, None).await.unwrap();
}

/// A waiter that gets the lock by hand-off and releases it at once (before the holding's
/// monitor ever ran) keeps the watch it set while waiting until it fires: no request to
/// remove it. The current-thread runtime makes the monitor's first poll come after the
/// release.
#[tokio::test]
async fn a_hand_off_released_at_once_sends_no_remove_watches() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("review-hand-off-at-once");
    let admin = observer(&ensemble.connect_string()).await;
    let first = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let waiter = session(&proxy.address(), SESSION_TIMEOUT).await;
    for round in 0..8 {
        let held = Mutex::new(&first, &root).unwrap().lock().await.unwrap();
        let before = proxy.requests().len();
        let mutex = Mutex::new(&waiter, &root).unwrap();
        let next = tokio::spawn(async move {
            let guard = mutex.lock().await?;
            guard.release().await
        });
        await_count(&admin, &root, 2).await;
        ensemble
            .await_watcher(held.node(), &session_id(&waiter))
            .await;
        held.release().await.unwrap();
        bounded("the hand-off", PATIENCE, next)
            .await
            .unwrap()
            .unwrap();
        await_empty(&admin, &root).await;
        let again = Mutex::new(&waiter, &root).unwrap().lock().await.unwrap();
        again.release().await.unwrap();
        // From the waiter's release (its first multi of the round) on.
        let sent = proxy.sent_since(before);
        let released = sent.iter().position(|&op| op == MULTI).unwrap();
        assert!(
            !sent[released..].contains(&REMOVE_WATCHES),
            "round {round}: the waiter's session sent {sent:?}"
        );
    }
    await_empty(&admin, &root).await;
}

/// A holder whose loss was asked for (so that its node is to be watched at once) and that
/// is dropped before the watch was set: the holding ended, so no watch is set after that
/// (an exists after the delete would watch a node that is gone, and cost a request to
/// remove it).
#[tokio::test]
async fn a_holder_dropped_right_after_asking_for_its_loss_sets_no_watch() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("review-lost-then-drop");
    let admin = observer(&ensemble.connect_string()).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    for round in 0..8 {
        let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
        tokio::select! {
            biased;
            _ = guard.lost() => panic!("lost at once"),
            () = std::future::ready(()) => {}
        }
        let before = proxy.requests().len();
        drop(guard);
        await_empty(&admin, &root).await;
        // One more entry and release: whatever the dropped holding sent is ahead of it.
        let again = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
        again.release().await.unwrap();
        let sent = proxy.sent_since(before);
        assert!(
            !sent.contains(&EXISTS) && !sent.contains(&REMOVE_WATCHES),
            "round {round}: after the drop the session sent {sent:?}"
        );
    }
    await_empty(&admin, &root).await;
}

/// Released while the connection is cut: the release waits for it, no loss is reported
/// before the release, and afterwards no watch of the session is left on the servers.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_on_a_cut_connection_leaves_no_watch() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("review-release-cut");
    let admin = observer(&ensemble.connect_string()).await;
    let s = zk_harness::tolerant_session(&proxy.address(), Duration::from_secs(10)).await;
    let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    let id = session_id(&s);
    ensemble.await_watcher(guard.node(), &id).await;
    let mut seen = zk_harness::record_events(&s);
    proxy.cut();
    zk_harness::await_events(&mut seen, &[zk_recipes::SessionEvent::Suspended], PATIENCE).await;
    let releasing = tokio::spawn(guard.release());
    proxy.restore();
    let released = bounded("the release", PATIENCE, releasing).await.unwrap();
    assert!(released.is_ok(), "{released:?}");
    await_empty(&admin, &root).await;
    ensemble
        .await_watched_under(&root, &Default::default())
        .await;
    s.close();
}

/// A leader that resigns, or whose candidate is dropped, leaves no watch behind and sends
/// no exists or removeWatches after its node's delete; its leadership reports the end as
/// `Closed`, never a spurious loss before it.
#[tokio::test(flavor = "multi_thread")]
async fn a_resigned_or_dropped_leader_leaves_no_watch() {
    use zk_recipes::{LeaderElection, Loss};
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("review-resign");
    let admin = observer(&ensemble.connect_string()).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&s, &root, "a").unwrap();
    for resign in [true, false] {
        let candidate = election.join().await.unwrap();
        let leadership = candidate.leadership().await.unwrap();
        ensemble
            .await_watcher(leadership.node(), &session_id(&s))
            .await;
        assert!(!leadership.is_lost());
        let before = proxy.requests().len();
        if resign {
            candidate.resign().await.unwrap();
        } else {
            drop(candidate);
        }
        assert_eq!(
            bounded("the end", PATIENCE, leadership.lost()).await,
            Loss::Closed
        );
        await_empty(&admin, &root).await;
        ensemble
            .await_watched_under(&root, &Default::default())
            .await;
        let again = Mutex::new(&s, &format!("{root}-lock"))
            .unwrap()
            .lock()
            .await
            .unwrap();
        again.release().await.unwrap();
        let sent = proxy.sent_since(before);
        assert!(
            !sent.contains(&EXISTS) && !sent.contains(&REMOVE_WATCHES),
            "resign: {resign}: {sent:?}"
        );
    }
}

/// Released while the connection is cut (`cut`) or silent (`freeze`) and the session
/// expires meanwhile: the release finishes (its node went with the session; `Ok` when the
/// hold was still trusted as it began, else `Lost`), and afterwards nothing is left under the root, no watch of ours is left, and
/// the renewed session sends no exists or removeWatches for the old node.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_while_the_session_expires_finishes() {
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    for freeze in [false, true] {
        let proxy = ensemble.proxy(0).await;
        let root = unique_root("review-release-expiring");
        let s = session(&proxy.address(), SESSION_TIMEOUT).await;
        let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
        ensemble.await_watcher(guard.node(), &session_id(&s)).await;
        let info = s.client().unwrap().session().clone();
        let mut seen = zk_harness::record_events(&s);
        if freeze {
            proxy.freeze();
        } else {
            proxy.cut();
        }
        let releasing = tokio::spawn(guard.release());
        zk_harness::expire_session(&ensemble.connect_string(), &info).await;
        await_empty(&admin, &root).await;
        proxy.restore();
        let released = bounded("the release", PATIENCE, releasing).await.unwrap();
        assert!(
            matches!(released, Ok(()) | Err(Error::Lost { .. })),
            "freeze: {freeze}: {released:?}"
        );
        zk_harness::await_events(
            &mut seen,
            &[
                zk_recipes::SessionEvent::Expired,
                zk_recipes::SessionEvent::Connected,
            ],
            PATIENCE,
        )
        .await;
        let before = proxy.requests().len();
        let again = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
        again.release().await.unwrap();
        let sent = proxy.sent_since(before);
        assert!(
            !sent.contains(&EXISTS) && !sent.contains(&REMOVE_WATCHES),
            "freeze: {freeze}: {sent:?}"
        );
        await_empty(&admin, &root).await;
        ensemble
            .await_watched_under(&root, &Default::default())
            .await;
        s.close();
    }
}
