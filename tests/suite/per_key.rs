//! A lock per key: `KeyedMutex`, and the per-key pattern it stands for (a new `Mutex` on
//! `<root>/<key>` per acquisition), against a real ZooKeeper server.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use zk_harness::{await_empty, bounded, children, observer, session, unique_root, Ensemble};
use zk_recipes::{Error, KeyedMutex, Mutex, Session};
use zookeeper_client::{Acl, Acls, AuthId, CreateMode, Permission};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// 3 sessions × 16 tasks, 8 keys, every acquisition through a new lock value (a
/// `KeyedMutex` on even tasks, a `Mutex` on the key's path on odd ones): never two holders
/// of one key, each key's tokens strictly increasing in order of entry, holders of
/// different keys at once, and no contender node left under any key.
#[tokio::test(flavor = "multi_thread")]
async fn each_key_excludes_its_holders_across_tasks_and_sessions() {
    const SESSIONS: usize = 3;
    const TASKS: usize = 16;
    const KEYS: usize = 8;
    const ROUNDS: usize = 25;
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/jobs", unique_root("per-key"));
    let inside: Arc<Vec<AtomicUsize>> = Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let most_keys_held = Arc::new(AtomicUsize::new(0));
    let held_now = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(StdMutex::new(HashMap::<usize, Vec<u64>>::new()));
    let mut sessions = Vec::new();
    let mut tasks = Vec::new();
    for s in 0..SESSIONS {
        let session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
        for t in 0..TASKS {
            let (session, root) = (session.clone(), root.clone());
            let (inside, tokens) = (inside.clone(), tokens.clone());
            let (most, now) = (most_keys_held.clone(), held_now.clone());
            tasks.push(tokio::spawn(async move {
                for round in 0..ROUNDS {
                    let key = (s * 7 + t * 3 + round) % KEYS;
                    let guard = if t % 2 == 0 {
                        let keyed = KeyedMutex::new(&session, &root).expect("keyed mutex");
                        keyed.lock(&format!("k{key}")).await.expect("lock")
                    } else {
                        let mutex = Mutex::new(&session, &format!("{root}/k{key}")).expect("mutex");
                        mutex.lock().await.expect("lock")
                    };
                    assert_eq!(
                        inside[key].fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders of k{key}"
                    );
                    most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    tokens
                        .lock()
                        .unwrap()
                        .entry(key)
                        .or_default()
                        .push(guard.fencing_token());
                    tokio::task::yield_now().await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    assert_eq!(
                        inside[key].fetch_sub(1, Ordering::SeqCst),
                        1,
                        "two holders of k{key}"
                    );
                    guard.release().await.expect("release");
                }
            }));
        }
        sessions.push(session);
    }
    for task in tasks {
        bounded("the contenders finish", Duration::from_secs(240), task)
            .await
            .expect("contender panicked");
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(
        tokens.values().map(Vec::len).sum::<usize>(),
        SESSIONS * TASKS * ROUNDS
    );
    for (key, tokens) in &tokens {
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "k{key}: fencing tokens not strictly increasing in order of entry"
        );
    }
    assert!(
        most_keys_held.load(Ordering::SeqCst) > 1,
        "holders of different keys never held at once"
    );
    let admin = observer(&ensemble.connect_string()).await;
    for key in children(&admin, &root).await {
        await_empty(&admin, &format!("{root}/{key}")).await;
    }
    for session in &sessions {
        session.close().await;
    }
}

