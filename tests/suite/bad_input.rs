//! Bad input: a clear `Error` variant, returned promptly, with no panic, nothing created and
//! the session untouched.
//!
//! * Malformed or oversized paths and ids, for every recipe.
//! * A semaphore maximum other than the one its holders recorded.
//! * Malformed connect strings and out-of-range timeouts, refused before a connection is
//!   made; paths the server would refuse, refused before anything is created.

use std::time::{Duration, Instant};

use zk_harness::semaphore::{await_nothing_left, leases, locks};
use zk_harness::{
    await_empty, bounded, children, live_client, name, observer, session, unique_root, Ensemble,
    PATIENCE,
};
use zk_recipes::{Error, LeaderElection, Mutex, RwLock, Semaphore, Session};
use zookeeper_client::{Acls, CreateMode};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Session timeout of the sessions of the tests that need a shorter one.
const SHORT_SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// Session timeout of the sessions of the tests that need a longer one.
const LONG_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Promptness required where the bug takes seconds or forever: generous on a loaded machine.
const PROMPT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread")]
async fn mutex_bad_input_is_refused_and_leaves_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let admin = live_client(&s);
    for path in [
        "",
        "locks",
        "/locks/",
        "/a//b",
        "/a/../b",
        "/a\0b",
        "/zookeeper/x",
    ] {
        match Mutex::new(&s, path) {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }

    // A lock root under an ephemeral node.
    let parent = unique_root("ephemeral");
    admin
        .create(
            &parent,
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let under = format!("{parent}/lock");
    match Mutex::new(&s, &under).unwrap().try_lock().await {
        Err(Error::EphemeralParent { path }) => assert_eq!(path, under),
        other => panic!("lock under an ephemeral: {other:?}"),
    }
    await_empty(&admin, &parent).await;

    // A root whose ACL denies create.
    let denied = unique_root("denied");
    admin
        .create(
            &denied,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_read()),
        )
        .await
        .unwrap();
    match Mutex::new(&s, &denied).unwrap().lock().await {
        Err(Error::NoAuth { path }) => assert_eq!(path, denied),
        other => panic!("lock on a read-only root: {other:?}"),
    }
    await_empty(&admin, &denied).await;
    admin.delete(&denied, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn rwlock_bad_input_is_refused_and_sends_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    for path in ["", "rw", "/rw/", "/a//b", "/a/./b", "/zookeeper/rw"] {
        match RwLock::new(&s, path) {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn semaphore_bad_input_is_refused_and_sends_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    match Semaphore::new(&s, &unique_root("sem-zero"), 0) {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("a maximum of 0: {other:?}"),
    }
    for path in ["", "sem", "/sem/", "/a//b", "/zookeeper/sem"] {
        match Semaphore::new(&s, path, 3) {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }
}

/// Participants that disagree about the maximum: the one that comes second fails with
/// `MaxLeasesConflict` and leaves nothing; once every lease is returned, the other maximum
/// may take over.
#[tokio::test(flavor = "multi_thread")]
async fn a_different_maximum_is_refused_while_leases_are_held() {
    let ensemble = Ensemble::shared(1).await;
    let path = unique_root("sem-conflict");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let outside = live_client(&s);
    let three = Semaphore::new(&s, &path, 3).unwrap();
    let five = Semaphore::new(&s, &path, 5).unwrap();
    let lease = three.acquire().await.unwrap();
    let (data, _) = outside.get_data(&leases(&path)).await.unwrap();
    assert_eq!(data, b"zk-recipes max leases 3");
    for attempt in [
        five.acquire().await.map(Some),
        five.try_acquire().await,
        five.try_acquire_for(PATIENCE).await,
    ] {
        match attempt {
            Err(Error::MaxLeasesConflict {
                ours: 5,
                recorded: 3,
                path: p,
            }) => assert_eq!(p, path),
            other => panic!("a second maximum: {other:?}"),
        }
        assert_eq!(
            children(&outside, &leases(&path)).await,
            [name(lease.node())]
        );
        assert!(children(&outside, &locks(&path)).await.is_empty());
    }
    lease.release().await.unwrap();
    // A stale record with no lease held: the newcomer records its own.
    let lease = five.acquire().await.unwrap();
    let (data, _) = outside.get_data(&leases(&path)).await.unwrap();
    assert_eq!(data, b"zk-recipes max leases 5");
    assert!(matches!(
        three.try_acquire().await,
        Err(Error::MaxLeasesConflict {
            ours: 3,
            recorded: 5,
            ..
        })
    ));
    lease.release().await.unwrap();
    await_nothing_left(&outside, &path).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn election_bad_input_is_refused_before_anything_is_created() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SHORT_SESSION_TIMEOUT).await;
    let root = unique_root("bad");
    match LeaderElection::new(&s, &root, "") {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("empty id: {other:?}"),
    }
    for path in ["", "relative", "/trailing/", "/a//b", "/a/./b"] {
        match LeaderElection::new(&s, path, "id") {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }
    assert_eq!(
        live_client(&s).check_stat(&root).await.unwrap(),
        None,
        "nothing may be created"
    );
}

/// The first characters of a debug print that may hold megabytes.
fn short(debug: impl std::fmt::Debug) -> String {
    let text = format!("{debug:?}");
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
        None => text,
    }
}

/// A 2 MB participant id and a 1.1 MB path are refused at once with
/// `InvalidArgument` / `InvalidPath`; nothing is sent, and the session is untouched: a
/// guard held on it is not lost and it publishes no event (no `Suspended`).
#[tokio::test(flavor = "multi_thread")]
async fn oversized_input_is_refused_at_once_and_leaves_the_session_alone() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let held_root = unique_root("oversized-held");
    let root = unique_root("oversized");
    let s = session(&hosts, LONG_SESSION_TIMEOUT).await;
    let observer = observer(&hosts).await;
    let guard = Mutex::new(&s, &held_root).unwrap().lock().await.unwrap();
    let events = s.events();

    let refused = bounded("refusing a 2 MB participant id", PROMPT, async {
        match LeaderElection::new(&s, &root, "x".repeat(2_000_000)) {
            Err(err) => err,
            Ok(election) => match election.join().await {
                Err(err) => err,
                Ok(candidate) => panic!("a 2 MB id joined, as {:?}", candidate.role()),
            },
        }
    })
    .await;
    assert!(
        matches!(refused, Error::InvalidArgument(_)),
        "2 MB id: {}",
        short(&refused)
    );
    let long_path = format!("/{}", "a".repeat(1_100_000));
    match Mutex::new(&s, &long_path) {
        Err(Error::InvalidPath { .. }) => {}
        other => panic!("1.1 MB path: {}", short(other.map(|m| m.path().len()))),
    }
    assert!(
        !events.has_changed().unwrap(),
        "the session published {:?}",
        *events.borrow()
    );
    assert!(!guard.is_lost(), "the guard on the same session was lost");
    assert_eq!(
        observer.check_stat(&root).await.unwrap(),
        None,
        "nothing may be created for refused input"
    );
    guard.release().await.unwrap();
    await_empty(&observer, &held_root).await;
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_connect_strings_are_refused() {
    for hosts in [
        "",
        "  ",
        "127.0.0.1:2181,",
        "127.0.0.1:notaport",
        "127.0.0.1:0",
        "[::1",
        "127.0.0.1:1/app,127.0.0.1:2",
    ] {
        // Refused before anything is sent: no wait for a connection timeout.
        let refused = tokio::time::timeout(Duration::from_secs(1), Session::connect(hosts));
        match refused.await.expect("refused at once") {
            Err(Error::InvalidConnectString { .. }) => {}
            other => panic!("{hosts:?}: {other:?}"),
        }
    }
    match Session::builder()
        .chroot("relative")
        .connect("127.0.0.1:2181")
        .await
    {
        Err(Error::InvalidPath { .. }) => {}
        other => panic!("bad chroot: {other:?}"),
    }
}

/// A listener no client should reach: `connect` must refuse before sending anything.
fn untouched_listener() -> std::net::TcpListener {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

fn assert_untouched(listener: &std::net::TcpListener, what: &str) {
    match listener.accept() {
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("{what}: something was sent: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_range_timeouts_are_refused_before_anything_is_sent() {
    let listener = untouched_listener();
    let hosts = listener.local_addr().unwrap().to_string();
    let huge = Duration::from_secs(3_000_000_000_000_000 * 3600);
    let past_i32 = Duration::from_millis(i32::MAX as u64 + 1);
    let cases = [
        (
            "session timeout 0",
            Session::builder().session_timeout(Duration::ZERO),
        ),
        (
            "session timeout 2^31 ms",
            Session::builder().session_timeout(past_i32),
        ),
        (
            "session timeout huge",
            Session::builder().session_timeout(huge),
        ),
        (
            "connection timeout 0",
            Session::builder().connection_timeout(Duration::ZERO),
        ),
        (
            "connection timeout huge",
            Session::builder().connection_timeout(huge),
        ),
        (
            "connection timeout max",
            Session::builder().connection_timeout(Duration::MAX),
        ),
    ];
    for (what, builder) in cases {
        let started = Instant::now();
        match bounded(what, PATIENCE, builder.connect(&hosts)).await {
            Err(Error::InvalidArgument(reason)) => assert!(reason.contains("timeout"), "{reason}"),
            other => panic!("{what}: {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{what}: not at once"
        );
        assert_untouched(&listener, what);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn paths_the_server_refuses_are_refused_before_anything_is_created() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), Duration::from_secs(4)).await;
    let observer = zk_harness::observer(&ensemble.connect_string()).await;
    let root = unique_root("refused-path");
    for leaf in ["🔒", "a\u{10000}b", "x\u{f8ff}", "\u{9f}", "\u{fffe}"] {
        let path = format!("{root}/ünï/cødé/{leaf}");
        match Mutex::new(&s, &path) {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            Ok(mutex) => {
                let result = bounded("lock", PATIENCE, mutex.lock()).await;
                panic!("{path:?} was accepted: lock gave {result:?}");
            }
            Err(other) => panic!("{path:?}: {other:?}"),
        }
    }
    assert!(
        matches!(observer.check_stat(&root).await, Ok(None)),
        "{root} was created"
    );
    // The characters just inside the server's ranges are accepted, by it too.
    let edge = "\u{a0}\u{d7ff}\u{f900}\u{ffef}";
    let path = format!("{root}/{edge}");
    let guard = bounded("lock", PATIENCE, Mutex::new(&s, &path).unwrap().lock())
        .await
        .expect("a path the server accepts");
    guard.release().await.unwrap();
    await_empty(&observer, &path).await;
    observer.delete(&path, None).await.unwrap();
    observer.delete(&root, None).await.unwrap();
}
