//! Introspection: `contenders()` lists the queue in order with tokens, who holds (and how)
//! and ids; ids default to `<host name>/<process id>`; bad ids are refused before anything
//! is sent.

use std::time::Duration;

use zk_harness::{
    await_count, await_empty, bounded, observer, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Access, Error, LeaderElection, Mutex, RwLock, Semaphore};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
    format!("{}/{}", host.trim(), std::process::id())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mutex_lists_its_holder_then_its_waiters_with_tokens_and_ids() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("contenders");
    let observer = observer(&zk.connect_string()).await;
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let worker = Mutex::new(&s, &root).unwrap().id("worker-7").unwrap();
    let guard = worker.lock().await.unwrap();
    let waiter = tokio::spawn({
        let mutex = Mutex::new(&s, &root).unwrap();
        async move { mutex.lock().await.unwrap().release().await }
    });
    await_count(&observer, &root, 2).await;

    let seen = Mutex::new(&s, &root).unwrap().contenders().await.unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        (
            seen[0].node.as_str(),
            seen[0].token,
            seen[0].holds,
            seen[0].id.as_deref()
        ),
        (guard.node(), guard.fencing_token(), true, Some("worker-7"))
    );
    assert_eq!(
        (seen[1].holds, seen[1].id.clone()),
        (false, Some(default_id()))
    );
    assert!(seen[1].token > seen[0].token);
    assert!(seen
        .iter()
        .all(|c| c.access == Access::Exclusive && !c.revocation_requested));

    guard.release().await.unwrap();
    bounded("the waiter goes", PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(worker.contenders().await.unwrap().is_empty());
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_write_lock_tells_readers_from_writers() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("contenders-rw");
    let observer = observer(&zk.connect_string()).await;
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let rw = RwLock::new(&s, &root).unwrap().id("rw-user").unwrap();
    let (one, two) = (rw.read().await.unwrap(), rw.read().await.unwrap());
    let writer = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().await.unwrap().release().await }
    });
    await_count(&observer, &root, 3).await;
    let reader = tokio::spawn({
        let rw = rw.clone();
        async move { rw.read().await.unwrap().release().await }
    });
    await_count(&observer, &root, 4).await;

    let seen = rw.contenders().await.unwrap();
    let shape: Vec<_> = seen.iter().map(|c| (c.access, c.holds)).collect();
    assert_eq!(
        shape,
        vec![
            (Access::Read, true),
            (Access::Read, true),
            (Access::Write, false),
            (Access::Read, false)
        ]
    );
    assert!(seen.iter().all(|c| c.id.as_deref() == Some("rw-user")));

    one.release().await.unwrap();
    two.release().await.unwrap();
    bounded("the writer goes", PATIENCE, writer)
        .await
        .unwrap()
        .unwrap();
    bounded("the reader goes", PATIENCE, reader)
        .await
        .unwrap()
        .unwrap();
    await_empty(&observer, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_semaphore_lists_its_leases_then_the_acquirer_passing_in() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("contenders-sem");
    let observer = observer(&zk.connect_string()).await;
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let semaphore = Semaphore::new(&s, &root, 2).unwrap().id("crawler").unwrap();
    let (one, two) = (
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
    );
    let third = tokio::spawn({
        let semaphore = semaphore.clone();
        async move { semaphore.acquire().await.unwrap().release().await }
    });
    let leases = format!("{root}/leases");
    await_count(&observer, &leases, 3).await;

    let seen = semaphore.contenders().await.unwrap();
    let holds: Vec<_> = seen.iter().map(|c| c.holds).collect();
    assert_eq!(holds, vec![true, true, false]);
    assert_eq!(seen[0].token, one.fencing_token());
    assert!(seen
        .iter()
        .all(|c| c.access == Access::Lease && c.id.as_deref() == Some("crawler")));

    one.release().await.unwrap();
    two.release().await.unwrap();
    bounded("the third goes", PATIENCE, third)
        .await
        .unwrap()
        .unwrap();
    await_empty(&observer, &leases).await;
    await_empty(&observer, &format!("{root}/locks")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_ids_are_refused_before_anything_is_sent() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("contenders-bad-id");
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let huge = "x".repeat(2 * 1024 * 1024);
    for id in ["", "a\0b", "__REVOKE__", huge.as_str()] {
        let mutex = Mutex::new(&s, &root).unwrap().id(id);
        assert!(
            matches!(mutex, Err(Error::InvalidArgument(_))),
            "{:?}",
            &id[..id.len().min(12)]
        );
        let rw = RwLock::new(&s, &root).unwrap().id(id);
        assert!(matches!(rw, Err(Error::InvalidArgument(_))));
        let semaphore = Semaphore::new(&s, &root, 1).unwrap().id(id);
        assert!(matches!(semaphore, Err(Error::InvalidArgument(_))));
        let election = LeaderElection::new(&s, &root, id);
        assert!(matches!(election, Err(Error::InvalidArgument(_))));
    }
    let observer = observer(&zk.connect_string()).await;
    assert_eq!(
        observer.check_stat(&root).await.unwrap(),
        None,
        "nothing was created"
    );
}

// Listing while contenders come and go, or the connection is down (tests/suite/contenders/).
#[path = "contenders/listing.rs"]
mod listing;
