//! Authenticated sessions, ACL-protected recipe nodes and TLS, against a real ZooKeeper
//! server with a TLS client port (`ssl.clientAuth=need`), SASL DIGEST-MD5 users (JAAS) and
//! its plaintext port, shared by the tests of this binary.
//!
//! Key material is made at test time (see `zk_harness::pki`); nothing secret is committed.

use std::time::{Duration, Instant};

use zk_harness::history::{critical_section, History};
use zk_harness::pki::Pki;
use zk_harness::{
    await_count, await_empty, await_events, bounded, children, digest_observer, expire_session,
    live_client, plain_client, record_events, unique_root, Ensemble, PATIENCE, WORK,
};
use zk_recipes::{
    Error, LeaderElection, Loss, Mutex, NodeAcl, Role, RwLock, Session, SessionBuilder,
    SessionEvent,
};
use zookeeper_client::{Acls, Client, CreateMode};

/// The identity every process of the test "service" shares.
const USER: &str = "orders-svc";
const PASSWORD: &str = "correct horse battery staple";
/// Someone else.
const OTHER_USER: &str = "billing-svc";
const OTHER_PASSWORD: &str = "another password";

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// The connection timeout of the connects expected to fail: each must fail well within it.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

fn pki() -> &'static Pki {
    Pki::shared()
}

/// A standalone server with a TLS client port that needs a client certificate, SASL
/// DIGEST-MD5 users `USER` and `OTHER_USER`, and its plaintext port.
async fn secured() -> &'static Ensemble {
    let config = pki()
        .tls_server()
        .sasl_users(&[(USER, PASSWORD), (OTHER_USER, OTHER_PASSWORD)]);
    Ensemble::shared_with(1, config).await
}

/// A session builder authenticated as `USER` by digest.
fn authed() -> SessionBuilder {
    Session::builder()
        .session_timeout(SESSION_TIMEOUT)
        .digest_auth(USER, PASSWORD)
}

/// A session builder for TLS with the test CA and the client certificate.
fn tls() -> SessionBuilder {
    let pki = pki();
    Session::builder()
        .session_timeout(SESSION_TIMEOUT)
        .tls_ca_pem(&pki.ca_pem)
        .tls_identity_pem(&pki.client_cert_pem, &pki.client_key_pem)
}

async fn connect(builder: SessionBuilder, hosts: &str) -> Session {
    bounded("connect", PATIENCE, builder.connect(hosts))
        .await
        .unwrap_or_else(|err| panic!("connect to {hosts}: {err}"))
}

fn is_no_auth<T: std::fmt::Debug>(result: Result<T, zookeeper_client::Error>) -> bool {
    matches!(result, Err(zookeeper_client::Error::NoAuth))
}

