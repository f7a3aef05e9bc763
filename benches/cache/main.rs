//! Cache benchmark: zk-recipes' `Cache` against Curator's `CuratorCache` (a Java peer), in
//! the same run, on one real standalone ZooKeeper server: a subtree of 100 parents with
//! N/100 children each (16 bytes of data per node, paths of about 35 bytes).
//!
//! `cargo bench --bench cache` (N = 100,000; `-- --nodes N` for another size, `-- --quick`
//! for 10,000). Its results: `benches/README.md`.
//!
//! * **Load**: from the start of the cache to the moment it holds the whole subtree
//!   (`Cache::start` returning; for Curator, its `size()` polled every 100 ms until it
//!   counts every node, since its `initialized()` event may come before: its time is a row
//!   of its own; a cache still short of nodes a minute after that is reported as such).
//! * **Resync** (ours only): the cache's connection cut through a proxy until it says it
//!   may be stale, then let back: from the restore to `Synced` (the reconnection included,
//!   and a full walk of the subtree). Curator's cache rebuilds after a reconnection too,
//!   but tells no end of it: it has no row.
//! * **Memory per cached node**: ours, the growth of the live heap (a counting allocator)
//!   over the load, divided by the nodes cached; Curator's, the growth of the JVM's heap in
//!   use after full collections, divided likewise.

#[path = "../lock/alloc.rs"]
#[allow(dead_code)]
mod alloc;

use std::time::{Duration, Instant};

use zk_harness::peers::Peer;
use zk_harness::{observer, session, unique_root, Ensemble};
use zk_recipes::{Cache, CacheState};
use zookeeper_client::{Acls, Client, CreateMode};

const PARENTS: usize = 100;
const WINDOW: usize = 1000;

/// How long Curator's cache is given, after its `initialized()` event, to hold every node.
const COMPLETE_WITHIN: Duration = Duration::from_secs(60);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = match args.iter().position(|a| a == "--nodes") {
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(100_000),
        None if args.iter().any(|a| a == "--quick") => 10_000,
        None => 100_000,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(nodes));
}

/// What one side measured.
struct Measured {
    load: Duration,
    cached: usize,
    bytes_per_node: f64,
}

async fn run(nodes: usize) {
    let zk = Ensemble::start(1).await;
    let root = unique_root("bench-cache");
    let client = observer(&zk.connect_string()).await;
    let started = Instant::now();
    let leaves = populate(&client, &root, nodes).await;
    eprintln!("made {} nodes in {:?}", leaves.len(), started.elapsed());

    let (ours, resync) = ours(&zk, &root).await;
    let (curator, initialized) = curator(&zk, &root, ours.cached).await;

    println!(
        "\n{} nodes cached ({PARENTS} parents), one standalone server on loopback\n",
        ours.cached
    );
    println!("| measure | zk-recipes `Cache` | Curator `CuratorCache` | ratio (ours / Curator) |");
    println!("|---|---|---|---|");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    if curator.cached == ours.cached {
        println!(
            "| load (until the whole subtree is held) | {:.0} ms | {:.0} ms | {:.2} |",
            ms(ours.load),
            ms(curator.load),
            ms(ours.load) / ms(curator.load)
        );
    } else {
        println!(
            "| load (until the whole subtree is held) | {:.0} ms | never: {} of {} nodes {:.0} ms after the start | |",
            ms(ours.load),
            curator.cached,
            ours.cached,
            ms(curator.load)
        );
    }
    println!(
        "| Curator's `initialized()` event | | {:.0} ms | |",
        ms(initialized)
    );
    println!(
        "| heap per cached node | {:.0} B | {:.0} B | {:.2} |",
        ours.bytes_per_node,
        curator.bytes_per_node,
        ours.bytes_per_node / curator.bytes_per_node
    );
    println!(
        "| resync after a reconnection | {:.0} ms | (no end told) | |",
        ms(resync)
    );

    remove(&client, &root, leaves).await;
}

