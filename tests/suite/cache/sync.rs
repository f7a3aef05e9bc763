//! `Cache::sync` attacked: writes acknowledged by another server of an ensemble than the
//! cache's, many syncs at once and cancelled ones, a sync whose request is in flight when
//! the connection freezes, a sync pending when the `Session` closes, the root deleted and
//! made again around syncs, and a cache on a chrooted session; and starts that fail or are
//! cancelled, which must leave no session of the cache's own on the servers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_harness::{bounded, observer, session, unique_root, Ensemble, Fixture, PATIENCE};
use zk_recipes::{Cache, CacheState, Error, Session};
use zookeeper_client::{Acls, Client, CreateMode};

use super::{cut_off_able, in_cache, make, on_servers, remove_all, SESSION_TIMEOUT};

/// A fixture named `name` on the shared ensemble of three, a client that writes through
/// server 0 alone, the root made, and a cache of it on a session to server `cached_on`
/// alone.
async fn across(name: &str, cached_on: usize) -> (Fixture, Client, Session, Cache) {
    let zk = Ensemble::shared(3).await;
    let fx = Fixture::new(zk, name, 0, SESSION_TIMEOUT).await;
    let writer = observer(&zk.address(0)).await;
    make(&writer, &fx.root, b"").await;
    let s = session(&zk.address(cached_on), SESSION_TIMEOUT).await;
    let cache = Cache::start(&s, &fx.root).await.unwrap();
    (fx, writer, s, cache)
}

/// Drops `cache`, removes the root, closes `s`, and checks that nothing is left.
async fn end(fx: Fixture, writer: &Client, s: Session, cache: Cache) {
    drop(cache);
    remove_all(writer, &fx.root).await;
    s.close();
    fx.nothing_left().await;
}

/// Read your writes across servers: every write is acknowledged by server 0 (to a client
/// connected there only), the caches follow on sessions of their own on server 1 and on
/// server 2; after each `sync` both hold it, 200 times over, for a node written, made and
/// deleted.
#[tokio::test(flavor = "multi_thread")]
async fn after_sync_caches_on_other_servers_hold_every_acknowledged_write() {
    let (fx, writer, first, cache) = across("cache-sync-across", 1).await;
    let zk = Ensemble::shared(3).await;
    let root = &fx.root.clone();
    let second = session(&zk.address(2), SESSION_TIMEOUT).await;
    let caches = [cache.clone(), Cache::start(&second, root).await.unwrap()];
    let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
    // What each cache reported and whether it went stale, for the failure's message.
    let mut heard: Vec<_> = caches.iter().map(|c| (c.changes(), c.states())).collect();
    for i in 0..200 {
        let value = i.to_string();
        let (made, gone) = (format!("{root}/n{i}"), format!("{root}/n{}", i - 1));
        writer.set_data(root, value.as_bytes(), None).await.unwrap();
        writer.create(&made, b"", &mode).await.unwrap();
        if i > 0 {
            writer.delete(&gone, None).await.unwrap();
        }
        for (c, cache) in caches.iter().enumerate() {
            bounded("synced", PATIENCE, cache.sync()).await.unwrap();
            let held = cache.get(root).expect("the root");
            assert_eq!(held.data(), Some(value.as_bytes()), "cache {c}, write {i}");
            assert!(cache.get(&made).is_some(), "cache {c}: {made} made");
            if i > 0 && cache.get(&gone).is_some() {
                let (changes, states) = &mut heard[c];
                let mut of_gone = Vec::new();
                while let Ok(change) = changes.try_recv() {
                    if change.path() == gone {
                        of_gone.push(format!("{change:?}"));
                    }
                }
                panic!(
                    "cache {c}: {gone} deleted before the sync of write {i}, still held: {:?}; \
                     its changes reported: {of_gone:?}; the cache's state changed: {:?}",
                    cache.get(&gone),
                    states.has_changed()
                );
            }
        }
    }
    drop(caches);
    second.close();
    end(fx, &writer, first, cache).await;
}

/// Many tasks each write a node of their own (through a server other than the caches'),
/// then sync, at once, many times over; some syncs are cancelled at once or mid-way. Each
/// completed sync finds its own last write (or a later one) in the cache.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_and_cancelled_syncs_each_find_their_own_writes() {
    let (fx, writer, s, cache) = across("cache-sync-many", 1).await;
    let root = fx.root.clone();
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let (cache, writer, root) = (cache.clone(), writer.clone(), root.clone());
            tokio::spawn(async move {
                let node = format!("{root}/t{t}");
                make(&writer, &node, b"0").await;
                for i in 1..=25u32 {
                    writer
                        .set_data(&node, i.to_string().as_bytes(), None)
                        .await
                        .unwrap();
                    if i % 5 == 0 {
                        // Cancelled before it is answered (or at once).
                        let _ = tokio::time::timeout(Duration::from_micros(50), cache.sync()).await;
                    }
                    bounded("synced", PATIENCE, cache.sync()).await.unwrap();
                    let held = cache.get(&node).expect("the task's node");
                    assert!(
                        held.version() >= i as i32,
                        "{node}: version {} held after the sync of write {i}",
                        held.version()
                    );
                }
            })
        })
        .collect();
    for task in tasks {
        bounded("a task ends", PATIENCE * 2, task)
            .await
            .expect("task");
    }
    bounded("synced", PATIENCE, cache.sync()).await.unwrap();
    assert_eq!(in_cache(&cache), on_servers(&writer, &root).await);
    end(fx, &writer, s, cache).await;
}

