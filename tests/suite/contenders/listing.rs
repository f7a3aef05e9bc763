//! `contenders()` (issue #27): a path nobody used, contenders that
//! come and go while listed, a connection that is down.

use std::time::Duration;

use zk_harness::{
    await_empty, bounded, digest_session, observer, session, tolerant_session, unique_root,
    Ensemble, PATIENCE,
};
use zk_recipes::{Error, Mutex, NodeAcl, RwLock, Semaphore};
use zookeeper_client::SessionState;

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn contenders_of_a_path_nobody_used_are_none_and_nothing_is_created() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-contenders-none");
    let observer = observer(&zk.connect_string()).await;
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    assert!(Mutex::new(&s, &root)
        .unwrap()
        .contenders()
        .await
        .unwrap()
        .is_empty());
    assert!(RwLock::new(&s, &root)
        .unwrap()
        .contenders()
        .await
        .unwrap()
        .is_empty());
    let semaphore = Semaphore::new(&s, &root, 3).unwrap();
    assert!(semaphore.contenders().await.unwrap().is_empty());
    assert_eq!(semaphore.recorded_max().await.unwrap(), None);
    assert!(Mutex::new(&s, &root)
        .unwrap()
        .revoke_holders()
        .await
        .unwrap()
        .is_empty());
    assert_eq!(observer.check_stat(&root).await.unwrap(), None);
}

/// Listed while contenders enter and leave all the time: every listing succeeds, is in
/// token order, and says that at most one holds (the first).
#[tokio::test(flavor = "multi_thread")]
async fn contenders_listed_while_they_come_and_go_never_fail_and_stay_in_order() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-contenders-churn");
    let observer = observer(&zk.connect_string()).await;
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&s, &root).unwrap();
    let workers: Vec<_> = (0..6)
        .map(|_| {
            let mutex = mutex.clone();
            tokio::spawn(async move {
                for _ in 0..15 {
                    mutex.lock().await.unwrap().release().await.unwrap();
                }
            })
        })
        .collect();
    let mut seen_several = false;
    for _ in 0..200 {
        let listed = mutex.contenders().await.unwrap();
        seen_several |= listed.len() > 1;
        assert!(
            listed.windows(2).all(|w| w[0].token < w[1].token),
            "{listed:?}"
        );
        assert!(listed.iter().skip(1).all(|c| !c.holds), "{listed:?}");
        assert!(listed.first().is_none_or(|c| c.holds), "{listed:?}");
    }
    for worker in workers {
        bounded("a worker ends", PATIENCE, worker).await.unwrap();
    }
    assert!(seen_several, "the listing never saw a queue");
    await_empty(&observer, &root).await;
}

/// With the connection down, a listing does not wait: `Disconnected` at once.
#[tokio::test(flavor = "multi_thread")]
async fn contenders_with_the_connection_down_are_disconnected_at_once() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-contenders-down");
    let proxy = zk.proxy(0).await;
    let s = tolerant_session(&proxy.address(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&s, &root).unwrap();
    let client = s.client().expect("a live session");
    let mut states = client.state_watcher();
    proxy.cut();
    bounded("the cut is seen", PATIENCE, async {
        while states.state() != SessionState::Disconnected {
            states.changed().await;
        }
    })
    .await;
    let listed = tokio::time::timeout(Duration::from_millis(500), mutex.contenders())
        .await
        .expect("a listing waited for the connection");
    assert!(matches!(listed, Err(Error::Disconnected)), "{listed:?}");
    let asked = tokio::time::timeout(Duration::from_millis(500), mutex.revoke_holders())
        .await
        .expect("revoke_holders waited for the connection");
    assert!(matches!(asked, Err(Error::Disconnected)), "{asked:?}");
    proxy.restore();
    let zk_client = observer(&zk.connect_string()).await;
    assert_eq!(
        zk_client.check_stat(&root).await.unwrap(),
        None,
        "nothing created"
    );
}

/// Ids as large as accepted (960 KiB): contenders holding them enter, are listed with
/// their ids, and leave.
#[tokio::test(flavor = "multi_thread")]
async fn the_largest_ids_accepted_are_carried_and_listed() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-contenders-huge-id");
    let observer = observer(&zk.connect_string()).await;
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let id = "i".repeat(960 * 1024);
    let mutex = Mutex::new(&s, &root).unwrap().id(&id).unwrap();
    let holder = mutex.lock().await.unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.lock().await.unwrap().release().await })
        })
        .collect();
    zk_harness::await_count(&observer, &root, 3).await;
    let listed = mutex.contenders().await.unwrap();
    assert_eq!(listed.len(), 3);
    assert!(listed
        .iter()
        .all(|c| c.id.as_ref().map(String::len) == Some(id.len())));
    assert!(listed[0].holds && listed[0].node == holder.node());
    holder.release().await.unwrap();
    for waiter in waiters {
        bounded("a waiter goes", PATIENCE, waiter)
            .await
            .unwrap()
            .unwrap();
    }
    await_empty(&observer, &root).await;
}

/// A waiter whose node only its own user may read, behind an open holder: an open session
/// lists both (the unreadable one in its place, with its token, without an id) and asks the
/// holder to let go; nothing fails for the one node it cannot read.
#[tokio::test(flavor = "multi_thread")]
async fn a_contender_node_the_observer_may_not_read_is_listed_without_an_id() {
    let zk = Ensemble::shared(1).await;
    let hosts = zk.connect_string();
    let root = unique_root("contenders-unreadable");
    let open = session(&hosts, SESSION_TIMEOUT).await;
    let holder = Mutex::new(&open, &root).unwrap().id("open-holder").unwrap();
    let guard = holder.lock().await.unwrap();
    let private = digest_session(&hosts, SESSION_TIMEOUT, "billing-svc", "another password").await;
    let hidden = Mutex::new(&private, &root)
        .unwrap()
        .node_acl(NodeAcl::CreatorOnly)
        .id("hidden")
        .unwrap();
    let waiter = tokio::spawn(async move { hidden.lock().await.unwrap().release().await });
    let observer = observer(&hosts).await;
    zk_harness::await_count(&observer, &root, 2).await;
    let waiter_node = format!("{root}/{}", zk_harness::children(&observer, &root).await[1]);
    assert!(
        matches!(
            observer.get_data(&waiter_node).await,
            Err(zookeeper_client::Error::NoAuth)
        ),
        "the waiter's node is unreadable to others"
    );
    let token = observer
        .check_stat(&waiter_node)
        .await
        .unwrap()
        .unwrap()
        .czxid;

    let listed = holder.contenders().await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(
        (
            listed[0].node.as_str(),
            listed[0].holds,
            listed[0].id.as_deref()
        ),
        (guard.node(), true, Some("open-holder"))
    );
    assert_eq!(
        (
            listed[1].node.as_str(),
            listed[1].holds,
            listed[1].id.as_deref()
        ),
        (waiter_node.as_str(), false, None)
    );
    assert_eq!(listed[1].token, u64::try_from(token).unwrap());
    assert!(!listed[1].revocation_requested);
    assert_eq!(
        holder.revoke_holders().await.unwrap(),
        vec![guard.node().to_owned()]
    );
    bounded(
        "the holder is asked",
        PATIENCE,
        guard.revocation_requested(),
    )
    .await
    .unwrap();

    guard.release().await.unwrap();
    bounded("the waiter goes", PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    await_empty(&observer, &root).await;
}
