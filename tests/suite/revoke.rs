//! Revocation: asking writes Curator's marker into the holder's node; the holder hears it
//! and nothing else changes; a path nobody holds says so. (Both ways with the real Curator:
//! tests/suite/interop.rs.)

use std::time::Duration;

use zk_harness::{
    await_count, await_empty, bounded, observer, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{revoke, Error, Mutex, RwLock};
use zookeeper_client::CreateMode;

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_hears_it_was_asked_and_nothing_else_changes() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke");
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let asker = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    let mut asked = Box::pin(guard.revocation_requested());
    tokio::select! {
        biased;
        done = &mut asked => panic!("asked before anyone asked: {done:?}"),
        () = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
    let mutex = Mutex::new(&asker, &root).unwrap();
    assert_eq!(
        mutex.revoke_holders().await.unwrap(),
        vec![guard.node().to_owned()]
    );
    bounded("the holder hears it", PATIENCE, &mut asked)
        .await
        .unwrap();
    drop(asked);
    // Asked again later, it is still asked: the marker stays until the node goes.
    guard.revocation_requested().await.unwrap();

    assert!(!guard.is_lost(), "being asked is no loss");
    let contenders = mutex.contenders().await.unwrap();
    assert!(contenders[0].revocation_requested && contenders[0].holds);
    let state = format!("{root}.state");
    guard
        .fenced()
        .create(&state, b"still mine", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();
    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn asking_where_nobody_holds_says_so() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke-nobody");
    let asker = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&asker, &root).unwrap();
    assert!(mutex.revoke_holders().await.unwrap().is_empty());
    let rw = RwLock::new(&asker, &root).unwrap();
    assert!(rw.revoke_holders().await.unwrap().is_empty());
    assert!(!revoke(&asker, &format!("{root}/_c_x-lock-0000000000"))
        .await
        .unwrap());
    assert!(matches!(
        revoke(&asker, "no/slash").await,
        Err(Error::InvalidPath { .. })
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_for_a_request_ends_with_the_hold() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke-lost");
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let asked = guard.revocation_requested();
    let deleted = async {
        observer.delete(guard.node(), None).await.unwrap();
    };
    let (asked, ()) = bounded("the hold ends", PATIENCE, async {
        tokio::join!(asked, deleted)
    })
    .await;
    assert!(matches!(asked, Err(Error::Lost { .. })), "{asked:?}");
    drop(guard);
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_reader_that_holds_is_asked_and_no_waiter() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("revoke-rw");
    let observer = observer(&zk.connect_string()).await;
    let holders = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let rw = RwLock::new(&holders, &root).unwrap();
    let (one, two) = (rw.read().await.unwrap(), rw.read().await.unwrap());
    let writer = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().await.unwrap().release().await }
    });
    await_count(&observer, &root, 3).await;

    let mut asked = rw.revoke_holders().await.unwrap();
    asked.sort();
    let mut readers = vec![one.node().to_owned(), two.node().to_owned()];
    readers.sort();
    assert_eq!(asked, readers);
    one.revocation_requested().await.unwrap();
    two.revocation_requested().await.unwrap();
    let waiting = rw.contenders().await.unwrap();
    assert!(!waiting[2].revocation_requested && !waiting[2].holds);

    one.release().await.unwrap();
    two.release().await.unwrap();
    bounded("the writer goes", PATIENCE, writer)
        .await
        .unwrap()
        .unwrap();
    await_empty(&observer, &root).await;
}

// What counts as a request, and what asking writes (tests/suite/revoke/requests.rs).
#[path = "revoke/requests.rs"]
mod requests;