/// `Err(NoAuth)` on `root`, at once, with nothing created.
async fn refused_at_once(session: &Session, root: &str, admin: &Client, before: usize) {
    let started = Instant::now();
    match Mutex::new(session, root).unwrap().lock().await {
        Err(Error::NoAuth { path }) => assert_eq!(path, root),
        other => panic!("locking a root whose ACL refuses us: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        children(admin, root).await.len(),
        before,
        "a node was created"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn creator_only_nodes_refuse_everyone_else() {
    let hosts = secured().await.connect_string();
    let owner = connect(authed().node_acl(NodeAcl::CreatorOnly), &hosts).await;
    let root = unique_root("creator-only");
    let guard = Mutex::new(&owner, &root).unwrap().lock().await.unwrap();
    let admin = digest_observer(&hosts, USER, PASSWORD).await;
    let anonymous = plain_client(&hosts, SESSION_TIMEOUT).await;
    let other = digest_observer(&hosts, OTHER_USER, OTHER_PASSWORD).await;
    let intruder = format!("{root}/intruder");
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for (who, client) in [("anonymous", &anonymous), ("other user", &other)] {
        assert!(
            is_no_auth(client.delete(guard.node(), None).await),
            "{who} deleted"
        );
        assert!(
            is_no_auth(client.set_data(guard.node(), b"x", None).await),
            "{who} wrote"
        );
        assert!(
            is_no_auth(client.create(&intruder, b"", &open).await),
            "{who} created"
        );
        assert!(
            is_no_auth(client.list_children(&root).await),
            "{who} listed"
        );
    }
    // The recipes say so at once, and create nothing.
    let strangers = [
        Session::builder(),
        Session::builder().digest_auth(OTHER_USER, OTHER_PASSWORD),
    ];
    for builder in strangers {
        let stranger = connect(builder, &hosts).await;
        refused_at_once(&stranger, &root, &admin, 1).await;
    }
    guard.release().await.unwrap();
    await_empty(&admin, &root).await;
}

/// A contender of another identity queued behind a `CreatorOnly` node (under a root open to
/// all): servers that filter notifications by ACL would never tell it that the node went, so
/// it is refused at once, naming the node, instead of waiting forever; nothing of it is left
/// and its session still locks once the path is free.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_that_may_not_read_the_node_ahead_is_refused_at_once() {
    let hosts = secured().await.connect_string();
    let root = unique_root("unreadable-ahead");
    let admin = digest_observer(&hosts, USER, PASSWORD).await;
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    admin.create(&root, b"", &open).await.unwrap();
    let owner = connect(authed().node_acl(NodeAcl::CreatorOnly), &hosts).await;
    let guard = Mutex::new(&owner, &root).unwrap().lock().await.unwrap();
    let stranger = connect(
        Session::builder().digest_auth(OTHER_USER, OTHER_PASSWORD),
        &hosts,
    )
    .await;
    let mutex = Mutex::new(&stranger, &root).unwrap();

    let started = Instant::now();
    match bounded("the stranger's lock", PATIENCE, mutex.lock()).await {
        Err(Error::NoAuth { path }) => assert_eq!(path, guard.node()),
        other => panic!("waiting behind an unreadable node: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    // The stranger's node is deleted (in the background, as a give-up's is).
    await_count(&admin, &root, 1).await;
    guard.release().await.unwrap();
    let held = bounded("the stranger's lock", PATIENCE, mutex.lock()).await;
    held.unwrap().release().await.unwrap();
    await_empty(&admin, &root).await;
    admin.delete(&root, None).await.unwrap();
}

/// The node ahead made unreadable to a waiter after the waiter's data watch was set on it
/// (its owner narrows its ACL to `CreatorOnly`): a change of ACL fires no watch, and the
/// servers never tell the waiter that the node went, so it cannot learn it (documented at
/// `Mutex::lock`); it still waits no longer than its own deadline, and leaves nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_whose_blocker_turns_unreadable_while_watched_waits_only_until_its_deadline() {
    const DEADLINE: Duration = Duration::from_secs(3);
    let ensemble = secured().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("turns-unreadable");
    let (admin, stranger) = stranger_behind_creator_only(&hosts, &root).await;
    let owner = connect(authed(), &hosts).await;
    let guard = Mutex::new(&owner, &root).unwrap().lock().await.unwrap();
    let mutex = Mutex::new(&stranger, &root).unwrap();
    let started = Instant::now();
    let waiting = tokio::spawn(async move { mutex.try_lock_for(DEADLINE).await });
    ensemble
        .await_watcher(guard.node(), &zk_harness::session_id(&stranger))
        .await;
    let creator_only = Acls::creator_all();
    admin
        .set_acl(guard.node(), &creator_only, None)
        .await
        .unwrap();
    guard.release().await.unwrap();
    match bounded("the stranger's lock", PATIENCE, waiting)
        .await
        .unwrap()
    {
        Ok(Some(held)) => held.release().await.unwrap(),
        Ok(None) | Err(Error::NoAuth { .. }) => {}
        Err(other) => panic!("behind a blocker made unreadable: {other:?}"),
    }
    let waited = started.elapsed();
    assert!(
        waited < DEADLINE + Duration::from_secs(3),
        "took {waited:?}"
    );
    await_empty(&admin, &root).await;
    admin.delete(&root, None).await.unwrap();
}

/// A root open to all, made by an admin client of `USER`, and a session of `OTHER_USER`:
/// the admin client and the stranger's session.
async fn stranger_behind_creator_only(hosts: &str, root: &str) -> (Client, Session) {
    let admin = digest_observer(hosts, USER, PASSWORD).await;
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    admin.create(root, b"", &open).await.unwrap();
    let stranger = connect(
        Session::builder().digest_auth(OTHER_USER, OTHER_PASSWORD),
        hosts,
    )
    .await;
    (admin, stranger)
}

/// A reader of another identity behind a `CreatorOnly` writer, waiting within a deadline of
/// its own: refused at once with `NoAuth` naming the writer (not `None` at the deadline),
/// its node deleted, its session untouched (no event, and it reads once the writer went).
#[tokio::test(flavor = "multi_thread")]
async fn a_reader_behind_an_unreadable_writer_is_refused_within_its_deadline() {
    let hosts = secured().await.connect_string();
    let root = unique_root("unreadable-writer");
    let (admin, stranger) = stranger_behind_creator_only(&hosts, &root).await;
    let owner = connect(authed().node_acl(NodeAcl::CreatorOnly), &hosts).await;
    let writer = RwLock::new(&owner, &root).unwrap().write().await.unwrap();
    let events = record_events(&stranger);
    let rw = RwLock::new(&stranger, &root).unwrap();

    let started = Instant::now();
    match bounded("the reader", PATIENCE, rw.try_read_for(PATIENCE)).await {
        Err(Error::NoAuth { path }) => assert_eq!(path, writer.node()),
        other => panic!("reading behind an unreadable writer: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    await_count(&admin, &root, 1).await;
    writer.release().await.unwrap();
    let read = bounded("the reader", PATIENCE, rw.read()).await.unwrap();
    read.release().await.unwrap();
    assert_eq!(*events.borrow(), [SessionEvent::Connected]);
    await_empty(&admin, &root).await;
    admin.delete(&root, None).await.unwrap();
}

/// A candidate of another identity behind a `CreatorOnly` leader: `join()` returns (it
/// never waits), and the candidate's campaign ends with `NoAuth` naming the leader's node,
/// which `leadership()` returns; its node is deleted, it never led.
#[tokio::test(flavor = "multi_thread")]
async fn a_candidate_behind_an_unreadable_leader_ends_with_no_auth() {
    let hosts = secured().await.connect_string();
    let root = unique_root("unreadable-leader");
    let (admin, stranger) = stranger_behind_creator_only(&hosts, &root).await;
    let owner = connect(authed().node_acl(NodeAcl::CreatorOnly), &hosts).await;
    let leader = LeaderElection::new(&owner, &root, "leader").unwrap();
    let leading = leader.join().await.unwrap();
    let leadership = leading.leadership().await.unwrap();

    let election = LeaderElection::new(&stranger, &root, "stranger").unwrap();
    let candidate = bounded("the join", PATIENCE, election.join())
        .await
        .unwrap();
    match bounded("the leadership", PATIENCE, candidate.leadership()).await {
        Err(Error::NoAuth { path }) => assert_eq!(path, leadership.node()),
        other => panic!("following an unreadable leader: {other:?}"),
    }
    assert_eq!(candidate.role(), Role::Follower);
    await_count(&admin, &root, 1).await;
    match bounded("run", PATIENCE, election.run(|_| async {})).await {
        Err(Error::NoAuth { path }) => assert_eq!(path, leadership.node()),
        other => panic!("running behind an unreadable leader: {other:?}"),
    }
    await_count(&admin, &root, 1).await;
    leading.resign().await.unwrap();
    await_empty(&admin, &root).await;
    admin.delete(&root, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_of_one_identity_share_a_creator_only_lock() {
    const SESSIONS: usize = 2;
    const TASKS: usize = 2;
    const ROUNDS: usize = 25;
    let hosts = secured().await.connect_string();
    let root = unique_root("shared-identity");
    let history = History::new();
    let mut sessions = Vec::new();
    let mut tasks = Vec::new();
    for s in 0..SESSIONS {
        let session = connect(authed().node_acl(NodeAcl::CreatorOnly), &hosts).await;
        for t in 0..TASKS {
            let (mutex, history) = (Mutex::new(&session, &root).unwrap(), history.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = mutex.lock().await.expect("lock");
                    critical_section(&history, &format!("{s}.{t}"), &guard, Some(WORK)).await;
                    guard.release().await.expect("release");
                }
            }));
        }
        sessions.push(session);
    }
    for task in tasks {
        bounded("contenders", PATIENCE * 4, task)
            .await
            .expect("contender");
    }
    let sections = history.check(false);
    assert_eq!(sections.len(), SESSIONS * TASKS * ROUNDS);
    assert!(
        sections.iter().all(|s| s.trusted),
        "a lock was lost without a fault"
    );
    await_empty(&digest_observer(&hosts, USER, PASSWORD).await, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_session_after_expiry_authenticates_again() {
    let hosts = secured().await.connect_string();
    let session = connect(authed().node_acl(NodeAcl::CreatorOnly), &hosts).await;
    let root = unique_root("renewed-identity");
    let mutex = Mutex::new(&session, &root).unwrap();
    let guard = mutex.lock().await.unwrap();
    let mut events = record_events(&session);
    let old = live_client(&session);
    let old_id = old.session_id();
    expire_session(&hosts, old.session()).await;
    drop(old);
    let renewed = [SessionEvent::Expired, SessionEvent::Connected];
    await_events(&mut events, &renewed, PATIENCE).await;
    // Lost at the suspension the take-over caused, or at the expiry.
    let loss = bounded("loss", PATIENCE, guard.lost()).await;
    assert!(
        matches!(loss, Loss::Suspended | Loss::SessionExpired),
        "{loss:?}"
    );
    match guard.release().await {
        Err(Error::Lost { .. }) => {}
        other => panic!("releasing a lock lost with its session: {other:?}"),
    }
    // Only an authenticated session can create under the creator-only root.
    let again = bounded("lock on the new session", PATIENCE, mutex.lock())
        .await
        .expect("the new session is authenticated as before");
    let new = live_client(&session);
    assert_ne!(new.session_id(), old_id);
    let users = new.list_auth_users().await.unwrap();
    assert!(
        users
            .iter()
            .any(|u| u.scheme() == "digest" && u.user().starts_with(USER)),
        "{users:?}"
    );
    again.release().await.unwrap();
    await_empty(&digest_observer(&hosts, USER, PASSWORD).await, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn creator_all_world_read_lets_observers_read_but_not_touch() {
    let hosts = secured().await.connect_string();
    let owner = connect(authed(), &hosts).await;
    let root = unique_root("world-read");
    let election = LeaderElection::new(&owner, &root, "node-a")
        .unwrap()
        .node_acl(NodeAcl::CreatorAllWorldRead);
    let candidate = election.join().await.unwrap();
    let leadership = bounded("leadership", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    // An observer without credentials sees the queue.
    let watcher = connect(Session::builder(), &hosts).await;
    let seen = LeaderElection::new(&watcher, &root, "observer").unwrap();
    let ids: Vec<Option<String>> = seen
        .participants()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids, [Some("node-a".to_owned())]);
    assert_eq!(
        seen.leader().await.unwrap().map(|p| p.node),
        Some(leadership.node().to_owned())
    );
    // But it can neither touch the nodes nor join.
    let anonymous = plain_client(&hosts, SESSION_TIMEOUT).await;
    let (data, _) = anonymous.get_data(leadership.node()).await.unwrap();
    assert_eq!(data, b"node-a");
    assert!(is_no_auth(anonymous.delete(leadership.node(), None).await));
    assert!(is_no_auth(
        anonymous.set_data(leadership.node(), b"x", None).await
    ));
    match seen.join().await {
        Err(Error::NoAuth { path }) => assert_eq!(path, root),
        other => panic!(
            "joining without the creator's identity: {:?}",
            other.map(|_| ())
        ),
    }
    assert_eq!(children(&anonymous, &root).await.len(), 1);
    drop(leadership);
    candidate.resign().await.unwrap();
    await_empty(&anonymous, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn creator_only_without_credentials_is_an_invalid_argument() {
    let hosts = secured().await.connect_string();
    let refused = [
        Session::builder().node_acl(NodeAcl::CreatorOnly),
        Session::builder().node_acl(NodeAcl::CreatorAllWorldRead),
        Session::builder().digest_auth("orders:svc", PASSWORD),
        Session::builder().digest_auth("", PASSWORD),
    ];
    for builder in refused {
        let shown = format!("{builder:?}");
        match builder.connect(&hosts).await {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("{shown}: {:?}", other.map(|_| ())),
        }
    }
    // Per recipe, the servers refuse the ACL: nothing is created.
    let anonymous = connect(Session::builder(), &hosts).await;
    let root = unique_root("no-identity");
    for acl in [NodeAcl::CreatorOnly, NodeAcl::CreatorAllWorldRead] {
        let mutex = Mutex::new(&anonymous, &root).unwrap().node_acl(acl);
        match mutex.try_lock().await {
            Err(Error::InvalidAcl { path }) => assert!(path.contains(&root), "{path}"),
            other => panic!("{acl:?} without identity: {other:?}"),
        }
    }
    let client = live_client(&anonymous);
    assert_eq!(
        client.check_stat(&root).await.unwrap(),
        None,
        "the root was created"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_password_fails_at_connect_with_sasl_and_on_first_use_with_digest() {
    let hosts = secured().await.connect_string();
    // SASL DIGEST-MD5: the servers check the password when the session is made.
    let started = Instant::now();
    let wrong = Session::builder()
        .connection_timeout(CONNECTION_TIMEOUT)
        .sasl_digest_md5(USER, "wrong password")
        .connect(&hosts)
        .await;
    match wrong {
        Err(Error::AuthFailed { reason, .. }) => assert!(reason.contains(USER), "{reason}"),
        other => panic!("SASL with a wrong password: {:?}", other.map(|_| ())),
    }
    assert!(
        started.elapsed() < CONNECTION_TIMEOUT,
        "took {:?}",
        started.elapsed()
    );
    let sasl = connect(
        Session::builder()
            .sasl_digest_md5(USER, PASSWORD)
            .node_acl(NodeAcl::CreatorOnly),
        &hosts,
    )
    .await;
    let sasl_root = unique_root("sasl");
    let guard = Mutex::new(&sasl, &sasl_root).unwrap().lock().await.unwrap();
    let (acl, _) = live_client(&sasl).get_acl(&sasl_root).await.unwrap();
    assert!(
        acl.iter().all(|a| a.scheme() == "sasl" && a.id() == USER),
        "{acl:?}"
    );
    guard.release().await.unwrap();
    await_empty(&live_client(&sasl), &sasl_root).await;

    // Digest: any identity is accepted at connect; the nodes' ACLs refuse a wrong one.
    let owner = connect(authed().node_acl(NodeAcl::CreatorOnly), &hosts).await;
    let root = unique_root("digest-password");
    let guard = Mutex::new(&owner, &root).unwrap().lock().await.unwrap();
    let admin = digest_observer(&hosts, USER, PASSWORD).await;
    let impostor = connect(
        Session::builder().digest_auth(USER, "wrong password"),
        &hosts,
    )
    .await;
    refused_at_once(&impostor, &root, &admin, 1).await;
    guard.release().await.unwrap();
    await_empty(&admin, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn locks_and_elections_work_over_tls() {
    let ensemble = secured().await;
    let hosts = ensemble.secure_connect_string();
    let session = connect(tls(), &hosts).await;
    let root = unique_root("tls-lock");
    let mutex = Mutex::new(&session, &root).unwrap();
    let guard = mutex.lock().await.unwrap();
    assert!(mutex.try_lock().await.unwrap().is_none(), "a second holder");
    guard.release().await.unwrap();

    let election_root = unique_root("tls-election");
    let election = LeaderElection::new(&session, &election_root, "tls-node").unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = bounded("leadership", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    assert_eq!(
        election
            .leader()
            .await
            .unwrap()
            .and_then(|p| p.id)
            .as_deref(),
        Some("tls-node")
    );
    drop(leadership);
    candidate.resign().await.unwrap();

    // Digest credentials and creator-only nodes work over TLS too.
    let owner = connect(
        tls()
            .digest_auth(USER, PASSWORD)
            .node_acl(NodeAcl::CreatorOnly),
        &hosts,
    )
    .await;
    let private_root = unique_root("tls-creator-only");
    let guard = Mutex::new(&owner, &private_root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    guard.release().await.unwrap();

    let observer = plain_client(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    await_empty(&observer, &root).await;
    await_empty(&observer, &election_root).await;
    await_empty(&live_client(&owner), &private_root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_refusals_are_clear_and_prompt() {
    let ensemble = secured().await;
    let (plain, secure) = (ensemble.connect_string(), ensemble.secure_connect_string());
    let pki = pki();
    let cases = [
        (
            "plaintext to the TLS port",
            Session::builder(),
            &secure,
            "TLS port",
        ),
        (
            "a wrong CA",
            Session::builder()
                .tls_ca_pem(&pki.other_ca_pem)
                .tls_identity_pem(&pki.client_cert_pem, &pki.client_key_pem),
            &secure,
            "not trusted",
        ),
        (
            "no client certificate",
            Session::builder().tls_ca_pem(&pki.ca_pem),
            &secure,
            "refused the TLS handshake",
        ),
        ("TLS to the plaintext port", tls(), &plain, "not a TLS port"),
    ];
    for (case, builder, hosts, says) in cases {
        let started = Instant::now();
        let result = builder
            .connection_timeout(CONNECTION_TIMEOUT)
            .connect(hosts)
            .await;
        let took = started.elapsed();
        match result {
            Err(Error::Tls { reason, .. }) => assert!(reason.contains(says), "{case}: {reason}"),
            other => panic!("{case}: {:?}", other.map(|_| ())),
        }
        assert!(took < CONNECTION_TIMEOUT / 2, "{case}: took {took:?}");
        eprintln!("{case}: Error::Tls after {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unusable_pems_fail_before_anything_is_sent() {
    let pki = pki();
    let not_a_cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let cases = [
        Session::builder().tls_ca_pem("not a PEM"),
        Session::builder().tls_ca_pem(not_a_cert),
        Session::builder()
            .tls_ca_pem(&pki.ca_pem)
            .tls_identity_pem(&pki.client_cert_pem, &pki.stranger_key_pem),
        Session::builder()
            .tls_ca_pem(&pki.ca_pem)
            .tls_identity_pem(&pki.client_cert_pem, "no key here"),
        Session::builder().tls_identity_pem(&pki.client_cert_pem, &pki.client_key_pem),
    ];
    // Nothing listens on port 1: a connect attempt would be refused, not be a bad argument.
    for builder in cases {
        match builder.connect("127.0.0.1:1").await {
            Err(Error::InvalidArgument(reason)) => {
                assert!(!reason.contains("PRIVATE KEY"), "{reason}")
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn secrets_never_show_in_debug_output() {
    let pki = pki();
    let builder = Session::builder()
        .digest_auth(USER, PASSWORD)
        .sasl_digest_md5(OTHER_USER, OTHER_PASSWORD)
        .tls_ca_pem(&pki.ca_pem)
        .tls_identity_pem(&pki.client_cert_pem, &pki.client_key_pem);
    let shown = format!("{builder:?}");
    assert!(shown.contains(USER), "{shown}");
    for secret in [PASSWORD, OTHER_PASSWORD, "PRIVATE KEY"] {
        assert!(!shown.contains(secret), "{secret:?} in {shown}");
    }
    let key_body = pki.client_key_pem.lines().nth(1).unwrap();
    assert!(!shown.contains(key_body), "{shown}");
}