/// A key that is not one valid path component is refused at once with `InvalidPath`
/// naming it; nothing is created, and the session goes on working.
#[tokio::test(flavor = "multi_thread")]
async fn bad_keys_are_refused_and_nothing_is_created() {
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/jobs", unique_root("bad-keys"));
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let keyed = KeyedMutex::new(&s, &root).unwrap();
    let long = "k".repeat(40 * 1024);
    for key in [
        "",
        "a/b",
        "/",
        ".",
        "..",
        "nul\0",
        "bell\u{7}",
        long.as_str(),
    ] {
        let refused = bounded("a refusal", Duration::from_secs(1), keyed.lock(key)).await;
        match refused {
            Err(Error::InvalidPath { path, reason }) => {
                assert!(path.starts_with(&root), "{key:?}: the error names {path:?}");
                assert!(!reason.is_empty());
            }
            other => panic!("key {key:?}: {other:?}"),
        }
        assert!(matches!(
            keyed.try_lock(key).await,
            Err(Error::InvalidPath { .. })
        ));
        assert!(matches!(
            keyed.try_lock_for(key, Duration::from_secs(1)).await,
            Err(Error::InvalidPath { .. })
        ));
        assert!(matches!(keyed.mutex(key), Err(Error::InvalidPath { .. })));
    }
    assert!(matches!(
        KeyedMutex::new(&s, "jobs"),
        Err(Error::InvalidPath { .. })
    ));
    let admin = observer(&ensemble.connect_string()).await;
    let top = root.trim_end_matches("/jobs");
    assert_eq!(
        admin.check_stat(top).await.unwrap(),
        None,
        "a bad key created {top}"
    );
    let guard = keyed.lock("good").await.expect("the session still works");
    guard.release().await.unwrap();
    await_empty(&admin, &format!("{root}/good")).await;
}

/// First touch: the key's path, the root and the root's parents do not exist; locking a
/// key creates them as persistent (container) nodes. A second key under the root that now
/// exists is created by its first acquisition too.
#[tokio::test(flavor = "multi_thread")]
async fn first_touch_creates_the_key_and_its_missing_parents() {
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/a/b/jobs", unique_root("first-touch"));
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let admin = observer(&ensemble.connect_string()).await;
    let keyed = KeyedMutex::new(&s, &root).unwrap();
    for key in ["k1", "k2"] {
        let path = format!("{root}/{key}");
        assert_eq!(admin.check_stat(&path).await.unwrap(), None);
        let guard = keyed.lock(key).await.expect("first touch");
        assert_eq!(guard.node().rsplit_once('/').unwrap().0, path);
        let (_, stat) = admin.get_data(&path).await.unwrap();
        assert_eq!(stat.ephemeral_owner, 0, "{path} is ephemeral");
        assert!(
            keyed.try_lock(key).await.unwrap().is_none(),
            "{key} held twice"
        );
        guard.release().await.unwrap();
        await_empty(&admin, &path).await;
    }
    let other = KeyedMutex::new(&s, &root).unwrap();
    let k1 = other.try_lock("k1").await.unwrap().expect("k1 is free");
    let k2 = keyed
        .try_lock("k2")
        .await
        .unwrap()
        .expect("another key is not held by k1's holder");
    k1.release().await.unwrap();
    k2.release().await.unwrap();
    for key in ["k1", "k2"] {
        await_empty(&admin, &format!("{root}/{key}")).await;
    }
}

/// ZooKeeper opcodes of the requests an entry sends.
const CREATE_CONTAINER: i32 = 19;

/// A first touch costs no round trip of its own: the missing key path is created in the
/// round trip of the contender's create and listing, three requests in all (it used to be
/// five: the create and listing that found it missing came first). Once a session has seen
/// the path exist, an entry sends the create and listing only, and so does one of another
/// session to the same servers (the same connect string). A session to another connect
/// string, which has not seen it, sends the path's create too: the server refuses it, and
/// it holds all the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_first_touch_creates_the_key_path_in_the_round_trip_of_the_entry() {
    let ensemble = Ensemble::shared(1).await;
    let proxy = ensemble.proxy(0).await;
    let path = unique_root("first-touch-requests");
    let admin = observer(&ensemble.connect_string()).await;
    let s = session(&proxy.address(), SESSION_TIMEOUT).await;
    let entry = |s: Session| {
        let path = path.clone();
        async move {
            let guard = Mutex::new(&s, &path).unwrap().lock().await.expect("lock");
            guard.release().await.unwrap();
        }
    };

    let before = proxy.requests().len();
    entry(s.clone()).await;
    let sent = proxy.sent_since(before);
    assert_eq!(sent.len(), 4, "first touch: {sent:?}");
    assert_eq!(sent[0], CREATE_CONTAINER, "first touch: {sent:?}");

    let before = proxy.requests().len();
    entry(s.clone()).await;
    let sent = proxy.sent_since(before);
    assert_eq!(sent.len(), 3, "known path: {sent:?}");
    assert!(!sent.contains(&CREATE_CONTAINER), "known path: {sent:?}");

    let sibling = session(&proxy.address(), SESSION_TIMEOUT).await;
    let before = proxy.requests().len();
    entry(sibling.clone()).await;
    let sent = proxy.sent_since(before);
    assert_eq!(
        sent.len(),
        3,
        "a path a session to the same servers knows: {sent:?}"
    );

    let elsewhere = ensemble.proxy(0).await;
    let other = session(&elsewhere.address(), SESSION_TIMEOUT).await;
    entry(other.clone()).await;
    let sent = elsewhere.sent_since(0);
    assert_eq!(sent.len(), 4, "a path only other sessions made: {sent:?}");
    await_empty(&admin, &path).await;
}

