//! Per-key locks taken by one task: the first-touch acquisition (the key's path does not
//! exist yet) in round trips, warm cycles with a new `Mutex` per acquisition against one
//! kept per key and against zookeeper-client, server transactions per cycle, and the bytes
//! an idle `Mutex` value costs in a map of 10,000.

use std::collections::HashMap;
use std::time::Instant;

use zk_recipes::Mutex;

use crate::alloc::Baseline;
use crate::per_key::{zxid, Keys, Sessions, Who, CYCLES};
use crate::side::{connect_client, peer_lock, peer_release, SESSION_TIMEOUT};
use crate::support::{unique_root, Ensemble};
use crate::table::{fmt_num, median, micros, Row, Table};
use crate::targets;

/// p50 µs of one round trip (a `get_data`) on a plain client.
async fn round_trip(hosts: &str) -> f64 {
    let client = connect_client(hosts, SESSION_TIMEOUT).await;
    let mut samples = Vec::new();
    for _ in 0..CYCLES {
        let clock = Instant::now();
        client.get_data("/").await.expect("get");
        samples.push(micros(clock.elapsed()));
    }
    median(samples)
}

/// One task, `CYCLES` acquisitions of keys never touched before: p50 µs of the
/// acquisition alone, and the median of server transactions per cycle (acquire and
/// release; the median leaves out the server's reaping of empty containers meanwhile).
async fn first_touch(who: Who, zk: &Ensemble, hosts: &str) -> (f64, f64) {
    let root = format!("{}/jobs", unique_root("touch"));
    let sessions = Sessions::connect(who, hosts, 1).await;
    let (mut lat, mut txns) = (Vec::new(), Vec::new());
    for key in 0..CYCLES {
        let path = format!("{root}/k{key}");
        let before = zxid(&zk.address(0)).await;
        let clock = Instant::now();
        match &sessions {
            Sessions::Ours(s) => {
                let guard = Mutex::new(&s[0], &path).expect("mutex").lock().await;
                lat.push(micros(clock.elapsed()));
                guard.expect("lock").release().await.expect("release");
            }
            Sessions::Zkc(c) => {
                let lock = peer_lock(&c[0], &path).await;
                lat.push(micros(clock.elapsed()));
                peer_release(lock).await;
            }
        }
        // The first key also makes the root: count the others.
        if key > 0 {
            txns.push((zxid(&zk.address(0)).await - before) as f64);
        }
    }
    sessions.close();
    (median(lat), median(txns))
}

/// One task on `keys` warm keys: p50 µs per cycle with a new `Mutex` per acquisition and
/// with one kept per key, and the median of server transactions per cycle.
async fn warm_cycles(hosts: &str, zk: &Ensemble, keys: u64) -> (f64, f64, f64) {
    let root = format!("{}/jobs", unique_root("warm"));
    let session = crate::support::session(hosts, SESSION_TIMEOUT).await;
    let kept: HashMap<u64, Mutex> = (0..keys)
        .map(|k| {
            (
                k,
                Mutex::new(&session, &format!("{root}/k{k}")).expect("mutex"),
            )
        })
        .collect();
    for mutex in kept.values() {
        cycle(mutex).await;
    }
    let mut order = Keys::new(0, keys);
    let (mut fresh, mut reused, mut txns) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..CYCLES {
        let key = order.next();
        let before = zxid(&zk.address(0)).await;
        let clock = Instant::now();
        let mutex = Mutex::new(&session, &format!("{root}/k{key}")).expect("mutex");
        cycle(&mutex).await;
        fresh.push(micros(clock.elapsed()));
        txns.push((zxid(&zk.address(0)).await - before) as f64);
        let clock = Instant::now();
        cycle(&kept[&key]).await;
        reused.push(micros(clock.elapsed()));
    }
    session.close();
    (median(fresh), median(reused), median(txns))
}

/// One lock and release of `mutex`.
async fn cycle(mutex: &Mutex) {
    let guard = mutex.lock().await.expect("lock");
    guard.release().await.expect("release");
}

