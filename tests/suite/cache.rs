//! The cache of a subtree: it loads and follows the servers with one persistent watch on a
//! ZooKeeper session of its own (the watches and sessions read from the servers), reports
//! each change once and in order per node, says it may be stale while cut off, and matches
//! the servers again after a reconnection or an expiry of its session (changes made
//! meanwhile reported); other watches of its `Session` on its root do not deafen it; its
//! session reads as the `Session`'s identity and ends with the cache or the `Session`;
//! `Cache::sync` reads the caller's own writes; bad paths are refused at once; a decision
//! from the cache commits only if what it read is unchanged. Under random writers and
//! every fault at once: `cache/faults.rs`; over TLS: `cache/secure.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use zk_harness::{
    all_but, await_watch, bounded, digest_observer, digest_session, expire_session, live_client,
    session, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::{Cache, CacheState, Change, Error, Mutex, Session, SharedCounter};
use zookeeper_client::{Acls, Client, CreateMode, Permission, Stat};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// What a node is, as compared between the cache and the servers: data, czxid, mzxid,
/// version.
type Seen = (Vec<u8>, i64, i64, i32);

fn seen(data: &[u8], stat: &Stat) -> Seen {
    (data.to_vec(), stat.czxid, stat.mzxid, stat.version)
}

/// The subtree at `root` as the servers hold it, read afresh node by node.
async fn on_servers(client: &Client, root: &str) -> BTreeMap<String, Seen> {
    let mut nodes = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(path) = todo.pop() {
        let Ok((data, stat)) = client.get_data(&path).await else {
            continue;
        };
        nodes.insert(path.clone(), seen(&data, &stat));
        if let Ok(children) = client.list_children(&path).await {
            todo.extend(children.iter().map(|c| format!("{path}/{c}")));
        }
    }
    nodes
}

/// The subtree as the cache holds it.
fn in_cache(cache: &Cache) -> BTreeMap<String, Seen> {
    cache
        .snapshot()
        .iter()
        .map(|node| {
            let data = node.data().expect("readable");
            (node.path().to_owned(), seen(data, node.stat()))
        })
        .collect()
}

