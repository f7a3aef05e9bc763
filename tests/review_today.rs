//! Review of today's changes against real servers: the end of a holding (its monitor stops
//! by itself, sets no watch after the end, keeps no session open) and the first touch of a
//! recipe root (made in the round trip of the entry).

use std::time::Duration;

use zk_harness::{
    await_count, await_empty, bounded, observer, session, session_id, unique_root, Ensemble, Proxy,
    PATIENCE,
};
use zk_recipes::{Error, Mutex, Session};
use zookeeper_client::{Acl, Acls, AuthId, CreateMode, Permission};

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// ZooKeeper opcodes.
const EXISTS: i32 = 3;
const REMOVE_WATCHES: i32 = 18;
const MULTI: i32 = 14;
const CREATE2: i32 = 15;
const CREATE_CONTAINER: i32 = 19;
const PING: i32 = 11;

fn sent_since(proxy: &Proxy, from: usize) -> Vec<i32> {
    proxy.requests()[from..]
        .iter()
        .copied()
        .filter(|&op| op != PING)
        .collect()
}

fn all_but(denied: Permission) -> [Acl; 1] {
    let all = [
        Permission::READ,
        Permission::WRITE,
        Permission::CREATE,
        Permission::DELETE,
        Permission::ADMIN,
    ];
    let kept = all
        .into_iter()
        .filter(|&p| p != denied)
        .fold(Permission::NONE, |acc, p| acc | p);
    [Acl::new(kept, AuthId::anyone())]
}

async fn persistent(admin: &zookeeper_client::Client, path: &str) {
    admin
        .create(
            path,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
}

// ----- the end of a holding -----

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
        let sent = sent_since(&proxy, before);
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
        let sent = sent_since(&proxy, before);
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

// ----- first touch of a root -----

/// A first touch whose pipelined root create is lost with the connection (the proxy
/// drops the connection at the createContainer): the entry still holds, once, and leaves
/// nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_first_touch_lost_with_the_connection_still_holds() {
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    for opcode in [CREATE_CONTAINER, CREATE2] {
        let proxy = ensemble.proxy(0).await;
        let root = format!("{}/k", unique_root("review-first-touch-lost"));
        let s = session(&proxy.address(), SESSION_TIMEOUT).await;
        proxy.drop_requests(opcode, 1);
        let guard = bounded("lock", PATIENCE, Mutex::new(&s, &root).unwrap().lock())
            .await
            .unwrap();
        assert_eq!(proxy.dropped(), 1, "opcode {opcode}");
        assert_eq!(await_count(&admin, &root, 1).await.len(), 1);
        guard.release().await.unwrap();
        await_empty(&admin, &root).await;
        // try_lock never waits on a connection: an error or a hold, nothing left.
        let other = format!("{root}-try");
        proxy.drop_requests(opcode, 1);
        let tried = bounded(
            "try_lock",
            PATIENCE,
            Mutex::new(&s, &other).unwrap().try_lock(),
        )
        .await;
        match tried {
            Ok(Some(guard)) => guard.release().await.unwrap(),
            Err(Error::ConnectionLoss) => {}
            other => panic!("opcode {opcode}: {other:?}"),
        }
        await_empty(&admin, &other).await;
        s.close();
    }
}

