//! How a `Session` ends for good without `close()`: a new session after expiry that the
//! servers refuse for good, and the tokio runtime that ran the session shutting down; and
//! what does not end it: servers that cannot be reached, or that close connections as a
//! TLS port would, while it renews.

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

/// Expires a session whose connection goes to `away` meanwhile (through a forwarder), checks
/// that it keeps dialing there rather than ending, then lets it reach its server again and
/// checks that it renews.
async fn renews_after_dialing(away: u16, connection_timeout: Duration) {
    let server = Ensemble::start(1).await;
    let forwarder = Forwarder::start(port(&server)).await;
    let s = bounded(
        "connect",
        PATIENCE,
        Session::builder()
            .session_timeout(SESSION_TIMEOUT)
            .connection_timeout(connection_timeout)
            .connect(&forwarder.address()),
    )
    .await
    .expect("connect");
    let mut seen = record_events(&s);
    forwarder.retarget(away);
    zk_harness::expire_session(&server.connect_string(), live_client(&s).session()).await;
    await_events(&mut seen, &[SessionEvent::Expired], PATIENCE).await;
    // Each dial is one connection of the client and one of the look at the host; a
    // session that gave up ends instead.
    let mut accepted = forwarder.accepted();
    let before = *accepted.borrow_and_update();
    let mut events = s.events();
    tokio::select! {
        () = zk_harness::await_watch("three more dials", &mut accepted, |&n| n >= before + 6) => {}
        _ = events.wait_for(|event| *event == SessionEvent::Closed) => {}
    }
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

/// Dials that fail as unreachable (a port nothing listens on) go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_that_cannot_reach_a_server_keeps_trying() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = free.local_addr().unwrap().port();
    drop(free);
    renews_after_dialing(nowhere, Duration::from_millis(500)).await;
}

/// A port that behaves like a ZooKeeper server starting up (or going down) on a loaded
/// machine: it accepts connections, says nothing, and closes each one once it has five
/// bytes, as a TLS-only port does with plaintext.
async fn closing_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut got = 0;
                let mut buf = [0_u8; 64];
                while got < 5 {
                    match tokio::io::AsyncReadExt::read(&mut connection, &mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got += n,
                    }
                }
            });
        }
    });
    port
}

/// A renewal whose server closes connections the way a TLS port would (a server starting
/// up does too) is no proof that the settings that made the session are refused: the
/// session keeps trying, and renews once a server serves. (It ended with
/// `Refused(Error::Tls)` before, and the caches and holds of the session with it.)
#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_that_meets_a_server_closing_connections_keeps_trying() {
    // Long enough for the look at the host to wait for its answer and send the fifth byte.
    renews_after_dialing(closing_port().await, Duration::from_millis(1500)).await;
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

/// A first connect while its one server restarts (killed, then started again, its client
/// port opening while it starts up): connects begun every 100 ms throughout, each with a
/// connection timeout longer than the restart, all make a session once the server serves.
/// A server starting up is no proof that the TLS settings are refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_first_connect_during_a_server_restart_waits_for_it() {
    let server = Ensemble::start(1).await;
    let hosts = server.connect_string();
    for round in 0..3 {
        server.kill(0);
        let connects = async {
            let mut dials = Vec::new();
            for _ in 0..40 {
                let hosts = hosts.clone();
                dials.push(tokio::spawn(async move {
                    Session::builder()
                        .session_timeout(SESSION_TIMEOUT)
                        .connection_timeout(Duration::from_secs(40))
                        .connect(&hosts)
                        .await
                }));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            dials
        };
        let ((), dials) = tokio::join!(server.restart(0), connects);
        for dial in dials {
            match bounded("a connect ends", PATIENCE * 2, dial).await.unwrap() {
                Ok(s) => drop(s.close()),
                Err(err) => panic!("round {round}: a connect during a restart failed: {err:?}"),
            }
        }
    }
}