/// Our cache of `root`, on a session through a proxy: its load and memory, then a resync
/// after a cut.
async fn ours(zk: &Ensemble, root: &str) -> (Measured, Duration) {
    let proxy = zk.proxy(0).await;
    let s = session(&proxy.address(), Duration::from_secs(10)).await;
    let baseline = alloc::Baseline::take();
    let started = Instant::now();
    let cache = Cache::start(&s, root).await.expect("our cache loads");
    let load = started.elapsed();
    let cached = cache.snapshot().len();
    let growth = baseline.growth_per(cached);
    eprintln!("ours: loaded in {load:?}; {growth:?} per node");

    proxy.cut();
    let mut states = cache.states();
    let stale = states.wait_for(|state| matches!(state, CacheState::Stale { .. }));
    tokio::time::timeout(Duration::from_secs(30), stale)
        .await
        .expect("stale within 30 s")
        .expect("the cache runs");
    let restored = Instant::now();
    proxy.restore();
    tokio::time::timeout(Duration::from_secs(600), cache.synced())
        .await
        .expect("synced again within 600 s")
        .expect("the cache runs");
    let resync = restored.elapsed();
    assert_eq!(cache.snapshot().len(), cached);
    drop(cache);
    s.close().await;
    let measured = Measured {
        load,
        cached,
        bytes_per_node: growth.heap_bytes,
    };
    (measured, resync)
}

/// Curator's cache of `root`, in its own JVM: its load (until its `initialized()` event,
/// and until it holds all `expected` nodes) and memory.
async fn curator(zk: &Ensemble, root: &str, expected: usize) -> (Measured, Duration) {
    let mut peer = Peer::curator_cache(zk, root).await;
    let before = number(&peer.call("heap").await);
    let loaded = peer.call("load").await;
    let (ms, cached) = two_numbers(&loaded);
    let initialized = Duration::from_millis(ms as u64);
    eprintln!("curator: initialized() with {cached} nodes in {initialized:?}");
    let (mut cached, mut ms) = (cached as usize, ms);
    let deadline = Instant::now() + COMPLETE_WITHIN;
    while cached < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (now, at) = two_numbers(&peer.call("size").await);
        (cached, ms) = (now as usize, at);
    }
    let complete = Duration::from_millis(ms as u64);
    eprintln!("curator: {cached} nodes after {complete:?}");
    let after = number(&peer.call("heap").await);
    peer.quit().await;
    let measured = Measured {
        load: complete,
        cached,
        bytes_per_node: (after - before) / cached as f64,
    };
    (measured, initialized)
}

fn number(reply: &str) -> f64 {
    reply.parse().expect("a number")
}

fn two_numbers(reply: &str) -> (f64, f64) {
    let (a, b) = reply.split_once(' ').expect("two numbers");
    (number(a), number(b))
}

/// Makes `root`, [`PARENTS`] parents and `nodes` leaves under them (creates sent
/// [`WINDOW`] at a time); returns the leaves and parents, to remove.
async fn populate(client: &Client, root: &str, nodes: usize) -> Vec<String> {
    let mode = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let data = [7u8; 16];
    client
        .create(root, &data, &mode)
        .await
        .expect("create root");
    let parents: Vec<String> = (0..PARENTS).map(|p| format!("{root}/p{p:03}")).collect();
    let leaves: Vec<String> = (0..nodes)
        .map(|i| format!("{}/n{:06}", parents[i % PARENTS], i / PARENTS))
        .collect();
    for batch in [&parents, &leaves] {
        for chunk in batch.chunks(WINDOW) {
            let sent: Vec<_> = chunk
                .iter()
                .map(|path| client.create(path, &data, &mode))
                .collect();
            for reply in sent {
                reply.await.expect("create");
            }
        }
    }
    leaves.into_iter().chain(parents).collect()
}

/// Deletes `nodes` (leaves before parents), then `root`.
async fn remove(client: &Client, root: &str, nodes: Vec<String>) {
    for chunk in nodes.chunks(WINDOW) {
        let sent: Vec<_> = chunk.iter().map(|path| client.delete(path, None)).collect();
        for reply in sent {
            reply.await.expect("delete");
        }
    }
    client.delete(root, None).await.expect("delete root");
}