/// A path that is there but whose parent denies creating children: the create of the path
/// sent on first touch is refused (`NoAuth`), which says nothing of the path; the entry
/// goes on and holds. A path the session knew, deleted since (a container the servers
/// reaped, an operator), is made again by the next entry.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_or_stale_guess_about_the_key_path_still_holds() {
    let ensemble = Ensemble::shared(1).await;
    let admin = observer(&ensemble.connect_string()).await;
    let parent = unique_root("first-touch-denied");
    let path = format!("{parent}/jobs");
    admin
        .create(
            &parent,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    admin
        .create(
            &path,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    // Only now: everything but create, under the parent.
    let no_create = [Acl::new(
        Permission::READ | Permission::WRITE | Permission::DELETE | Permission::ADMIN,
        AuthId::anyone(),
    )];
    admin.set_acl(&parent, &no_create, None).await.unwrap();
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&s, &path).unwrap().lock().await.expect("lock");
    guard.release().await.unwrap();
    await_empty(&admin, &path).await;

    // Known to this session now; deleted behind its back.
    admin
        .set_acl(&parent, &Acls::anyone_all(), None)
        .await
        .unwrap();
    admin.delete(&path, None).await.unwrap();
    let guard = Mutex::new(&s, &path)
        .unwrap()
        .lock()
        .await
        .expect("lock again");
    guard.release().await.unwrap();
    await_empty(&admin, &path).await;
    admin.delete(&path, None).await.unwrap();
    admin.delete(&parent, None).await.unwrap();
}

/// `KeyedMutex::id` sets the id every key's contenders carry: a holder through `lock` and a
/// waiter through `try_lock_for` on another key's value show their own ids in the key's
/// `contenders()`, one left at the default shows `<host>/<pid>`; the id survives
/// `node_acl` and a clone. A bad id is refused with `InvalidArgument`, nothing sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_keyed_mutex_s_id_is_what_its_contenders_show() {
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/jobs", unique_root("per-key-id"));
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let admin = observer(&ensemble.connect_string()).await;
    let huge = "x".repeat(2 * 1024 * 1024);
    for id in ["", "a\0b", "__REVOKE__", huge.as_str()] {
        let refused = KeyedMutex::new(&s, &root).unwrap().id(id);
        assert!(
            matches!(refused, Err(Error::InvalidArgument(_))),
            "{:?}",
            &id[..id.len().min(12)]
        );
    }
    let top = root.trim_end_matches("/jobs");
    assert_eq!(admin.check_stat(top).await.unwrap(), None, "a bad id sent");

    let worker = KeyedMutex::new(&s, &root)
        .unwrap()
        .id("worker-7")
        .unwrap()
        .node_acl(zk_recipes::NodeAcl::Open);
    let held = worker.clone().lock("job-42").await.unwrap();
    let waiter = KeyedMutex::new(&s, &root).unwrap().id("worker-8").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = waiter.try_lock_for("job-42", zk_harness::PATIENCE).await;
        guard.unwrap().expect("the waiter's turn").release().await
    });
    let key = format!("{root}/job-42");
    zk_harness::await_count(&admin, &key, 2).await;
    let plain = KeyedMutex::new(&s, &root).unwrap();
    let third = tokio::spawn({
        let plain = plain.clone();
        async move { plain.lock("job-42").await.unwrap().release().await }
    });
    zk_harness::await_count(&admin, &key, 3).await;

    let seen = plain.mutex("job-42").unwrap().contenders().await.unwrap();
    let ids: Vec<_> = seen.iter().map(|c| c.id.as_deref()).collect();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let default = format!("{}/{}", host.trim(), std::process::id());
    assert_eq!(
        ids,
        [Some("worker-7"), Some("worker-8"), Some(default.as_str())]
    );
    assert_eq!(seen[0].node, held.node());
    held.release().await.unwrap();
    for task in [waiting, third] {
        bounded("a waiter", zk_harness::PATIENCE, task)
            .await
            .unwrap()
            .unwrap();
    }
    await_empty(&admin, &key).await;
}

