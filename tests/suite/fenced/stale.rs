//! Fenced writes by holds whose session expired (issue #27): after
//! the same `Session` value made a new session, and the same recipes hold again on it,
//! every hold of the old session (and every builder made before the expiry) writes nothing.

use std::time::Duration;

use zk_harness::{
    await_empty, await_events, bounded, expire_session, live_client, observer, record_events,
    session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Error, Fenced, LeaderElection, Mutex, RwLock, Semaphore, SessionEvent};
use zookeeper_client::CreateMode;

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

fn refused(what: &str, outcome: Result<Vec<zk_recipes::Written>, Error>) {
    assert!(
        matches!(outcome, Err(Error::Lost { .. })),
        "{what} of the expired session: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_hold_of_an_expired_session_writes_once_the_same_session_value_holds_again() {
    let zk = Ensemble::shared(1).await;
    let hosts = zk.connect_string();
    let root = unique_root("review-stale");
    let state = format!("{root}.state");
    let observer = observer(&hosts).await;
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let mut events = record_events(&s);
    let mutex = Mutex::new(&s, &format!("{root}/mutex")).unwrap();
    let rw = RwLock::new(&s, &format!("{root}/rw")).unwrap();
    let semaphore = Semaphore::new(&s, &format!("{root}/sem"), 1).unwrap();
    let election = LeaderElection::new(&s, &format!("{root}/election"), "node-a").unwrap();

    let guard = mutex.lock().await.unwrap();
    guard
        .fenced()
        .create(&state, b"old session", CreateMode::Persistent)
        .commit()
        .await
        .unwrap();
    let read = rw.read().await.unwrap();
    let lease = semaphore.acquire().await.unwrap();
    let candidate = election.join().await.unwrap();
    let leadership = candidate.leadership().await.unwrap();
    let before: Vec<Fenced> = vec![
        guard.fenced(),
        read.fenced(),
        lease.fenced(),
        leadership.fenced(),
    ];

    let old = live_client(&s).session().clone();
    expire_session(&hosts, &old).await;
    await_events(&mut events, &[SessionEvent::Expired], PATIENCE).await;
    let again = bounded("the same mutex holds again", PATIENCE, mutex.lock())
        .await
        .unwrap();
    assert_ne!(live_client(&s).session_id(), old.id(), "a new session");
    again
        .fenced()
        .set_data(&state, b"new session", None)
        .commit()
        .await
        .unwrap();
    let leading_again = bounded(
        "the candidate leads again",
        PATIENCE,
        candidate.leadership(),
    )
    .await
    .unwrap();
    assert_ne!(leading_again.node(), leadership.node());

    for (i, builder) in before.into_iter().enumerate() {
        refused(
            &format!("builder {i} made before expiry"),
            builder.set_data(&state, b"stale", None).commit().await,
        );
    }
    let stale = |f: Fenced| f.set_data(&state, b"stale", None).commit();
    refused("the mutex guard", stale(guard.fenced()).await);
    refused("the read guard", stale(read.fenced()).await);
    refused("the lease", stale(lease.fenced()).await);
    refused("the leadership", stale(leadership.fenced()).await);
    let proclaimed = leadership.proclaim(b"stale").await;
    assert!(
        matches!(proclaimed, Err(Error::Lost { .. })),
        "{proclaimed:?}"
    );
    let asked = leadership.revocation_requested().await;
    assert!(matches!(asked, Err(Error::Lost { .. })), "{asked:?}");
    assert_eq!(observer.get_data(&state).await.unwrap().0, b"new session");

    for released in [
        guard.release().await,
        read.release().await,
        lease.release().await,
    ] {
        assert!(matches!(released, Err(Error::Lost { .. })), "{released:?}");
    }
    again.release().await.unwrap();
    candidate.resign().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    for part in ["mutex", "rw", "sem/leases", "sem/locks", "election"] {
        await_empty(&observer, &format!("{root}/{part}")).await;
    }
}

/// A leader that stepped down on a suspension keeps its node and leads again on it once
/// reconnected: the servers' check of the node passes for both terms, so only the old
/// leadership's own trust can refuse it. It must stay refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_leadership_that_stepped_down_stays_refused_when_its_node_leads_again() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("review-stepped-down");
    let state = format!("{root}.state");
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&s, &root, "node-a").unwrap();
    let candidate = election.join().await.unwrap();
    let first = candidate.leadership().await.unwrap();
    first.proclaim(b"first").await.unwrap();
    let early = first
        .fenced()
        .create(&state, b"stale", CreateMode::Persistent);

    proxy.cut();
    bounded("the leader steps down", PATIENCE, first.lost()).await;
    proxy.restore();
    let second = bounded("it leads again", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    assert_eq!(second.node(), first.node(), "the same node leads again");

    let stale = early.commit().await;
    assert!(matches!(stale, Err(Error::Lost { .. })), "{stale:?}");
    let proclaimed = first.proclaim(b"stale").await;
    assert!(
        matches!(proclaimed, Err(Error::Lost { .. })),
        "{proclaimed:?}"
    );
    second.proclaim(b"second").await.unwrap();
    assert_eq!(observer.check_stat(&state).await.unwrap(), None);
    let shown = election.leader().await.unwrap().expect("a leader");
    assert_eq!(shown.proclaimed.as_deref(), Some(&b"second"[..]));
    candidate.resign().await.unwrap();
    await_empty(&observer, &root).await;
}
