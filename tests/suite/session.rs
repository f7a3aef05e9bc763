//! `Session`: it connects to a standalone server and an ensemble, rides out a killed
//! server, suspends while cut off and reconnects, replaces an expired session by a new one,
//! fails within its connection timeout when no server is reachable, confines the recipes to
//! its chroot, refuses work once closed, accepts the largest timeouts, refuses SASL asked of
//! a server without it, and sets `TCP_NODELAY` on its connections.
//!
//! Input a session refuses before connecting is in `bad_input.rs`; how a session ends for
//! good, in `session_end.rs`.

use std::time::{Duration, Instant};

use zk_harness::{
    await_empty, await_events, bounded, expire_session, live_client, observer, record_events,
    session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, Mutex, Session, SessionEvent};
use zookeeper_client::{Acls, CreateMode};

#[tokio::test(flavor = "multi_thread")]
async fn connects_to_standalone_and_to_an_ensemble() {
    for n in [1, 3] {
        let ensemble = Ensemble::shared(n).await;
        let s = session(&ensemble.connect_string(), Duration::from_secs(4)).await;
        assert_eq!(*s.events().borrow(), SessionEvent::Connected);
        let client = live_client(&s);
        client.list_children("/").await.expect("a request works");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn killing_the_leader_server_keeps_the_session() {
    let ensemble = Ensemble::start(3).await;
    let s = session(&ensemble.connect_string(), Duration::from_secs(4)).await;
    let mut seen = record_events(&s);
    let id = live_client(&s).session_id();
    let leader = ensemble.wait_for_leader(PATIENCE).await;
    ensemble.kill(leader);
    let new_leader = ensemble.wait_for_leader(PATIENCE).await;
    assert_ne!(new_leader, leader);
    // The session survives: whether or not its own server died, a request works on the
    // same session once a quorum is back.
    let client = live_client(&s);
    bounded("sync", PATIENCE, client.sync("/"))
        .await
        .expect("sync");
    assert_eq!(client.session_id(), id, "the session was replaced");
    let events = seen.borrow_and_update().clone();
    assert!(!events.contains(&SessionEvent::Expired), "{events:?}");
    if events.contains(&SessionEvent::Suspended) {
        await_events(
            &mut seen,
            &[SessionEvent::Suspended, SessionEvent::Reconnected],
            PATIENCE,
        )
        .await;
    }
    ensemble.restart(leader).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cut_connection_suspends_and_restoring_reconnects() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let s = session(&proxy.address(), Duration::from_secs(10)).await;
    let mut seen = record_events(&s);
    let id = live_client(&s).session_id();
    proxy.cut();
    await_events(&mut seen, &[SessionEvent::Suspended], PATIENCE).await;
    proxy.restore();
    await_events(
        &mut seen,
        &[SessionEvent::Suspended, SessionEvent::Reconnected],
        PATIENCE,
    )
    .await;
    assert_eq!(live_client(&s).session_id(), id);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_session_is_replaced_by_a_new_one() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let s = session(&hosts, Duration::from_secs(4)).await;
    let mut seen = record_events(&s);
    let old = live_client(&s);
    expire_session(&hosts, old.session()).await;
    await_events(
        &mut seen,
        &[SessionEvent::Expired, SessionEvent::Connected],
        PATIENCE,
    )
    .await;
    let new = live_client(&s);
    assert_ne!(new.session_id(), old.session_id());
    new.list_children("/").await.expect("the new session works");
    // Recipes use the new session.
    let root = unique_root("renewed");
    let guard = Mutex::new(&s, &root).unwrap().lock().await.unwrap();
    let (_, stat) = new.get_data(guard.node()).await.unwrap();
    assert_eq!(stat.ephemeral_owner, new.session_id().0);
    guard.release().await.unwrap();
    await_empty(&new, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_hosts_fail_within_the_connection_timeout() {
    let limit = Duration::from_millis(1500);
    let started = Instant::now();
    let result = Session::builder()
        .connection_timeout(limit)
        .connect("127.0.0.1:1,127.0.0.1:2")
        .await;
    let elapsed = started.elapsed();
    match result {
        Err(Error::Unreachable { hosts, .. }) => assert_eq!(hosts, "127.0.0.1:1,127.0.0.1:2"),
        other => panic!("connecting to nothing: {other:?}"),
    }
    assert!(elapsed >= limit, "gave up early: {elapsed:?}");
    assert!(elapsed < limit + Duration::from_secs(2), "took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chroot_confines_the_recipes() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let chroot = unique_root("chroot");
    let admin = live_client(&session(&hosts, Duration::from_secs(4)).await);
    admin
        .create(
            &chroot,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let confined = Session::builder()
        .chroot(chroot.clone())
        .connect(&hosts)
        .await
        .unwrap();
    let guard = Mutex::new(&confined, "/locks/x")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let inside = admin
        .list_children(&format!("{chroot}/locks/x"))
        .await
        .unwrap();
    assert_eq!(inside.len(), 1);
    guard.release().await.unwrap();
    await_empty(&admin, &format!("{chroot}/locks/x")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_session_refuses_work() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), Duration::from_secs(4)).await;
    let mutex = Mutex::new(&s, &unique_root("closed")).unwrap();
    s.close();
    assert_eq!(*s.events().borrow(), SessionEvent::Closed);
    assert!(s.client().is_none());
    match mutex.lock().await {
        Err(Error::Closed) => {}
        other => panic!("lock on a closed session: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_largest_timeouts_accepted_connect() {
    let ensemble = Ensemble::shared(1).await;
    let max = Duration::from_millis(i32::MAX as u64);
    let s = bounded(
        "connect",
        PATIENCE,
        Session::builder()
            .session_timeout(max)
            .connection_timeout(max)
            .connect(&ensemble.connect_string()),
    )
    .await
    .expect("the largest timeouts are accepted");
    // The servers clamp the session timeout to their maximum; it did not wrap to their
    // minimum.
    let negotiated = live_client(&s).session_timeout();
    assert!(negotiated >= Duration::from_secs(10), "{negotiated:?}");
    s.close();
}

#[cfg(feature = "sasl")]
#[tokio::test(flavor = "multi_thread")]
async fn sasl_asked_of_a_server_without_sasl_is_refused() {
    let hosts = Ensemble::shared(1).await.connect_string();
    let started = Instant::now();
    let connecting = Session::builder()
        .sasl_digest_md5("orders-svc", "any password at all")
        .connect(&hosts);
    match bounded("connect", PATIENCE, connecting).await {
        Err(Error::AuthFailed { reason, .. }) => {
            assert!(!reason.contains("any password"), "{reason}")
        }
        other => panic!("SASL asked of a server without SASL: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5), "not promptly");
}

/// Whether each of this process's TCP connections to `server` has `TCP_NODELAY`.
#[cfg(target_os = "linux")]
fn nodelay_to(server: std::net::SocketAddr) -> Vec<bool> {
    use std::os::fd::FromRawFd;
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().flatten();
    fds.filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter_map(|fd: i32| {
            // SAFETY: borrowed for a look, never closed (ManuallyDrop); a descriptor that
            // is not a socket only makes the calls fail.
            let stream =
                std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
            (stream.peer_addr().ok()? == server).then(|| stream.nodelay().ok())?
        })
        .collect()
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn the_sessions_connections_get_tcp_nodelay() {
    // Its own server: no other client of this process connects to it.
    let ensemble = Ensemble::start(1).await;
    let server = ensemble.address(0).parse().unwrap();
    let s = session(&ensemble.address(0), Duration::from_secs(10)).await;
    assert_eq!(nodelay_to(server), [true], "after connecting");
    // A new connection, after a server restart, gets it too.
    let mut seen = record_events(&s);
    ensemble.restart(0).await;
    await_events(&mut seen, &[SessionEvent::Reconnected], PATIENCE).await;
    // Nothing announces when it is set (off the runtime's workers): look until it is.
    bounded("TCP_NODELAY on the new connection", PATIENCE, async {
        while nodelay_to(server) != [true] {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    s.close();
}

/// With `tcp_nodelay(false)` the session leaves its connection as zookeeper-client made it:
/// Nagle's algorithm on (connect returns only after it would have set it).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn tcp_nodelay_false_leaves_the_connection_without_it() {
    // Its own server: no other client of this process connects to it.
    let ensemble = Ensemble::start(1).await;
    let server = ensemble.address(0).parse().unwrap();
    let s = Session::builder()
        .session_timeout(Duration::from_secs(10))
        .tcp_nodelay(false)
        .connect(&ensemble.address(0))
        .await
        .unwrap();
    assert_eq!(nodelay_to(server), [false]);
    let guard = Mutex::new(&s, "/nagle").unwrap().lock().await.unwrap();
    guard.release().await.unwrap();
    let admin = observer(&ensemble.address(0)).await;
    await_empty(&admin, "/nagle").await;
    s.close();
}
