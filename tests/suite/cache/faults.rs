//! The cache under writers that create, set and delete at random in its subtree while its
//! connection is cut, frozen, its own session (and its `Session`'s) expired and its server
//! restarted: it says it may be stale during each fault, is synced again after each, and
//! once the writers stop it equals the servers node by node, its changes having told
//! every state it held once, in order per node.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_harness::nemesis::Rng;
use zk_harness::{
    await_watch, bounded, expire_session, live_client, observer, session, Ensemble, Fixture, Proxy,
    PATIENCE,
};
use zk_recipes::{Cache, CacheState, Session, SessionEvent};
use zookeeper_client::{Acls, Client, CreateMode};

use super::{
    await_session_gone, barrier, in_cache, make, on_servers, remove_all, replay, the_watcher,
    ChangeLog,
};

const TIMEOUT: Duration = Duration::from_secs(4);

/// How many writes the writers make during each fault, and between two.
const WRITES: usize = 40;

/// One random write in `root`'s subtree (8 nodes, each with 3 children): a create, a set
/// or a delete; whether the servers took it.
async fn write_once(client: &Client, root: &str, rng: &mut Rng) -> bool {
    let mut path = format!("{root}/k{}", rng.below(8));
    if rng.below(2) == 0 {
        path = format!("{path}/c{}", rng.below(3));
    }
    let data = rng.below(1000).to_string();
    let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
    match rng.below(3) {
        0 => client.create(&path, data.as_bytes(), &mode).await.is_ok(),
        1 => client.set_data(&path, data.as_bytes(), None).await.is_ok(),
        _ => client.delete(&path, None).await.is_ok(),
    }
}

/// Writers on connections of their own, counting the writes the servers took, until
/// `stop`.
fn writers(
    hosts: &str,
    root: &str,
    writes: &Arc<watch::Sender<usize>>,
    stop: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    (1..=3u64)
        .map(|seed| {
            let (hosts, root) = (hosts.to_owned(), root.to_owned());
            let (writes, mut stop) = (writes.clone(), stop.clone());
            tokio::spawn(async move {
                let client = observer(&hosts).await;
                let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                while !*stop.borrow_and_update() {
                    if write_once(&client, &root, &mut rng).await {
                        writes.send_modify(|n| *n += 1);
                    }
                }
            })
        })
        .collect()
}

/// Waits until the writers took `n` more writes.
async fn more_writes(writes: &watch::Sender<usize>, n: usize) {
    let target = *writes.borrow() + n;
    await_watch("the writers write", &mut writes.subscribe(), |&done| {
        done >= target
    })
    .await;
}

async fn await_stale(cache: &Cache, fault: &str) {
    let what = format!("stale after {fault}");
    await_watch(&what, &mut cache.states(), |state| {
        matches!(state, CacheState::Stale { .. })
    })
    .await;
}

/// Does `fault` to the cache's connection, checks that the cache says it may be stale
/// while writes go on, and lets the connection back.
async fn fault(
    fault: &str,
    zk: &Ensemble,
    proxy: &Proxy,
    s: &Session,
    cache: &Cache,
    writes: &watch::Sender<usize>,
) {
    match fault {
        "cut" => proxy.cut(),
        "freeze" => proxy.freeze(),
        // Cut first, so that the cache is stale until the proxy lets the connection back
        // (else the new session may be made before anyone looks). The `Session`'s session
        // is expired at once; the cache's own one, cut off, by the servers after its
        // timeout.
        "expire" => {
            // The cache synced on a session of its own: the `Session`'s may still be
            // renewing after the fault before (a freeze past its timeout).
            await_watch("the session is live", &mut s.events(), |event| {
                matches!(event, SessionEvent::Connected | SessionEvent::Reconnected)
            })
            .await;
            let own = the_watcher(zk, cache.path()).await;
            proxy.cut();
            let client = live_client(s);
            expire_session(&zk.connect_string(), client.session()).await;
            await_session_gone(zk, &own).await;
        }
        // Killed now, started again below: the cache stays stale until it is back.
        "restart" => zk.kill(0),
        other => panic!("no fault {other}"),
    }
    await_stale(cache, fault).await;
    let CacheState::Stale { since } = cache.state() else {
        panic!(
            "{fault}: stale, then {:?} before the connection is back",
            cache.state()
        );
    };
    assert!(since.elapsed() < PATIENCE);
    more_writes(writes, WRITES).await;
    if fault == "restart" {
        zk.restart(0).await;
    }
    proxy.restore();
    let what = format!("synced after {fault}");
    bounded(&what, PATIENCE, cache.synced())
        .await
        .expect("synced again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_random_writers_and_every_fault_the_cache_ends_equal_to_the_servers() {
    let zk = Ensemble::start(3).await;
    let fx = Fixture::new(&zk, "cache-faults", 0, TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), TIMEOUT).await;
    make(client, root, b"").await;
    let cache = Cache::start(&s, root).await.unwrap();
    let log = ChangeLog::start(&cache);
    let loaded = in_cache(&cache);

    let writes = Arc::new(watch::channel(0).0);
    let (stop, stopped) = watch::channel(false);
    let tasks = writers(&fx.hosts, root, &writes, &stopped);
    for round in 0..2 {
        for what in ["cut", "freeze", "expire", "restart"] {
            more_writes(&writes, WRITES).await;
            fault(what, &zk, &proxy, &s, &cache, &writes).await;
            eprintln!("round {round}: {what} done, {} writes", *writes.borrow());
        }
    }
    stop.send_replace(true);
    for task in tasks {
        bounded("a writer stops", PATIENCE, task).await.unwrap();
    }

    bounded("synced", PATIENCE, cache.synced()).await.unwrap();
    barrier(&cache, client, root, 0).await;
    let held = in_cache(&cache);
    assert_eq!(
        held,
        on_servers(client, root).await,
        "the cache equals the servers"
    );
    assert!(
        held.len() > 1,
        "the writers left nodes to compare: {held:?}"
    );
    drop(cache);
    let changes = log.finish().await;
    assert_eq!(
        replay(&loaded, &changes),
        held,
        "the changes lead to what it holds"
    );
    eprintln!(
        "{} writes, {} changes reported",
        *writes.borrow(),
        changes.len()
    );
    remove_all(client, root).await;
    s.close();
    fx.nothing_left().await;
}