/// A sync asked for now, still waiting once the cache says it may be stale (it must not
/// return before the cache read the servers again).
async fn pending_sync(cache: &Cache) -> tokio::task::JoinHandle<zk_recipes::Result<()>> {
    let syncing = tokio::spawn({
        let cache = cache.clone();
        async move { cache.sync().await }
    });
    zk_harness::await_watch("stale", &mut cache.states(), |state| {
        matches!(state, CacheState::Stale { .. })
    })
    .await;
    assert!(!syncing.is_finished(), "no sync answered while cut off");
    syncing
}

/// A sync whose request is in flight when the connection freezes (the client hears nothing
/// until its own timers tell it): it waits, the cache goes stale, and once the connection
/// is back the sync returns with the write made meanwhile held.
#[tokio::test(flavor = "multi_thread")]
async fn a_sync_on_a_frozen_connection_returns_once_it_is_back() {
    let zk = Ensemble::shared(1).await;
    let (fx, proxy, s) = cut_off_able(zk, "cache-sync-frozen", Duration::from_secs(4)).await;
    let (root, client) = (&fx.root.clone(), &fx.observer.clone());
    let cache = Cache::start(&s, root).await.unwrap();
    proxy.freeze();
    client.set_data(root, b"frozen", None).await.unwrap();
    let syncing = pending_sync(&cache).await;
    assert_ne!(cache.get(root).unwrap().data(), Some(&b"frozen"[..]));
    proxy.restore();
    bounded("synced again", PATIENCE, syncing)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cache.get(root).unwrap().data(), Some(&b"frozen"[..]));
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    drop(cache);
    remove_all(client, root).await;
    s.close();
    fx.nothing_left().await;
}

/// A sync pending while the cache is cut off ends with `Error::Closed` once its `Session`
/// is closed, promptly: the caller is not left waiting for a connection that will never
/// serve the cache again.
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_sync_ends_with_closed_when_the_session_closes() {
    let zk = Ensemble::shared(1).await;
    let (fx, proxy, s) = cut_off_able(zk, "cache-sync-closed", SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root.clone(), &fx.observer.clone());
    let cache = Cache::start(&s, root).await.unwrap();
    proxy.cut();
    let syncing = pending_sync(&cache).await;
    s.close();
    let ended = bounded("the sync ends", PATIENCE, syncing).await.unwrap();
    assert!(matches!(ended, Err(Error::Closed)), "{ended:?}");
    assert!(matches!(cache.state(), CacheState::Closed { .. }));
    drop(cache);
    proxy.restore();
    remove_all(client, root).await;
    fx.nothing_left().await;
}

