//! Tests of the test harness itself, against real ZooKeeper servers.

use std::time::Duration;

use zk_harness::{expire_session, plain_client, unique_root, Ensemble};
use zookeeper_client::{Acls, CreateMode, SessionState, StateWatcher};

/// Waits until the watcher reports `want`; panics after `timeout`.
async fn wait_state(watcher: &mut StateWatcher, want: SessionState, timeout: Duration) {
    let result = tokio::time::timeout(timeout, async {
        loop {
            if watcher.state() == want {
                return;
            }
            watcher.changed().await;
        }
    })
    .await;
    if result.is_err() {
        panic!(
            "session state is {:?}, wanted {want:?} within {timeout:?}",
            watcher.peek_state()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn standalone_answers_srvr() {
    let zk = Ensemble::shared(1).await;
    assert_eq!(zk.len(), 1);
    let srvr = zk.four_letter(0, "srvr").await;
    assert!(srvr.contains("Mode: standalone"), "srvr said: {srvr}");
    assert_eq!(zk.four_letter(0, "ruok").await, "imok");
    assert_eq!(zk.leader().await, Some(0));
    assert_eq!(zk.connect_string(), zk.address(0));

    // A client can use it, and the session timeout can be short.
    let client = plain_client(&zk.connect_string(), Duration::from_millis(1500)).await;
    assert!(client.session_timeout() <= Duration::from_millis(1500));
    let root = unique_root("standalone");
    assert!(root.starts_with("/t-standalone-"));
    assert_ne!(root, unique_root("standalone"));
    client
        .create(
            &root,
            b"x",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    assert_eq!(client.get_data(&root).await.unwrap().0, b"x");
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_is_shared() {
    let a = Ensemble::shared(1).await;
    let b = Ensemble::shared(1).await;
    assert!(std::ptr::eq(a, b));
}

#[tokio::test(flavor = "multi_thread")]
async fn ensemble_elects_reelects_and_restarts() {
    let zk = Ensemble::start(3).await;
    assert_eq!(zk.len(), 3);
    assert_eq!(zk.connect_string().split(',').count(), 3);
    let leader = zk.leader().await.expect("a leader after start");
    let followers = (0..3)
        .filter(|&i| i != leader)
        .map(|i| (i, zk.four_letter(i, "srvr")))
        .collect::<Vec<_>>();
    for (i, srvr) in followers {
        let srvr = srvr.await;
        assert!(srvr.contains("Mode: follower"), "server {i}: {srvr}");
    }

    // Data written through one server is visible through another.
    let root = unique_root("ensemble");
    let other = (leader + 1) % 3;
    let writer = plain_client(&zk.address(leader), Duration::from_secs(4)).await;
    writer
        .create(
            &root,
            b"v",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let reader = plain_client(&zk.address(other), Duration::from_secs(4)).await;
    reader.sync(&root).await.unwrap();
    assert_eq!(reader.get_data(&root).await.unwrap().0, b"v");
    drop(writer);

    // Kill the leader: the other two elect a new one.
    zk.kill(leader);
    assert_eq!(zk.four_letter(leader, "srvr").await, "");
    let new_leader = zk.wait_for_leader(Duration::from_secs(20)).await;
    assert_ne!(new_leader, leader);

    // The old leader comes back as a follower, with its data.
    zk.restart(leader).await;
    let srvr = zk.four_letter(leader, "srvr").await;
    assert!(srvr.contains("Mode: follower"), "restarted: {srvr}");
    assert_eq!(zk.leader().await, Some(new_leader));
    let back = plain_client(&zk.address(leader), Duration::from_secs(4)).await;
    assert_eq!(back.get_data(&root).await.unwrap().0, b"v");

    // Stop (SIGTERM) a follower and start it again.
    let follower = (0..3).find(|&i| i != new_leader).unwrap();
    drop(back);
    zk.stop(follower);
    assert_eq!(zk.four_letter(follower, "srvr").await, "");
    zk.restart(follower).await;
    assert!(zk
        .four_letter(follower, "srvr")
        .await
        .contains("Mode: follower"));
}

#[tokio::test(flavor = "multi_thread")]
async fn pause_and_resume() {
    let zk = Ensemble::start(1).await;
    let client = plain_client(&zk.connect_string(), Duration::from_millis(3000)).await;
    let mut state = client.state_watcher();

    zk.pause(0);
    assert_eq!(
        zk.four_letter(0, "ruok").await,
        "",
        "a paused server answers"
    );
    assert_eq!(zk.leader().await, None);
    wait_state(
        &mut state,
        SessionState::Disconnected,
        Duration::from_secs(5),
    )
    .await;

    zk.resume(0);
    assert_eq!(zk.four_letter(0, "ruok").await, "imok");
    // Back before the session timed out on the server: the same session goes on.
    wait_state(
        &mut state,
        SessionState::SyncConnected,
        Duration::from_secs(10),
    )
    .await;
    client.sync("/").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn proxy_cut_disconnects_and_restore_reconnects() {
    let zk = Ensemble::shared(1).await;
    let proxy = zk.proxy(0).await;
    let client = plain_client(&proxy.address(), Duration::from_secs(4)).await;
    let mut state = client.state_watcher();
    client.sync("/").await.unwrap();

    proxy.cut();
    wait_state(
        &mut state,
        SessionState::Disconnected,
        Duration::from_secs(5),
    )
    .await;
    // It stays cut off: nothing gets through while the proxy is cut.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(state.peek_state(), SessionState::Disconnected);

    proxy.restore();
    wait_state(
        &mut state,
        SessionState::SyncConnected,
        Duration::from_secs(10),
    )
    .await;
    client.sync("/").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn expire_session_expires_it() {
    let zk = Ensemble::shared(1).await;
    let client = plain_client(&zk.connect_string(), Duration::from_secs(20)).await;
    let mut state = client.state_watcher();
    let root = unique_root("expire");
    client
        .create(
            &root,
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();

    expire_session(&zk.connect_string(), client.session()).await;
    wait_state(&mut state, SessionState::Expired, Duration::from_secs(10)).await;

    // Its ephemeral node went with it.
    let other = plain_client(&zk.connect_string(), Duration::from_secs(4)).await;
    assert_eq!(other.check_stat(&root).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn expire_session_in_ensemble() {
    let zk = Ensemble::shared(3).await;
    // Connected to one server; the twin may take the session over on another.
    let client = plain_client(&zk.address(2), Duration::from_secs(20)).await;
    let mut state = client.state_watcher();
    expire_session(&zk.connect_string(), client.session()).await;
    wait_state(&mut state, SessionState::Expired, Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_count_sees_a_data_watch() {
    // Its own server: other tests on a shared one would add watches of their own.
    let zk = Ensemble::start(1).await;
    let client = plain_client(&zk.connect_string(), Duration::from_secs(4)).await;
    let root = unique_root("watch");
    client
        .create(
            &root,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    assert_eq!(zk.watch_count().await, 0);

    let (_, _, watcher) = client.get_and_watch_data(&root).await.unwrap();
    assert_eq!(zk.watch_count().await, 1);
    let wchc = zk.four_letter(0, "wchc").await;
    assert!(wchc.contains(&root), "wchc: {wchc}");

    // The watch fires once and is gone.
    client.set_data(&root, b"changed", None).await.unwrap();
    watcher.changed().await;
    assert_eq!(zk.watch_count().await, 0);
}