/// Makes `path` (persistent) with `data`.
async fn make(client: &Client, path: &str, data: &[u8]) {
    client
        .create(
            path,
            data,
            &CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap_or_else(|err| panic!("create {path}: {err}"));
}

/// Deletes `root` and everything under it.
async fn remove_all(client: &Client, root: &str) {
    let mut order = Vec::new();
    let mut todo = vec![root.to_owned()];
    while let Some(path) = todo.pop() {
        if let Ok(children) = client.list_children(&path).await {
            todo.extend(children.iter().map(|c| format!("{path}/{c}")));
            order.push(path);
        }
    }
    for path in order.iter().rev() {
        let _ = client.delete(path, None).await;
    }
}

/// Makes the marker `root/.marker-N`, waits until the cache holds it, and deletes it: every
/// notification sent before it (of the writes before it) has then been read. Returns when
/// the cache no longer holds it.
async fn barrier(cache: &Cache, client: &Client, root: &str, n: usize) {
    let marker = format!("{root}/.marker-{n}");
    make(client, &marker, b"").await;
    let mut snapshots = cache.snapshots();
    bounded("the cache holds the marker", PATIENCE, async {
        while cache.get(&marker).is_none() {
            snapshots.changed().await.expect("the cache follows");
        }
    })
    .await;
    client.delete(&marker, None).await.expect("delete marker");
    bounded("the cache drops the marker", PATIENCE, async {
        while cache.get(&marker).is_some() {
            snapshots.changed().await.expect("the cache follows");
        }
    })
    .await;
}

/// Records every change the cache reports, to check at the end.
struct ChangeLog {
    task: JoinHandle<Vec<Change>>,
}

impl ChangeLog {
    fn start(cache: &Cache) -> ChangeLog {
        let mut changes = cache.changes();
        let task = tokio::spawn(async move {
            let mut log = Vec::new();
            loop {
                match changes.recv().await {
                    Ok(change) => log.push(change),
                    Err(broadcast::error::RecvError::Closed) => return log,
                    Err(broadcast::error::RecvError::Lagged(n)) => panic!("lagged by {n}"),
                }
            }
        });
        ChangeLog { task }
    }

    /// The changes reported so far (the cache must be dropped first: its channel closes).
    async fn finish(self) -> Vec<Change> {
        bounded("the change log ends", PATIENCE, self.task)
            .await
            .expect("change log task")
    }
}

/// Replays `changes` over `initial` (the cache when they started), checking that each goes
/// from a state to a later one, per node: an update of the node held to a later write, a
/// creation where none is held (of a later node than the last one deleted), a deletion of
/// the very state held; so none is reported twice. Returns where they lead.
fn replay(initial: &BTreeMap<String, Seen>, changes: &[Change]) -> BTreeMap<String, Seen> {
    let mut held = initial.clone();
    let mut last_czxid: BTreeMap<String, i64> = BTreeMap::new();
    for change in changes {
        let node = change.node();
        let path = node.path().to_owned();
        let now = seen(node.data().unwrap_or_default(), node.stat());
        match change {
            Change::Created(_) => {
                assert!(!held.contains_key(&path), "{path} created twice");
                let before = last_czxid.get(&path).copied().unwrap_or(i64::MIN);
                assert!(
                    node.czxid() > before,
                    "{path} created again as an older node"
                );
                held.insert(path, now);
            }
            Change::Updated(_) => {
                let old = held
                    .get(&path)
                    .unwrap_or_else(|| panic!("{path} updated unheld"));
                assert_eq!(old.1, node.czxid(), "{path} updated across nodes");
                assert!(
                    node.mzxid() > old.2,
                    "{path} updated to an older write, or twice"
                );
                held.insert(path, now);
            }
            Change::Deleted(_) => {
                let old = held
                    .remove(&path)
                    .unwrap_or_else(|| panic!("{path} deleted twice"));
                assert_eq!(old, now, "{path} deleted in another state than held");
                last_czxid.insert(path, node.czxid());
            }
            other => panic!("unknown change {other:?}"),
        }
    }
    held
}

/// The sessions the servers keep, as the leader's session tracker lists them (`dump`),
/// with `0x…` ids.
async fn kept_sessions(zk: &Ensemble) -> String {
    let leader = zk.leader().await.expect("a server leads");
    zk.four_letter(leader, "dump").await
}

/// Waits until the servers no longer keep the session `id` (closed, or expired).
async fn await_session_gone(zk: &Ensemble, id: &str) {
    bounded("the servers let the session go", PATIENCE, async {
        while kept_sessions(zk).await.contains(id) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// The one session that watches `root` (waited for): the cache's, if it is the one
/// watcher.
async fn the_watcher(zk: &Ensemble, root: &str) -> String {
    let watchers = bounded("someone watches the root", PATIENCE, async {
        loop {
            let watchers = zk.watchers(root).await;
            if !watchers.is_empty() {
                return watchers;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(watchers.len(), 1, "watchers of {root}: {watchers:?}");
    watchers.into_iter().next().unwrap_or_default()
}

/// Waits until the servers list one watcher of `root`, and no watch on any node under it:
/// one persistent watch, not one per node; and that watcher is a session of the cache's
/// own, which the servers keep, not `session`'s. Returns its id.
async fn one_watch(zk: &Ensemble, root: &str, session: &Session) -> String {
    let who = the_watcher(zk, root).await;
    let theirs = bounded("the session is live", PATIENCE, async {
        loop {
            match session.client() {
                Some(client) => return client.session_id().to_string(),
                None => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await;
    assert_ne!(who, theirs, "the cache watches on its own session");
    assert!(
        kept_sessions(zk).await.contains(&who),
        "the servers keep the cache's session {who}"
    );
    assert!(
        zk.watched_under(root).await.is_empty(),
        "no watch under {root}: {:?}",
        zk.watched_under(root).await
    );
    who
}

#[tokio::test(flavor = "multi_thread")]
async fn loads_follows_and_reports_each_change_once_with_one_watch() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache", 1, SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    make(client, root, b"root").await;
    for i in 0..20 {
        make(client, &format!("{root}/n{i}"), format!("{i}").as_bytes()).await;
        make(client, &format!("{root}/n{i}/c"), b"child").await;
    }
    let cache = Cache::start(&fx.sessions[0], root).await.unwrap();
    assert_eq!(cache.state(), CacheState::Synced);
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    assert_eq!(cache.snapshot().len(), 41);
    let names: Vec<_> = cache
        .children(&format!("{root}/n1"))
        .iter()
        .map(|n| n.path().to_owned())
        .collect();
    assert_eq!(names, [format!("{root}/n1/c")]);
    assert_eq!(cache.children(root).len(), 20);
    let own = one_watch(zk, root, &fx.sessions[0]).await;

    let log = ChangeLog::start(&cache);
    let loaded = in_cache(&cache);
    let before = cache.snapshot();
    client
        .set_data(&format!("{root}/n0"), b"x", None)
        .await
        .unwrap();
    client
        .set_data(&format!("{root}/n0"), b"y", None)
        .await
        .unwrap();
    client.delete(&format!("{root}/n1/c"), None).await.unwrap();
    client.delete(&format!("{root}/n2/c"), None).await.unwrap();
    make(client, &format!("{root}/n2/c"), b"again").await;
    make(client, &format!("{root}/n3/c/deep"), b"deep").await;
    barrier(&cache, client, root, 0).await;
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    assert_eq!(before.len(), 41, "a snapshot taken before is untouched");
    assert_eq!(
        cache.get(&format!("{root}/n0")).unwrap().data(),
        Some(&b"y"[..])
    );
    assert_eq!(one_watch(zk, root, &fx.sessions[0]).await, own);

    let now = in_cache(&cache);
    drop(cache);
    let changes = log.finish().await;
    let paths: Vec<_> = changes.iter().map(|c| c.path().to_owned()).collect();
    assert!(
        !paths.contains(&format!("{root}/n5")),
        "untouched nodes are not reported"
    );
    assert_eq!(replay(&loaded, &changes), now);
    let n2 = format!("{root}/n2/c");
    let of_n2: Vec<_> = changes.iter().filter(|c| c.path() == n2).collect();
    assert!(
        matches!(of_n2[..], [Change::Deleted(_), Change::Created(_)]),
        "deleted and made again: {of_n2:?}"
    );
    remove_all(client, root).await;
    fx.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_path_is_refused_at_once_and_a_missing_one_fills_when_made() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-missing", 1, SESSION_TIMEOUT).await;
    let s = &fx.sessions[0];
    for bad in [
        "",
        "relative",
        "/trailing/",
        "/a//b",
        "/zookeeper/quota",
        "/",
    ] {
        let started = bounded(
            "a bad path is refused",
            Duration::from_secs(1),
            Cache::start(s, bad),
        )
        .await;
        assert!(
            matches!(started, Err(Error::InvalidPath { .. })),
            "{bad:?}: {started:?}"
        );
    }
    let (root, client) = (&fx.root, &fx.observer);
    let cache = Cache::start(s, root).await.unwrap();
    assert!(cache.snapshot().is_empty());
    assert_eq!(cache.state(), CacheState::Synced);
    make(client, root, b"").await;
    make(client, &format!("{root}/a"), b"1").await;
    barrier(&cache, client, root, 0).await;
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    drop(cache);
    remove_all(client, root).await;
    fx.nothing_left().await;
}

/// A fixture with no recipe session of its own, a proxy to the one server, a session
/// through it (of `timeout`), and the root made.
async fn cut_off_able(
    zk: &Ensemble,
    name: &str,
    timeout: Duration,
) -> (Fixture, zk_harness::Proxy, Session) {
    let fx = Fixture::new(zk, name, 0, SESSION_TIMEOUT).await;
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), timeout).await;
    make(&fx.observer, &fx.root, b"").await;
    (fx, proxy, s)
}

/// Drops the cache, checks that its changes led from `loaded` to what it held last, and
/// leaves nothing behind; returns the changes.
async fn finish(
    fx: Fixture,
    cache: Cache,
    log: ChangeLog,
    loaded: &BTreeMap<String, Seen>,
) -> Vec<Change> {
    let now = in_cache(&cache);
    drop(cache);
    let changes = log.finish().await;
    assert_eq!(
        &replay(loaded, &changes),
        &now,
        "the changes lead to what it holds"
    );
    remove_all(&fx.observer, &fx.root).await;
    fx.nothing_left().await;
    changes
}

/// A cache whose session is closed says so, keeps what it held readable, and fails waits
/// for it to be synced with `Error::Closed`; the servers no longer keep its own session.
#[tokio::test(flavor = "multi_thread")]
async fn a_closed_session_closes_the_cache() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-closed", 0, SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let s = session(&fx.hosts, SESSION_TIMEOUT).await;
    make(client, root, b"kept").await;
    let cache = Cache::start(&s, root).await.unwrap();
    let own = one_watch(zk, root, &s).await;
    s.close().await;
    await_watch("closed", &mut cache.states(), |state| {
        matches!(state, CacheState::Closed { .. })
    })
    .await;
    await_session_gone(zk, &own).await;
    assert!(matches!(cache.synced().await, Err(Error::Closed)));
    assert!(matches!(cache.sync().await, Err(Error::Closed)));
    assert!(matches!(
        cache.snapshots().changed().await,
        Err(Error::Closed)
    ));
    assert_eq!(cache.get(root).unwrap().data(), Some(&b"kept"[..]));
    drop(cache);
    remove_all(client, root).await;
    fx.nothing_left().await;
}

/// Cuts the cache's connection until its client notices; the cache must say it may be
/// stale, and keep answering reads from what it held.
async fn cut_until_stale(cache: &Cache, proxy: &zk_harness::Proxy) {
    proxy.cut();
    await_watch(
        "the cache says it may be stale",
        &mut cache.states(),
        |state| matches!(state, CacheState::Stale { .. }),
    )
    .await;
}

/// The test that fails without the resync: changes made while the cache was cut off
/// (a node made, one written, one deleted, one deleted and made again) are in the cache,
/// and reported once each, after the reconnection; and changes after it are followed (the
/// watch was set again: zookeeper-client does not set a persistent watch again itself).
#[tokio::test(flavor = "multi_thread")]
async fn changes_made_while_cut_off_are_reported_after_the_reconnection() {
    let zk = Ensemble::shared(1).await;
    let (fx, proxy, cut) = cut_off_able(zk, "cache-cut", SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root.clone(), &fx.observer.clone());
    for name in ["written", "deleted", "again"] {
        make(client, &format!("{root}/{name}"), b"0").await;
    }
    let cache = Cache::start(&cut, root).await.unwrap();
    let log = ChangeLog::start(&cache);
    let held = in_cache(&cache);

    cut_until_stale(&cache, &proxy).await;
    let CacheState::Stale { since } = cache.state() else {
        unreachable!()
    };
    assert!(since.elapsed() < PATIENCE);
    make(client, &format!("{root}/made"), b"new").await;
    client
        .set_data(&format!("{root}/written"), b"1", None)
        .await
        .unwrap();
    client
        .delete(&format!("{root}/deleted"), None)
        .await
        .unwrap();
    client.delete(&format!("{root}/again"), None).await.unwrap();
    make(client, &format!("{root}/again"), b"0").await;
    assert_eq!(in_cache(&cache), held, "reads answer from what it held");
    assert!(matches!(cache.state(), CacheState::Stale { .. }));
    // A sync asked for while cut off returns once the cache read everything again.
    let syncing = tokio::spawn({
        let cache = cache.clone();
        async move { cache.sync().await }
    });
    assert_eq!(cache.get(&format!("{root}/made")), None);
    assert!(!syncing.is_finished(), "no sync while cut off");

    proxy.restore();
    bounded("synced again", PATIENCE, syncing)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cache.state(), CacheState::Synced);
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    // Followed after the reconnection: the watch is set again.
    make(client, &format!("{root}/after"), b"").await;
    barrier(&cache, client, root, 0).await;
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    one_watch(zk, root, &cut).await;

    let changes = finish(fx, cache, log, &held).await;
    let mut kinds: Vec<(String, &str)> = changes
        .iter()
        .filter(|c| !c.path().contains(".marker"))
        .map(|c| {
            let kind = match c {
                Change::Created(_) => "created",
                Change::Updated(_) => "updated",
                Change::Deleted(_) => "deleted",
                _ => "other",
            };
            (c.path().trim_start_matches(root.as_str()).to_owned(), kind)
        })
        .collect();
    kinds.sort();
    let expected = [
        ("/after", "created"),
        ("/again", "created"),
        ("/again", "deleted"),
        ("/deleted", "deleted"),
        ("/made", "created"),
        ("/written", "updated"),
    ];
    assert_eq!(kinds, expected.map(|(p, k)| (p.to_owned(), k)));
    cut.close();
}

/// How long the sessions of the expiry test last: short, for the cache's session to expire
/// while it is cut off.
const EXPIRING: Duration = Duration::from_secs(2);

/// The caller's session expiring does not concern the cache (it stays synced, on the same
/// session of its own, and follows). After the cache's own session expired, the cache
/// follows on a new one of its own: it says it may be stale meanwhile, reads everything
/// again, and its one watch is the new session's.
#[tokio::test(flavor = "multi_thread")]
async fn after_its_session_expired_the_cache_follows_on_a_new_one() {
    let zk = Ensemble::shared(1).await;
    let (fx, proxy, s) = cut_off_able(zk, "cache-expiry", EXPIRING).await;
    let (root, client) = (&fx.root.clone(), &fx.observer.clone());
    make(client, &format!("{root}/a"), b"0").await;
    let cache = Cache::start(&s, root).await.unwrap();
    let log = ChangeLog::start(&cache);
    let loaded = in_cache(&cache);
    let first = one_watch(zk, root, &s).await;

    let states = cache.states();
    let old = live_client(&s);
    expire_session(&fx.hosts, old.session()).await;
    drop(old);
    client
        .set_data(&format!("{root}/a"), b"1", None)
        .await
        .unwrap();
    barrier(&cache, client, root, 0).await;
    assert!(
        !states.has_changed().unwrap(),
        "the caller's session expiring leaves the cache synced: {:?}",
        cache.state()
    );
    assert_eq!(the_watcher(zk, root).await, first);

    // Cut off until the servers expired the cache's session.
    cut_until_stale(&cache, &proxy).await;
    await_session_gone(zk, &first).await;
    client
        .set_data(&format!("{root}/a"), b"2", None)
        .await
        .unwrap();
    make(client, &format!("{root}/b"), b"").await;
    assert!(matches!(cache.state(), CacheState::Stale { .. }));
    proxy.restore();
    bounded("synced again", PATIENCE, cache.synced())
        .await
        .unwrap();
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    barrier(&cache, client, root, 1).await;
    let second = one_watch(zk, root, &s).await;
    assert_ne!(second, first, "a new session of its own");
    finish(fx, cache, log, &loaded).await;
    await_session_gone(zk, &second).await;
    s.close();
}

/// A decision made from the cache commits, fenced, only while what it read is unchanged:
/// a node written since fails the transaction at its check, and nothing is written.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_decision_commits_only_if_the_nodes_read_are_unchanged() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-fenced", 1, SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let s = &fx.sessions[0];
    let config = format!("{root}/config");
    let decided = format!("{root}/decided");
    make(client, root, b"").await;
    make(client, &config, b"limit=1").await;
    make(client, &decided, b"").await;
    let cache = Cache::start(s, &config).await.unwrap();
    let read = cache.get(&config).unwrap();
    let guard = Mutex::new(s, &format!("{root}/lock"))
        .unwrap()
        .lock()
        .await
        .unwrap();

    guard
        .fenced()
        .unchanged(&read)
        .set_data(&decided, b"1", None)
        .commit()
        .await
        .unwrap();
    client.set_data(&config, b"limit=2", None).await.unwrap();
    let refused = guard
        .fenced()
        .unchanged(&read)
        .set_data(&decided, b"2", None)
        .commit()
        .await;
    assert!(
        matches!(
            &refused,
            Err(Error::FencedOpFailed {
                index: 0,
                reason: zookeeper_client::Error::BadVersion,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(client.get_data(&decided).await.unwrap().0, b"1");
    barrier(&cache, client, &config, 0).await;
    let fresh = cache.get(&config).unwrap();
    assert_eq!(fresh.data(), Some(&b"limit=2"[..]));
    guard
        .fenced()
        .unchanged(&fresh)
        .set_data(&decided, b"2", None)
        .commit()
        .await
        .unwrap();

    guard.release().await.unwrap();
    drop(cache);
    remove_all(client, root).await;
    fx.nothing_left().await;
}

#[path = "cache/faults.rs"]
mod faults;

#[path = "cache/sync.rs"]
mod sync;

#[cfg(feature = "tls")]
#[path = "cache/secure.rs"]
mod secure;

/// Other watches on the cache's own root, set on the cache's `Session`: a one-shot data,
/// exists and children watch of the user's own through `Session::client`, and a
/// `SharedCounter` watching a counter kept in the root node. Each fires; the cache must go
/// on following the subtree. On ZooKeeper 3.8 a session has one watch mode per path
/// (ZOOKEEPER-4466): had the cache watched on its `Session`, the one-shot data watch would
/// replace its persistent recursive one, and the cache would go deaf, still saying it is
/// synced (as it did before it had a session of its own).
#[tokio::test(flavor = "multi_thread")]
async fn another_watch_on_the_root_by_the_same_session_does_not_deafen_the_cache() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-shared-watch", 1, SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let s = &fx.sessions[0];
    make(client, root, &7i32.to_be_bytes()).await;
    let cache = Cache::start(s, root).await.unwrap();
    let own = one_watch(zk, root, s).await;
    let theirs = live_client(s);
    let (_, _, data) = theirs.get_and_watch_data(root).await.unwrap();
    let (_, exists) = theirs.check_and_watch_stat(root).await.unwrap();
    let (_, children) = theirs.list_and_watch_children(root).await.unwrap();
    let mut values = SharedCounter::new(s, root, 0)
        .unwrap()
        .watch()
        .await
        .unwrap();
    assert_eq!(values.borrow().current(), Some(7));
    zk.await_watcher(root, &theirs.session_id().to_string())
        .await;
    make(client, &format!("{root}/a"), b"1").await;
    bounded("the children watch fires", PATIENCE, children.changed()).await;
    barrier(&cache, client, root, 0).await;
    // The one-shot watches fire (the counter's is set again by its keeper).
    client
        .set_data(root, &8i32.to_be_bytes(), None)
        .await
        .unwrap();
    bounded("the data watch fires", PATIENCE, data.changed()).await;
    bounded("the exists watch fires", PATIENCE, exists.changed()).await;
    bounded(
        "the counter reads 8",
        PATIENCE,
        values.wait_for(|v| v.current() == Some(8)),
    )
    .await
    .unwrap();
    make(client, &format!("{root}/b"), b"2").await;
    client
        .set_data(&format!("{root}/a"), b"3", None)
        .await
        .unwrap();
    barrier(&cache, client, root, 1).await;
    assert_eq!(cache.state(), CacheState::Synced);
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    assert_eq!(
        zk.watchers(root)
            .await
            .into_iter()
            .filter(|w| *w == own)
            .count(),
        1,
        "the cache's watch is still set"
    );
    drop(values);
    drop(theirs);
    drop(cache);
    remove_all(client, root).await;
    fx.nothing_left().await;
}

/// Read your writes: a write through the cache's own `Session`, then `Cache::sync`, and
/// the cache holds it (and has reported it), every time, for a node written, made and
/// deleted. Without the sync the cache may still hold the old state: it hears of the
/// write one notification and one read later, on its own session.
#[tokio::test(flavor = "multi_thread")]
async fn after_sync_the_cache_holds_the_callers_own_writes() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-sync", 1, SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let s = &fx.sessions[0];
    make(client, root, b"").await;
    let cache = Cache::start(s, root).await.unwrap();
    let mut changes = cache.changes();
    let theirs = live_client(s);
    let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for i in 0..40 {
        let value = i.to_string();
        let (made, gone) = (format!("{root}/n{i}"), format!("{root}/n{}", i - 1));
        theirs.set_data(root, value.as_bytes(), None).await.unwrap();
        theirs.create(&made, b"", &mode).await.unwrap();
        if i > 0 {
            theirs.delete(&gone, None).await.unwrap();
        }
        bounded("synced", PATIENCE, cache.sync()).await.unwrap();
        let held = cache.get(root).expect("the root");
        assert_eq!(held.data(), Some(value.as_bytes()), "write {i}");
        assert!(cache.get(&made).is_some(), "{made} made");
        assert!(i == 0 || cache.get(&gone).is_none(), "{gone} deleted");
        let mut reported = Vec::new();
        while let Ok(change) = changes.try_recv() {
            reported.push(change.path().to_owned());
        }
        assert!(reported.contains(&made), "{made} reported: {reported:?}");
    }
    drop(theirs);
    drop(cache);
    remove_all(client, root).await;
    fx.nothing_left().await;
}

/// The identity of the node `mine` of the auth test.
const USER: &str = "cache-reader";
const PASSWORD: &str = "cache reader's password";

/// A cache on a session with digest credentials reads what that identity may read, as its
/// own session authenticates the same way: a node only that identity may read is cached
/// with its data, and followed; one that nobody may read, with its stat only.
#[tokio::test(flavor = "multi_thread")]
async fn a_cache_reads_as_its_sessions_identity() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-auth", 0, SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let s = digest_session(&fx.hosts, SESSION_TIMEOUT, USER, PASSWORD).await;
    let owner = digest_observer(&fx.hosts, USER, PASSWORD).await;
    let (mine, sealed) = (format!("{root}/mine"), format!("{root}/sealed"));
    make(client, root, b"").await;
    let only_us = CreateMode::Persistent.with_acls(Acls::creator_all());
    owner.create(&mine, b"secret", &only_us).await.unwrap();
    let unreadable = all_but(Permission::READ);
    let nobody = CreateMode::Persistent.with_acls(Acls::new(&unreadable));
    client.create(&sealed, b"hidden", &nobody).await.unwrap();
    assert!(client.get_data(&mine).await.is_err(), "others may not read");

    let cache = Cache::start(&s, root).await.unwrap();
    assert_eq!(cache.get(&mine).unwrap().data(), Some(&b"secret"[..]));
    let held = cache.get(&sealed).expect("its stat");
    assert_eq!(held.data(), None);
    owner.set_data(&mine, b"changed", None).await.unwrap();
    bounded("synced", PATIENCE, cache.sync()).await.unwrap();
    assert_eq!(cache.get(&mine).unwrap().data(), Some(&b"changed"[..]));

    let own = one_watch(zk, root, &s).await;
    drop(cache);
    await_session_gone(zk, &own).await;
    // Not listed by `remove_all`: deleting needs the right on the parent only.
    for node in [&mine, &sealed] {
        client.delete(node, None).await.unwrap();
    }
    remove_all(client, root).await;
    s.close();
    fx.nothing_left().await;
}

/// The cache's own session ends with its last handle, and only then; the `Session` goes on.
#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_cache_ends_its_session() {
    let zk = Ensemble::shared(1).await;
    let fx = Fixture::new(zk, "cache-dropped", 1, SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let s = &fx.sessions[0];
    make(client, root, b"").await;
    let cache = Cache::start(s, root).await.unwrap();
    let own = one_watch(zk, root, s).await;
    let kept = cache.clone();
    drop(cache);
    make(client, &format!("{root}/a"), b"").await;
    barrier(&kept, client, root, 0).await;
    assert!(kept_sessions(zk).await.contains(&own), "a clone keeps it");
    drop(kept);
    await_session_gone(zk, &own).await;
    let theirs = live_client(s).session_id().to_string();
    assert!(
        kept_sessions(zk).await.contains(&theirs),
        "the Session goes on"
    );
    s.ensure_path(&format!("{root}/b")).await.unwrap();
    remove_all(client, root).await;
    fx.nothing_left().await;
}

/// The cached root itself deleted (with its subtree) and made again, once while connected
/// and once while the cache is cut off: the cache follows the new root (its persistent
/// watch outlives the node), equals the servers after each, and its changes lead there.
#[tokio::test(flavor = "multi_thread")]
async fn a_root_deleted_and_made_again_is_followed() {
    let zk = Ensemble::shared(1).await;
    let (fx, proxy, s) = cut_off_able(zk, "cache-root-again", SESSION_TIMEOUT).await;
    let (root, client) = (&fx.root.clone(), &fx.observer.clone());
    make(client, &format!("{root}/a"), b"1").await;
    make(client, &format!("{root}/a/x"), b"2").await;
    let cache = Cache::start(&s, root).await.unwrap();
    let log = ChangeLog::start(&cache);
    let loaded = in_cache(&cache);

    remove_all(client, root).await;
    make(client, root, b"again").await;
    make(client, &format!("{root}/b"), b"3").await;
    barrier(&cache, client, root, 0).await;
    assert_eq!(in_cache(&cache), on_servers(client, root).await);

    cut_until_stale(&cache, &proxy).await;
    remove_all(client, root).await;
    make(client, root, b"").await;
    make(client, &format!("{root}/a"), b"4").await;
    proxy.restore();
    bounded("synced again", PATIENCE, cache.synced())
        .await
        .unwrap();
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    make(client, &format!("{root}/c"), b"5").await;
    barrier(&cache, client, root, 1).await;
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    one_watch(zk, root, &s).await;
    finish(fx, cache, log, &loaded).await;
    s.close();
}