/// zookeeper-client on `keys` warm keys, one task: p50 µs per cycle and the median of
/// server transactions per cycle.
async fn warm_peer(hosts: &str, zk: &Ensemble, keys: u64) -> (f64, f64) {
    let root = format!("{}/jobs", unique_root("warm-peer"));
    let client = connect_client(hosts, SESSION_TIMEOUT).await;
    for key in 0..keys {
        peer_release(peer_lock(&client, &format!("{root}/k{key}")).await).await;
    }
    let mut order = Keys::new(0, keys);
    let (mut cycles, mut txns) = (Vec::new(), Vec::new());
    for _ in 0..CYCLES {
        let path = format!("{root}/k{}", order.next());
        let before = zxid(&zk.address(0)).await;
        let clock = Instant::now();
        peer_release(peer_lock(&client, &path).await).await;
        cycles.push(micros(clock.elapsed()));
        txns.push((zxid(&zk.address(0)).await - before) as f64);
    }
    (median(cycles), median(txns))
}

/// Live heap per idle value in a map of 10,000: ours a `Mutex`, zookeeper-client's the
/// path a user keeps to call `Client::lock` with.
async fn idle_bytes(hosts: &str) -> (f64, f64) {
    const N: u64 = 10_000;
    let session = crate::support::session(hosts, SESSION_TIMEOUT).await;
    let baseline = Baseline::take();
    let ours: HashMap<u64, Mutex> = (0..N)
        .map(|k| {
            (
                k,
                Mutex::new(&session, &format!("/locks/jobs/k{k}")).expect("mutex"),
            )
        })
        .collect();
    let ours_bytes = baseline.growth_per(N as usize).heap_bytes;
    drop(ours);
    let baseline = Baseline::take();
    let paths: HashMap<u64, String> = (0..N).map(|k| (k, format!("/locks/jobs/k{k}"))).collect();
    let peer_bytes = baseline.growth_per(N as usize).heap_bytes;
    drop(paths);
    session.close();
    (ours_bytes, peer_bytes)
}

/// First touch and warm cycles of one task, and the idle value's bytes.
pub async fn run(table: &mut Table, zk: &Ensemble, wire: &str) {
    eprintln!("per-key, one task");
    let rtt = round_trip(wire).await;
    let (ours, ours_txns) = first_touch(Who::Ours, zk, wire).await;
    let (peer, peer_txns) = first_touch(Who::Zkc, zk, wire).await;
    let touch = "per-key first touch (path missing), 1 task, 0.5 ms one way";
    let warm = "per-key, 1 task, 10 warm keys, loopback";
    let metric = "round trips per acquisition (p50 / p50 of one get_data)";
    table.push(
        compared(touch, metric, ours / rtt, peer / rtt).target(targets::first_touch(ours / rtt)),
    );
    let metric = "server transactions per cycle (median zxid advance)";
    table.push(
        compared(touch, metric, ours_txns, peer_txns)
            .target(targets::transactions(ours_txns, peer_txns)),
    );
    let loopback = zk.address(0);
    let (fresh, reused, txns) = warm_cycles(&loopback, zk, 10).await;
    let metric = "p50 µs/cycle: a new Mutex per acquisition (peer: one kept per key)";
    table.push(compared(warm, metric, fresh, reused).target(targets::new_value(fresh / reused)));
    let (peer_cycle, peer_txns) = warm_peer(&loopback, zk, 10).await;
    let metric = "p50 µs/cycle, a new value per acquisition (peer: zookeeper-client)";
    table.push(compared(warm, metric, fresh, peer_cycle));
    let metric = "server transactions per cycle (median zxid advance)";
    table.push(
        compared(warm, metric, txns, peer_txns).target(targets::transactions(txns, peer_txns)),
    );
    let (ours, peer) = idle_bytes(&loopback).await;
    table.push(compared(
        "per-key, 10,000 idle values in a HashMap<u64, _>",
        "live heap bytes per entry (peer: the path String a zookeeper-client user keeps)",
        ours,
        peer,
    ));
}

/// A row of two single numbers and their ratio.
fn compared(scenario: &str, metric: &str, ours: f64, peer: f64) -> Row {
    Row::new(scenario, metric)
        .ours(fmt_num(ours))
        .peer(fmt_num(peer))
        .ratio(ours / peer)
}
