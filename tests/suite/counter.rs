//! The shared counter (`SharedCounter`) against a real ZooKeeper server and the real
//! Curator `SharedCount` (Java peer, `tests/interop/CuratorPeer.java`): each sees the
//! other's increments, concurrent increments by both sum exactly, compare-and-set by
//! version, data that is no counter refused, and a watched value that says when it may be
//! stale and catches up after a cut connection and after an expiry.

use std::time::Duration;

use tokio::sync::watch;
use zk_harness::peers::Peer;
use zk_harness::{bounded, expire_session, live_client, session, Ensemble, Fixture, PATIENCE};
use zk_recipes::{CounterState, CounterValue, Error, SharedCounter, Versioned};
use zookeeper_client::{Client, CreateMode};

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// The counter node's data as the servers hold it.
async fn data(observer: &Client, path: &str) -> Vec<u8> {
    observer.get_data(path).await.expect("read the counter").0
}

/// Waits until the watched value is `state` (and, if given, `value`).
async fn await_value(
    values: &mut watch::Receiver<CounterValue>,
    state: CounterState,
    value: Option<i32>,
) -> CounterValue {
    let seen = values.wait_for(|seen| {
        seen.state == state && (value.is_none() || seen.last.map(|last| last.value) == value)
    });
    let what = format!("the watched counter reads {state:?} {value:?}");
    *bounded(&what, PATIENCE, seen)
        .await
        .unwrap_or_else(|_| panic!("{what}: the keeper ended"))
}

/// Deletes the counter's node: the recipe never does.
async fn remove(observer: &Client, path: &str) {
    observer
        .delete(path, None)
        .await
        .expect("delete the counter");
}

/// A counter made by Curator's `SharedCount` with its seed is read by ours; Curator's
/// increments are seen by our watch, ours by Curator's listener, with the same versions.
#[tokio::test(flavor = "multi_thread")]
async fn curator_increments_are_seen_by_ours_and_ours_by_curator() {
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "counter-interop", 1, SESSION_TIMEOUT).await;
    let path = format!("{}/counter", fx.root);
    let mut curator = Peer::curator(ensemble, &format!("{}/unused", fx.root)).await;
    assert_eq!(curator.call(&format!("count-start {path} 5")).await, "5 0");
    // Our seed is not written over Curator's counter.
    let ours = SharedCounter::new(&fx.sessions[0], &path, 1000).unwrap();
    assert_eq!(
        ours.get().await.unwrap(),
        Versioned {
            value: 5,
            version: 0
        }
    );
    let mut values = ours.watch().await.unwrap();
    assert_eq!(values.borrow().current(), Some(5));

    assert_eq!(curator.call(&format!("count-add {path} 1 3")).await, "8 0");
    await_value(&mut values, CounterState::Current, Some(8)).await;
    assert_eq!(values.borrow().last.map(|last| last.version), Some(3));

    let added = ours.add(10).await.unwrap();
    assert_eq!(
        added,
        Versioned {
            value: 18,
            version: 4
        }
    );
    assert_eq!(
        curator.call(&format!("count-await {path} 18 10000")).await,
        "true"
    );
    assert_eq!(curator.call(&format!("count-get {path}")).await, "18 4");
    assert_eq!(data(&fx.observer, &path).await, 18i32.to_be_bytes());

    // A negative delta, read back by Curator.
    ours.add(-20).await.unwrap();
    assert_eq!(
        curator.call(&format!("count-await {path} -2 10000")).await,
        "true"
    );
    curator.call(&format!("count-close {path}")).await;
    curator.quit().await;
    remove(&fx.observer, &path).await;
    fx.nothing_left().await;
}