/// A root that exists as an ephemeral node, and a root under an ephemeral node: a clear
/// error, promptly, nothing created. Known roots later replaced by an ephemeral node too.
#[tokio::test(flavor = "multi_thread")]
async fn ephemeral_roots_and_parents_fail_clearly() {
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    let base = unique_root("review-ephemeral");
    persistent(&admin, &base).await;
    let eph = format!("{base}/eph");
    admin
        .create(
            &eph,
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    for root in [eph.clone(), format!("{eph}/under"), format!("{eph}/a/b")] {
        let got = bounded(
            "lock",
            Duration::from_secs(5),
            Mutex::new(&s, &root).unwrap().lock(),
        )
        .await;
        assert!(
            matches!(got, Err(Error::EphemeralParent { .. })),
            "{root}: {got:?}"
        );
    }
    let kids = admin.list_children(&eph).await.unwrap();
    assert!(kids.is_empty(), "{kids:?}");
    // A root the session knows, replaced by an ephemeral node.
    let known = format!("{base}/known");
    let guard = Mutex::new(&s, &known).unwrap().lock().await.unwrap();
    guard.release().await.unwrap();
    await_empty(&admin, &known).await;
    admin.delete(&known, None).await.unwrap();
    admin
        .create(
            &known,
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let got = bounded(
        "lock",
        Duration::from_secs(5),
        Mutex::new(&s, &known).unwrap().lock(),
    )
    .await;
    assert!(
        matches!(got, Err(Error::EphemeralParent { .. })),
        "{known}: {got:?}"
    );
    admin.delete(&known, None).await.unwrap();
    admin.delete(&eph, None).await.unwrap();
    admin.delete(&base, None).await.unwrap();
}

/// ACLs: a missing root whose parent denies CREATE; a root that denies CREATE, known or
/// not; a creator-only ACL on a session without identity. A clear error, promptly,
/// nothing created.
#[tokio::test(flavor = "multi_thread")]
async fn acls_that_refuse_the_first_touch_fail_clearly() {
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    let base = unique_root("review-acl");
    persistent(&admin, &base).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    // The root: known to the session.
    let root = format!("{base}/jobs");
    let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    guard.release().await.unwrap();
    await_empty(&admin, &root).await;
    admin
        .set_acl(&root, &all_but(Permission::CREATE), None)
        .await
        .unwrap();
    let fresh = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    for (who, session) in [("known", &s), ("unknown", &fresh)] {
        let got = bounded(
            "lock",
            Duration::from_secs(5),
            Mutex::new(session, &root).unwrap().lock(),
        )
        .await;
        assert!(matches!(got, Err(Error::NoAuth { .. })), "{who}: {got:?}");
    }
    // A missing root under a parent that denies CREATE.
    admin
        .set_acl(&base, &all_but(Permission::CREATE), None)
        .await
        .unwrap();
    let missing = format!("{base}/missing");
    for (who, session) in [("known", &s), ("unknown", &fresh)] {
        let got = bounded(
            "lock",
            Duration::from_secs(5),
            Mutex::new(session, &missing).unwrap().lock(),
        )
        .await;
        assert!(matches!(got, Err(Error::NoAuth { .. })), "{who}: {got:?}");
        let got = bounded(
            "lock",
            Duration::from_secs(5),
            Mutex::new(session, &format!("{missing}/deeper"))
                .unwrap()
                .lock(),
        )
        .await;
        assert!(
            matches!(got, Err(Error::NoAuth { .. })),
            "{who} deeper: {got:?}"
        );
    }
    admin
        .set_acl(&base, &Acls::anyone_all(), None)
        .await
        .unwrap();
    let kids = admin.list_children(&base).await.unwrap();
    assert_eq!(kids, ["jobs"]);
    assert!(admin.list_children(&root).await.unwrap().is_empty());
    admin.delete(&root, None).await.unwrap();
    admin.delete(&base, None).await.unwrap();
}

/// Many tasks over several sessions first-touch one missing root (with a missing parent)
/// at once: all hold in turn, never two at once, nothing left.
#[tokio::test(flavor = "multi_thread")]
async fn many_first_touches_of_one_root_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    let root = format!("{}/a/b", unique_root("review-many-first"));
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let mut sessions = Vec::new();
    for _ in 0..4 {
        // One connect string: the sessions share what roots they know.
        let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
        sessions.push(s.clone());
        for _ in 0..8 {
            let (s, root, inside) = (s.clone(), root.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }));
        }
    }
    for task in tasks {
        bounded("a first touch", PATIENCE, task).await.unwrap();
    }
    await_empty(&admin, &root).await;
    for s in sessions {
        s.close();
    }
}

/// The root deleted by operators as fast as they can while contenders enter and leave
/// (each delete lands when the root is empty: mostly just after an entry made it, before
/// the entry's create): every entry holds (the root is made again), never two holders,
/// nothing left. It failed with `NoNode` once the root it made or found was gone.
#[tokio::test(flavor = "multi_thread")]
async fn roots_deleted_behind_the_sessions_back() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    let root = format!("{}/k", unique_root("review-deleted-roots"));
    let inside = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut reapers = Vec::new();
    for _ in 0..3 {
        let admin = observer(&ensemble.connect_string()).await;
        let (root, stop) = (root.clone(), stop.clone());
        reapers.push(tokio::spawn(async move {
            let mut deleted = 0;
            while !stop.load(Ordering::SeqCst) {
                if admin.delete(&root, None).await.is_ok() {
                    deleted += 1;
                }
            }
            deleted
        }));
    }
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let s: Session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
        let (root, inside, errors) = (root.clone(), inside.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..150 {
                match Mutex::new(&s, &root).unwrap().lock().await {
                    Ok(guard) => {
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        inside.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.unwrap();
                    }
                    Err(err) => errors.lock().unwrap().push(format!("{err:?}")),
                }
            }
        }));
    }
    for task in tasks {
        bounded("entries", PATIENCE, task).await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let mut deleted = 0;
    for reaper in reapers {
        deleted += reaper.await.unwrap();
    }
    let errors = errors.lock().unwrap().clone();
    println!("root deleted {deleted} times; errors: {errors:?}");
    await_empty(&admin, &root).await;
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
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
        let sent = sent_since(&proxy, before);
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
        let sent = sent_since(&proxy, before);
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