/// The root deleted and made again (with children) over and over by another client while
/// syncs are asked for: every sync returns, and after the writer stops, a last sync leaves
/// the cache equal to the servers.
#[tokio::test(flavor = "multi_thread")]
async fn syncs_while_the_root_is_deleted_and_made_again() {
    let (fx, writer, s, cache) = across("cache-sync-root-again", 2).await;
    let root = fx.root.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = tokio::spawn({
        let (writer, root, stop) = (writer.clone(), root.clone(), stop.clone());
        async move {
            let mut rounds = 0u32;
            while !stop.load(Ordering::SeqCst) {
                remove_all(&writer, &root).await;
                make(&writer, &root, rounds.to_string().as_bytes()).await;
                make(&writer, &format!("{root}/a"), b"").await;
                make(&writer, &format!("{root}/a/b"), b"").await;
                rounds += 1;
            }
            remove_all(&writer, &root).await;
            rounds
        }
    });
    for _ in 0..100 {
        bounded("synced", PATIENCE, cache.sync()).await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let rounds = bounded("the writer stops", PATIENCE, churn).await.unwrap();
    assert!(rounds > 0);
    make(&writer, &root, b"last").await;
    make(&writer, &format!("{root}/kept"), b"").await;
    bounded("synced", PATIENCE, cache.sync()).await.unwrap();
    assert_eq!(in_cache(&cache), on_servers(&writer, &root).await);
    assert_eq!(cache.get(&root).unwrap().data(), Some(&b"last"[..]));
    end(fx, &writer, s, cache).await;
}

/// A cache on a chrooted session: its own session is chrooted the same way, it holds the
/// nodes by their paths inside the chroot, follows writes made through the `Session`, and
/// `sync` reads them.
#[tokio::test(flavor = "multi_thread")]
async fn a_cache_on_a_chrooted_session_follows_inside_the_chroot() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-chroot", 0, SESSION_TIMEOUT).await;
    let outside = &fx.observer;
    let chroot = fx.root.clone();
    make(outside, &chroot, b"").await;
    let inner = unique_root("cached");
    let s = Session::builder()
        .session_timeout(SESSION_TIMEOUT)
        .chroot(chroot.clone())
        .connect(&fx.hosts)
        .await
        .unwrap();
    let theirs: Client = zk_harness::live_client(&s);
    let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
    theirs.create(&inner, b"0", &mode).await.unwrap();
    theirs
        .create(&format!("{inner}/a"), b"a", &mode)
        .await
        .unwrap();
    let cache = Cache::start(&s, &inner).await.unwrap();
    assert_eq!(cache.get(&inner).unwrap().data(), Some(&b"0"[..]));
    assert_eq!(cache.children(&inner).len(), 1);
    for i in 1..20 {
        theirs
            .set_data(&format!("{inner}/a"), i.to_string().as_bytes(), None)
            .await
            .unwrap();
        theirs
            .create(&format!("{inner}/n{i}"), b"", &mode)
            .await
            .unwrap();
        bounded("synced", PATIENCE, cache.sync()).await.unwrap();
        let held = cache.get(&format!("{inner}/a")).unwrap();
        assert_eq!(held.data(), Some(i.to_string().as_bytes()));
        assert!(cache.get(&format!("{inner}/n{i}")).is_some());
    }
    assert!(
        cache
            .snapshot()
            .iter()
            .all(|node| node.path().starts_with(&inner)),
        "paths inside the chroot"
    );
    assert_eq!(
        in_cache(&cache),
        on_servers(&theirs, &inner).await,
        "the cache equals the servers, seen inside the chroot"
    );
    // The watch is on the chrooted path, set by a session that is not the Session's.
    let watchers = zk.watchers(&format!("{chroot}{inner}")).await;
    assert_eq!(watchers.len(), 1, "{watchers:?}");
    assert!(!watchers.contains(&theirs.session_id().to_string()));
    drop(cache);
    drop(theirs);
    s.close();
    remove_all(outside, &chroot).await;
    fx.nothing_left().await;
}

/// The sessions `zk`'s one server keeps, by id, as its `dump` lists them.
async fn sessions_on(zk: &Ensemble) -> std::collections::BTreeSet<String> {
    let dump = zk.four_letter(0, "dump").await;
    dump.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| word.starts_with("0x") && *word != "0x0")
        .map(str::to_owned)
        .collect()
}

/// Waits (5 s at most: far less than the sessions' timeout, so that an abandoned session
/// that only expires fails it) until `zk` keeps exactly the sessions `before`.
async fn await_sessions(zk: &Ensemble, before: &std::collections::BTreeSet<String>, what: &str) {
    let settled = tokio::time::timeout(Duration::from_secs(5), async {
        while sessions_on(zk).await != *before {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        settled.is_ok(),
        "{what}: the server keeps {:?}, not {before:?}",
        sessions_on(zk).await
    );
}

/// Starts that fail (the root's children may not be listed) or are cancelled at any point
/// leave no session of the cache's own on the server: each is closed, not left to expire;
/// and so do cancelled connects of a `Session`. (A cache's connect cut off between its
/// request and the server's answer left a session that only expired, a session timeout
/// later.)
#[tokio::test(flavor = "multi_thread")]
async fn failed_and_cancelled_starts_leave_no_session() {
    let zk = Ensemble::start(1).await;
    let lasting = Duration::from_secs(30);
    let fx = Fixture::new(&zk, "cache-start-leak", 1, lasting).await;
    let (root, client, s) = (&fx.root, &fx.observer, &fx.sessions[0]);
    let unreadable = zk_harness::all_but(zookeeper_client::Permission::READ);
    client
        .create(
            root,
            b"",
            &CreateMode::Persistent.with_acls(Acls::new(&unreadable)),
        )
        .await
        .unwrap();
    make(client, &format!("{root}/a"), b"").await;
    let before = sessions_on(&zk).await;
    assert_eq!(before.len(), 2, "{before:?}");
    let refused = Cache::start(s, root).await;
    assert!(matches!(refused, Err(Error::NoAuth { .. })), "{refused:?}");
    await_sessions(&zk, &before, "after a refused start").await;
    // A path that does not exist: an empty cache, started at once when not cancelled.
    let missing = unique_root("cache-start-missing");
    for step in 0..30u64 {
        let start = Cache::start(s, &missing);
        drop(tokio::time::timeout(Duration::from_millis(step * 3), start).await);
    }
    await_sessions(&zk, &before, "after cancelled starts").await;
    // The same for the connect of a `Session`, which dials the same way.
    for step in 0..30u64 {
        let connect = Session::builder()
            .session_timeout(lasting)
            .connect(&fx.hosts);
        drop(tokio::time::timeout(Duration::from_millis(step * 3), connect).await);
    }
    await_sessions(&zk, &before, "after cancelled connects").await;
    client.delete(&format!("{root}/a"), None).await.unwrap();
    client.delete(root, None).await.unwrap();
    fx.nothing_left().await;
}