/// Curator's `SharedCount` in 4 threads (each its own session) and ours in 4 sessions × 2
/// tasks increment one counter at once: the sum is exact, and both sides had conflicts to
/// retry.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_increments_by_curator_and_ours_sum_exactly() {
    const CURATOR_THREADS: usize = 4;
    const CURATOR_EACH: usize = 100;
    const SESSIONS: usize = 4;
    const TASKS: usize = 2;
    const OURS_EACH: usize = 100;
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "counter-sum", SESSIONS, SESSION_TIMEOUT).await;
    let path = format!("{}/counter", fx.root);
    let mut curator = Peer::curator(ensemble, &format!("{}/unused", fx.root)).await;
    curator
        .send(&format!(
            "count-stress {path} {CURATOR_EACH} {CURATOR_THREADS}"
        ))
        .await;
    let mut tasks = Vec::new();
    for session in &fx.sessions {
        for _ in 0..TASKS {
            let counter = SharedCounter::new(session, &path, 0).unwrap();
            tasks.push(tokio::spawn(async move {
                for _ in 0..OURS_EACH {
                    counter.add(1).await.expect("add");
                }
            }));
        }
    }
    for task in tasks {
        bounded("our adders finish", Duration::from_secs(120), task)
            .await
            .expect("adder panicked");
    }
    let reply = curator.reply().await;
    let (done, _failed) = reply.split_once(' ').expect("<increments> <failed>");
    assert_eq!(done, (CURATOR_THREADS * CURATOR_EACH).to_string());
    let total = CURATOR_THREADS * CURATOR_EACH + SESSIONS * TASKS * OURS_EACH;
    let read = SharedCounter::new(&fx.sessions[0], &path, 0)
        .unwrap()
        .get()
        .await
        .unwrap();
    assert_eq!(read.value, i32::try_from(total).unwrap(), "increments lost");
    assert_eq!(read.version, read.value, "one write per increment");
    curator.quit().await;
    remove(&fx.observer, &path).await;
    fx.nothing_left().await;
}

/// `try_set` writes only while the version read is the node's (Curator's
/// `trySetCount(VersionedValue, newCount)`); `set` writes whatever it is; a missing node is
/// created with the seed, with its missing parents.
#[tokio::test(flavor = "multi_thread")]
async fn try_set_writes_only_over_the_version_read() {
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "counter-cas", 2, SESSION_TIMEOUT).await;
    let path = format!("{}/a/b/counter", fx.root);
    let (one, two) = (
        SharedCounter::new(&fx.sessions[0], &path, 42).unwrap(),
        SharedCounter::new(&fx.sessions[1], &path, 7).unwrap(),
    );
    let read = one.get().await.unwrap();
    assert_eq!(
        read,
        Versioned {
            value: 42,
            version: 0
        }
    );

    assert_eq!(two.set(50).await.unwrap().version, 1);
    assert_eq!(
        one.try_set(read, 43).await.unwrap(),
        None,
        "a stale version wrote"
    );
    assert_eq!(data(&fx.observer, &path).await, 50i32.to_be_bytes());
    let fresh = one.get().await.unwrap();
    assert_eq!(
        one.try_set(fresh, 43).await.unwrap(),
        Some(Versioned {
            value: 43,
            version: 2
        })
    );
    assert_eq!(data(&fx.observer, &path).await, 43i32.to_be_bytes());

    // A deleted node is no current version: nothing written; `set` makes it again.
    remove(&fx.observer, &path).await;
    assert_eq!(one.try_set(fresh, 1).await.unwrap(), None);
    assert!(fx.observer.check_stat(&path).await.unwrap().is_none());
    assert_eq!(
        two.set(9).await.unwrap(),
        Versioned {
            value: 9,
            version: 0
        }
    );
    remove(&fx.observer, &path).await;
    for parent in ["a/b", "a"] {
        let parent = format!("{}/{parent}", fx.root);
        fx.observer.delete(&parent, None).await.unwrap();
    }
    fx.nothing_left().await;
}