/// Bounded waits on a held key give up and leave nothing; other keys go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_wait_on_one_key_leaves_nothing() {
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/jobs", unique_root("per-key-timeout"));
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let admin = observer(&ensemble.connect_string()).await;
    let keyed = KeyedMutex::new(&s, &root).unwrap();
    let held = keyed.lock("busy").await.unwrap();
    let waited = keyed
        .try_lock_for("busy", Duration::from_millis(200))
        .await
        .unwrap();
    assert!(waited.is_none(), "a held key was taken twice");
    let free = keyed
        .try_lock_for("free", Duration::from_millis(200))
        .await
        .unwrap();
    assert!(free.is_some(), "a free key waited on another");
    assert_eq!(children(&admin, &format!("{root}/busy")).await.len(), 1);
    held.release().await.unwrap();
    free.unwrap().release().await.unwrap();
    for key in ["busy", "free"] {
        await_empty(&admin, &format!("{root}/{key}")).await;
    }
}

/// A burst of entries on one key has at most 16 in flight, and does not hold back an entry
/// on another key: with the client's requests held back, 16 acquisitions on one key have
/// sent their creates, a 17th on that key gets no turn (it gives up at its deadline), and
/// one on another key still sends its own at once, so it holds once the requests go
/// through.
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_on_one_key_does_not_hold_back_another_key() {
    const BURST: usize = 16;
    let ensemble = Ensemble::shared(1).await;
    let root = format!("{}/jobs", unique_root("per-key-burst"));
    let admin = observer(&ensemble.connect_string()).await;
    let proxy = ensemble.proxy(0).await;
    let s = session(&proxy.address(), Duration::from_secs(20)).await;
    let keyed = KeyedMutex::new(&s, &root).unwrap();
    // The paths exist: every entry is one create and one listing.
    for key in ["busy", "a", "b", "c", "d"] {
        keyed.lock(key).await.unwrap().release().await.unwrap();
    }
    proxy.mute();
    let mut burst: Vec<_> = (0..BURST)
        .map(|_| {
            let keyed = keyed.clone();
            Box::pin(async move { keyed.lock("busy").await.unwrap().release().await.unwrap() })
        })
        .collect();
    // Each polled once: it takes its turn and sends its create, then waits for the answer.
    for entry in &mut burst {
        std::future::poll_fn(|cx| {
            assert!(
                entry.as_mut().poll(cx).is_pending(),
                "an answer came through a mute"
            );
            std::task::Poll::Ready(())
        })
        .await;
    }
    // One more on the same key gets no turn: it gives up at its deadline, having sent
    // nothing (an attempt that sent its create would wait for the answer).
    let more = keyed.try_lock_for("busy", Duration::from_millis(300));
    let more = bounded("one more on the busy key", zk_harness::PATIENCE, more).await;
    assert!(more.unwrap().is_none(), "a 17th entry on one key was sent");
    // Keys share turns by a hash of their path (one in 64 shares the busy key's): of four
    // other keys, all but about one in 16 million runs have some on other turns.
    let others = ["a", "b", "c", "d"].map(|key| {
        let keyed = keyed.clone();
        tokio::spawn(async move { keyed.try_lock_for(key, Duration::from_millis(300)).await })
    });
    // Held back past their deadlines: only an entry that sent its create before them can
    // still hold (an attempt under way is never cut short).
    tokio::time::sleep(Duration::from_millis(600)).await;
    proxy.restore();
    let mut held = 0;
    for other in others {
        let other = bounded("another key", zk_harness::PATIENCE, other).await;
        if let Some(guard) = other.unwrap().unwrap() {
            held += 1;
            guard.release().await.unwrap();
        }
    }
    assert!(
        held > 0,
        "the other keys waited for the burst's turns and gave up"
    );
    for entry in burst {
        bounded("the burst", zk_harness::PATIENCE, entry).await;
    }
    for key in ["busy", "a", "b", "c", "d"] {
        await_empty(&admin, &format!("{root}/{key}")).await;
    }
}
