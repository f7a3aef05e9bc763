//! How a `Session` ends for good without `close()`: a new session after expiry that the
//! servers refuse for good, and the tokio runtime that ran the session shutting down.

use std::time::Duration;

use zk_harness::{
    await_events, bounded, live_client, record_events, Ensemble, Forwarder, PATIENCE,
};
use zk_recipes::{CloseReason, Error, Mutex, Session, SessionEvent};

#[cfg(feature = "sasl")]
const USER: &str = "orders-svc";
#[cfg(feature = "sasl")]
const PASSWORD: &str = "correct horse battery staple";
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

fn port(ensemble: &Ensemble) -> u16 {
    let address = ensemble.address(0);
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

#[cfg(feature = "sasl")]
/// A server with SASL DIGEST-MD5 user `USER` whose password is `password`.
async fn sasl_server(password: &str) -> Ensemble {
    Ensemble::start_with(
        1,
        &zk_harness::ServerConfig::default().sasl_users(&[(USER, password)]),
    )
    .await
}

#[cfg(feature = "sasl")]
#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_refused_for_good_ends_the_session() {
    let (first, second) = tokio::join!(sasl_server(PASSWORD), sasl_server("another password"));
    let forwarder = Forwarder::start(port(&first)).await;
    let s = bounded(
        "connect",
        PATIENCE,
        Session::builder()
            .session_timeout(SESSION_TIMEOUT)
            .sasl_digest_md5(USER, PASSWORD)
            .connect(&forwarder.address()),
    )
    .await
    .expect("the first server takes the credentials");
    let mut seen = record_events(&s);
    assert!(s.close_reason().is_none());
    // The client reconnects to a server that knows neither its session (expired) nor its
    // password (every new session is refused).
    forwarder.retarget(port(&second));
    await_events(
        &mut seen,
        &[SessionEvent::Expired, SessionEvent::Closed],
        PATIENCE,
    )
    .await;
    match s.close_reason() {
        Some(CloseReason::Refused(Error::AuthFailed { .. })) => {}
        other => panic!("close reason: {other:?}"),
    }
    assert!(s.client().is_none());
    let mutex = Mutex::new(&s, "/refused").unwrap();
    match bounded("lock", PATIENCE, mutex.lock()).await {
        Err(Error::Closed) => {}
        other => panic!("lock on a session whose renewal was refused: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_that_cannot_reach_a_server_keeps_trying() {
    let server = Ensemble::start(1).await;
    let forwarder = Forwarder::start(port(&server)).await;
    let s = bounded(
        "connect",
        PATIENCE,
        Session::builder()
            .session_timeout(SESSION_TIMEOUT)
            .connection_timeout(Duration::from_millis(500))
            .connect(&forwarder.address()),
    )
    .await
    .expect("connect");
    let mut seen = record_events(&s);
    // A port nothing listens on: the session is expired by the time the server is back.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = free.local_addr().unwrap().port();
    drop(free);
    forwarder.retarget(nowhere);
    zk_harness::expire_session(&server.connect_string(), live_client(&s).session()).await;
    await_events(&mut seen, &[SessionEvent::Expired], PATIENCE).await;
    // Dials fail as unreachable (each is one connection of the client, one of the look at
    // the host); the session keeps trying.
    let mut accepted = forwarder.accepted();
    let before = *accepted.borrow_and_update();
    zk_harness::await_watch("three more dials", &mut accepted, |&n| n >= before + 6).await;
    assert!(s.close_reason().is_none(), "{:?}", s.close_reason());
    forwarder.retarget(port(&server));
    await_events(
        &mut seen,
        &[SessionEvent::Expired, SessionEvent::Connected],
        PATIENCE,
    )
    .await;
    live_client(&s)
        .list_children("/")
        .await
        .expect("the new session works");
    assert!(!seen.borrow().contains(&SessionEvent::Closed));
    s.close();
}

#[test]
fn a_session_outliving_its_runtime_says_it_is_closed() {
    let second = tokio::runtime::Runtime::new().unwrap();
    // The ensemble lives on the second runtime, which outlives the test's sessions.
    let ensemble = second.block_on(Ensemble::start(1));
    let hosts = ensemble.connect_string();
    // On a current-thread runtime the session's own task has not run yet when the runtime
    // goes; on a multi-thread one it has.
    let runtimes = [
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    ];
    for first in runtimes {
        let first = first.unwrap();
        let s = first.block_on(bounded(
            "connect",
            PATIENCE,
            zk_harness::session(&hosts, SESSION_TIMEOUT),
        ));
        assert_eq!(*s.events().borrow(), SessionEvent::Connected);
        drop(first);
        second.block_on(async {
            assert_eq!(*s.events().borrow(), SessionEvent::Closed);
            match s.close_reason() {
                Some(CloseReason::RuntimeGone) => {}
                other => panic!("close reason: {other:?}"),
            }
            let mutex = Mutex::new(&s, "/runtime-gone").unwrap();
            match bounded("lock", PATIENCE, mutex.lock()).await {
                Err(Error::Closed) => {}
                other => panic!("lock on a session whose runtime is gone: {other:?}"),
            }
            assert!(s.client().is_none());
        });
    }
    second.block_on(async { drop(ensemble) });
}

/// A lock held on a session whose runtime shut down is lost, seen from another runtime: the
/// task that watched it went with its runtime and published the loss as it went (and were it
/// not so, nothing confirms the session any more, so its trust would lapse before the
/// servers could have expired it and let another in).
#[test]
fn a_hold_on_a_session_whose_runtime_went_is_lost() {
    let second = tokio::runtime::Runtime::new().unwrap();
    let ensemble = second.block_on(Ensemble::start(1));
    let hosts = ensemble.connect_string();
    let first = tokio::runtime::Runtime::new().unwrap();
    let (s, guard) = first.block_on(async {
        let s = zk_harness::session(&hosts, SESSION_TIMEOUT).await;
        let guard = Mutex::new(&s, "/runtime-gone-hold").unwrap().lock().await;
        (s, guard.expect("lock"))
    });
    drop(first);
    second.block_on(async {
        // Closed (the session ended with its runtime), Suspended (its watcher went) or
        // Lapsed (no longer confirmed), depending on what went first.
        bounded("the hold is lost", PATIENCE, guard.lost()).await;
        assert!(guard.is_lost());
        drop(guard);
        let observer = zk_harness::observer(&hosts).await;
        zk_harness::await_empty(&observer, "/runtime-gone-hold").await;
        drop(s);
        drop(ensemble);
    });
}
