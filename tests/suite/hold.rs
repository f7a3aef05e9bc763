//! One trait for everything held: every guard, a lease and a leadership are `Hold`s, and
//! releasing one through the trait gives it up as its own `release` does.

use std::time::Duration;

use zk_harness::{
    bounded, join_election, live_client, observer, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, Hold, Mutex, RwLock, Semaphore};

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// What a caller that treats holds alike sees: a token, a node under the root, no loss,
/// and a release that deletes the node.
async fn release_as_hold(hold: Box<dyn Hold>, root: &str, client: &zookeeper_client::Client) {
    assert!(hold.fencing_token() > 0);
    assert!(
        hold.node().starts_with(root),
        "{} under {root}",
        hold.node()
    );
    assert!(!hold.is_lost());
    let node = hold.node().to_owned();
    bounded("release", PATIENCE, hold.release()).await.unwrap();
    assert_eq!(
        client.check_stat(&node).await.unwrap(),
        None,
        "{node} left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_guard_lease_and_leadership_is_a_hold() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let client = observer(&hosts).await;
    let root = unique_root("hold");

    let mutex = Mutex::new(&s, &format!("{root}/mutex")).unwrap();
    release_as_hold(Box::new(mutex.lock().await.unwrap()), &root, &client).await;
    let rw = RwLock::new(&s, &format!("{root}/rw")).unwrap();
    release_as_hold(Box::new(rw.read().await.unwrap()), &root, &client).await;
    release_as_hold(Box::new(rw.write().await.unwrap()), &root, &client).await;
    let semaphore = Semaphore::new(&s, &format!("{root}/semaphore"), 2).unwrap();
    release_as_hold(Box::new(semaphore.acquire().await.unwrap()), &root, &client).await;

    let election = format!("{root}/election");
    let candidate = join_election(&s, &election, "a").await;
    let leadership = bounded("leadership", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    assert_eq!(leadership.fencing_token(), leadership.term());
    release_as_hold(Box::new(leadership), &root, &client).await;
    // Releasing the leadership resigned the candidate: its campaign is over.
    assert!(matches!(candidate.leadership().await, Err(Error::Closed)));
    drop(candidate);
    zk_harness::await_empty(&client, &election).await;
}

/// A leadership released through `Hold` lets the next candidate lead; one that was lost
/// before says so with `Error::Lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn releasing_a_leadership_passes_it_on() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("hold-leadership");
    let (a, b) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let first = join_election(&a, &root, "first").await;
    let second = join_election(&b, &root, "second").await;
    let leadership = bounded("leadership", PATIENCE, first.leadership())
        .await
        .unwrap();
    let hold: Box<dyn Hold> = Box::new(leadership);
    bounded("release", PATIENCE, hold.release()).await.unwrap();
    let leadership = bounded("the next leader", PATIENCE, second.leadership())
        .await
        .unwrap();
    assert!(matches!(first.leadership().await, Err(Error::Closed)));
    let client = live_client(&b);
    client.delete(leadership.node(), None).await.unwrap();
    bounded("loss", PATIENCE, leadership.lost()).await;
    assert!(matches!(
        bounded("release", PATIENCE, leadership.release()).await,
        Err(Error::Lost { .. })
    ));
    zk_harness::await_empty(&client, &root).await;
}