/// Data that is not 4 bytes is `Error::NotACounter` for every read and write but `set`,
/// nothing written; a sum that does not fit an i32 is refused; a watch says so and catches
/// up once the node holds a counter again.
#[tokio::test(flavor = "multi_thread")]
async fn data_that_is_no_counter_is_refused_and_nothing_written() {
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "counter-bad", 1, SESSION_TIMEOUT).await;
    let path = format!("{}/counter", fx.root);
    fx.observer
        .mkdir(
            &fx.root,
            &CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let acl = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    fx.observer.create(&path, b"hello", &acl).await.unwrap();
    let counter = SharedCounter::new(&fx.sessions[0], &path, 0).unwrap();
    let not_a_counter = |result: Result<Versioned, Error>| match result {
        Err(Error::NotACounter { path: at, len: 5 }) if at == path => {}
        other => panic!("read as {other:?}"),
    };
    not_a_counter(counter.get().await);
    not_a_counter(counter.add(1).await);
    assert_eq!(data(&fx.observer, &path).await, b"hello");
    let mut values = counter.watch().await.unwrap();
    assert_eq!(values.borrow().state, CounterState::NotACounter { len: 5 });
    assert_eq!(values.borrow().current(), None);

    fx.observer
        .set_data(&path, &i32::MAX.to_be_bytes(), None)
        .await
        .unwrap();
    await_value(&mut values, CounterState::Current, Some(i32::MAX)).await;
    match counter.add(1).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("does not fit"), "{why}"),
        other => panic!("an overflow gave {other:?}"),
    }
    assert_eq!(data(&fx.observer, &path).await, i32::MAX.to_be_bytes());
    assert_eq!(counter.set(3).await.unwrap().value, 3);
    await_value(&mut values, CounterState::Current, Some(3)).await;

    remove(&fx.observer, &path).await;
    await_value(&mut values, CounterState::Missing, None).await;
    drop(values);
    fx.observer.delete(&fx.root, None).await.unwrap();
    fx.nothing_left().await;
}

/// The watched value says it may be stale as soon as the connection is cut, and matches
/// the servers again once it is back, with what changed meanwhile; after the session
/// expired, it is read again on the new session.
#[tokio::test(flavor = "multi_thread")]
async fn the_watched_value_says_when_it_may_be_stale_and_catches_up() {
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "counter-stale", 1, SESSION_TIMEOUT).await;
    let path = format!("{}/counter", fx.root);
    let proxy = ensemble.proxy(0).await;
    let cut_off = session(&proxy.address(), SESSION_TIMEOUT).await;
    let watched = SharedCounter::new(&cut_off, &path, 1).unwrap();
    let writer = SharedCounter::new(&fx.sessions[0], &path, 1).unwrap();
    let mut values = watched.watch().await.unwrap();
    assert_eq!(values.borrow().current(), Some(1));

    proxy.cut();
    let stale = await_value(&mut values, CounterState::MayBeStale, Some(1)).await;
    assert_eq!(stale.current(), None);
    writer.add(5).await.unwrap();
    assert_eq!(values.borrow().last.map(|last| last.value), Some(1));
    proxy.restore();
    await_value(&mut values, CounterState::Current, Some(6)).await;

    // Expired: read again on the new session, with what changed meanwhile.
    let expired = live_client(&cut_off);
    proxy.cut();
    await_value(&mut values, CounterState::MayBeStale, Some(6)).await;
    writer.add(1).await.unwrap();
    expire_session(&ensemble.connect_string(), expired.session()).await;
    drop(expired);
    proxy.restore();
    await_value(&mut values, CounterState::Current, Some(7)).await;
    writer.add(1).await.unwrap();
    await_value(&mut values, CounterState::Current, Some(8)).await;

    cut_off.close();
    await_value(&mut values, CounterState::Closed, Some(8)).await;
    remove(&fx.observer, &path).await;
    fx.nothing_left().await;
}

/// A node replaced (deleted and made again) starts again at version 0: a value read from
/// the old node at version 0 must not be written over the new one as if unchanged, least
/// of all over data that is no counter ("reads and writes fail with `NotACounter`, nothing
/// written").
#[tokio::test(flavor = "multi_thread")]
#[ignore = "defect: a version-only compare and set cannot tell a node deleted and made again (version 0 again)"]
async fn try_set_over_a_replaced_node_of_the_same_version_writes_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "counter-aba", 1, SESSION_TIMEOUT).await;
    let path = format!("{}/counter", fx.root);
    let counter = SharedCounter::new(&fx.sessions[0], &path, 5).unwrap();
    let read = counter.get().await.unwrap();
    assert_eq!(read.version, 0);
    remove(&fx.observer, &path).await;
    let acl = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    fx.observer.create(&path, b"abc", &acl).await.unwrap();
    match counter.try_set(read, 6).await {
        Err(Error::NotACounter { len: 3, .. }) | Ok(None) => {}
        other => panic!("a try_set over another node gave {other:?}"),
    }
    assert_eq!(data(&fx.observer, &path).await, b"abc", "written over");
    remove(&fx.observer, &path).await;
    fx.observer.delete(&fx.root, None).await.unwrap();
    fx.nothing_left().await;
}
