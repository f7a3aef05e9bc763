//! The first touch of a recipe root, against real servers: the root made in the round trip
//! of the entry, under faults (a create lost with the connection), refusals (ACLs,
//! ephemeral roots and parents), many first touches at once, and roots deleted behind the
//! session's back.

use std::time::Duration;

use zk_harness::{
    all_but, await_count, await_empty, bounded, observer, persistent, session, unique_root,
    Ensemble, PATIENCE,
};
use zk_recipes::{Error, Mutex, Session};
use zookeeper_client::{Acls, CreateMode, Permission};

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// ZooKeeper opcodes.
const CREATE2: i32 = 15;
const CREATE_CONTAINER: i32 = 19;

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
