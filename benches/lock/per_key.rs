//! Per-key locks, as services take them: a lock per entity (`<root>/k<key>`), many tasks
//! of one process at once, a new lock value per acquisition. Ours is a new
//! `Mutex::new(&session, "<root>/k<key>")` per acquisition; zookeeper-client's a
//! `Client::lock` with a `LockPrefix` per key; Curator's a new `InterProcessMutex` per key
//! (in the interop peer's JVM). All three in the same run, their order rotating, through
//! a proxy that delays each direction by 0.5 ms and on loopback.
//!
//! Beside each rate: server transactions and requests per acquisition, and on loopback the
//! client CPU per acquisition. The one-task rows are in `per_key_one`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::{Mutex, Session};
use zookeeper_client as zk;

use crate::cpu::{PerAcquisition, Usage};
use crate::delay::DelayProxy;
use crate::side::{connect_client, peer_lock, peer_release, SESSION_TIMEOUT};
use crate::support::peers::Peer;
use crate::support::{four_letter_at, unique_root, Ensemble};
use crate::table::{fmt_num, Reps, Row, Table};
use crate::{targets, Opts};

/// Tasks (Curator: threads) taking locks at once.
const TASKS: usize = 64;
/// The one-way delay of the wire rows.
const ONE_WAY: Duration = Duration::from_micros(500);
/// Cycles of the one-task rows.
pub const CYCLES: usize = 200;

/// Who takes the locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Ours,
    Zkc,
    Curator,
    /// Ours on sessions with `tcp_nodelay(false)` (loopback rows only).
    OursNagle,
}

/// How many sides a run may have.
const SIDES: usize = 4;

impl Who {
    /// The sides in repetition `rep`, each taking each place in turn; on the wire without
    /// [`Who::OursNagle`].
    fn order(rep: usize, wire: bool) -> Vec<Who> {
        let all: &[Who] = match wire {
            true => &[Who::Ours, Who::Zkc, Who::Curator],
            false => &[Who::Ours, Who::Zkc, Who::Curator, Who::OursNagle],
        };
        (0..all.len()).map(|i| all[(i + rep) % all.len()]).collect()
    }
}

/// One workload: how many sessions the tasks share and how many keys they draw from.
#[derive(Clone, Copy)]
pub struct Shape {
    pub sessions: usize,
    pub keys: u64,
}

/// What one run of a workload measured.
struct Rate {
    per_second: f64,
    /// Server transactions per acquisition.
    txns: f64,
    /// Requests the server received per acquisition.
    requests: f64,
    /// Client CPU µs per acquisition (NaN: not measured).
    cpu: f64,
}

/// Acquisitions/s and transactions per acquisition of each side, over the repetitions.
#[derive(Default)]
struct Rates {
    rate: [Reps; SIDES],
    txns: [Reps; SIDES],
    requests: [Reps; SIDES],
    cpu: [Reps; SIDES],
}

impl Rates {
    fn median(&self, who: Who) -> f64 {
        self.rate[who as usize].median()
    }
}

/// The keys' sequence of task `task`: the same for every side (the Curator peer draws
/// with the same xorshift).
pub struct Keys {
    x: u64,
    keys: u64,
}

impl Keys {
    pub fn new(task: usize, keys: u64) -> Keys {
        Keys {
            x: task as u64 + 1,
            keys,
        }
    }

    pub fn next(&mut self) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x % self.keys
    }
}

/// The server's last zxid, read from `srvr` at `address`.
pub async fn zxid(address: &str) -> i64 {
    let out = four_letter_at(address, "srvr").await;
    out.lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .and_then(|hex| i64::from_str_radix(hex.trim(), 16).ok())
        .expect("srvr names the zxid")
}

/// The requests the server has received, read from `srvr` at `address`.
async fn received(address: &str) -> i64 {
    let out = four_letter_at(address, "srvr").await;
    out.lines()
        .find_map(|l| l.strip_prefix("Received: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("srvr names the requests received")
}

/// One side's sessions.
pub enum Sessions {
    Ours(Vec<Session>),
    Zkc(Vec<zk::Client>),
}

impl Sessions {
    pub async fn connect(who: Who, hosts: &str, n: usize) -> Sessions {
        match who {
            Who::Ours | Who::OursNagle => {
                let mut all = Vec::new();
                for _ in 0..n {
                    let session = Session::builder()
                        .session_timeout(SESSION_TIMEOUT)
                        .tcp_nodelay(who == Who::Ours)
                        .connect(hosts)
                        .await
                        .unwrap_or_else(|e| panic!("connect {hosts}: {e}"));
                    all.push(session);
                }
                Sessions::Ours(all)
            }
            _ => {
                let mut all = Vec::new();
                for _ in 0..n {
                    all.push(connect_client(hosts, SESSION_TIMEOUT).await);
                }
                Sessions::Zkc(all)
            }
        }
    }

    pub fn close(self) {
        if let Sessions::Ours(all) = self {
            for session in &all {
                session.close();
            }
        }
    }
}

/// What every task of a run shares: the window, one flag per key that catches a second
/// holder, the count.
struct Window {
    end: Instant,
    held: Vec<AtomicBool>,
    count: AtomicUsize,
}

impl Window {
    /// Counts one acquisition of `key`, panicking if someone else holds it too.
    fn hold(&self, key: u64) {
        let held = &self.held[key as usize];
        assert!(!held.swap(true, Ordering::SeqCst), "two holders of k{key}");
        held.store(false, Ordering::SeqCst);
        self.count.fetch_add(1, Ordering::Relaxed);
    }
}

/// Acquisitions in a window, and its length.
pub struct Counted {
    pub acquisitions: f64,
    pub secs: f64,
    /// This process's CPU and context switches per acquisition (ours and
    /// zookeeper-client only; the client's alone where no delay proxy runs).
    pub usage: Option<PerAcquisition>,
}

/// `TASKS` tasks on ours or zookeeper-client's sessions, a new lock per acquisition.
pub async fn rust_rate(who: Who, hosts: &str, shape: Shape, root: &str, run: Duration) -> Counted {
    let sessions = Sessions::connect(who, hosts, shape.sessions).await;
    let before = Usage::now();
    let start = Instant::now();
    let window = Arc::new(Window {
        end: start + run,
        held: (0..shape.keys).map(|_| AtomicBool::new(false)).collect(),
        count: AtomicUsize::new(0),
    });
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (window, root) = (window.clone(), root.to_owned());
            let mut keys = Keys::new(task, shape.keys);
            match &sessions {
                Sessions::Ours(all) => {
                    let session = all[task % all.len()].clone();
                    tokio::spawn(async move {
                        while Instant::now() < window.end {
                            let key = keys.next();
                            let mutex =
                                Mutex::new(&session, &format!("{root}/k{key}")).expect("mutex");
                            let guard = mutex.lock().await.expect("lock");
                            window.hold(key);
                            guard.release().await.expect("release");
                        }
                    })
                }
                Sessions::Zkc(all) => {
                    let client = all[task % all.len()].clone();
                    tokio::spawn(async move {
                        while Instant::now() < window.end {
                            let key = keys.next();
                            let lock = peer_lock(&client, &format!("{root}/k{key}")).await;
                            window.hold(key);
                            peer_release(lock).await;
                        }
                    })
                }
            }
        })
        .collect();
    for task in tasks {
        task.await.expect("per-key task");
    }
    let secs = start.elapsed().as_secs_f64();
    let acquisitions = window.count.load(Ordering::Relaxed) as f64;
    let usage = Usage::now().per_since(&before, acquisitions);
    sessions.close();
    Counted {
        acquisitions,
        secs,
        usage: Some(usage),
    }
}

/// Curator's rate, from the peer's `<acquisitions> <elapsed ms>`.
async fn curator_rate(
    peer: &mut Peer,
    hosts: &str,
    shape: Shape,
    root: &str,
    run: Duration,
) -> Counted {
    let command = format!(
        "perkey-rate {} {} {TASKS} {} {root} {hosts}",
        run.as_millis(),
        shape.sessions,
        shape.keys
    );
    let reply = peer.call(&command).await;
    let numbers: Vec<f64> = reply
        .split(' ')
        .map(|n| n.parse().expect("a number"))
        .collect();
    Counted {
        acquisitions: numbers[0],
        secs: numbers[1] / 1e3,
        usage: None,
    }
}

/// One run of `who` on a root of its own (so each side touches its keys first as often),
/// with the server's transactions per acquisition.
async fn rate(
    who: Who,
    zk: &Ensemble,
    peer: &mut Peer,
    hosts: &str,
    shape: Shape,
    run: Duration,
) -> Rate {
    let root = format!("{}/jobs", unique_root("perkey"));
    let before = zxid(&zk.address(0)).await;
    let received_before = received(&zk.address(0)).await;
    let counted = match who {
        Who::Curator => curator_rate(peer, hosts, shape, &root, run).await,
        _ => rust_rate(who, hosts, shape, &root, run).await,
    };
    let txns = (zxid(&zk.address(0)).await - before) as f64 / counted.acquisitions;
    let per_second = counted.acquisitions / counted.secs;
    let requests = (received(&zk.address(0)).await - received_before) as f64 / counted.acquisitions;
    let cpu = counted.usage.map_or(f64::NAN, |usage| usage.cpu_us);
    eprintln!(
        "    {who:?}: {per_second:.0}/s, {txns:.2} transactions and {requests:.2} requests per \
         acquisition, client CPU {cpu:.0} µs per acquisition"
    );
    Rate {
        per_second,
        txns,
        requests,
        cpu,
    }
}

async fn measure(
    opts: &Opts,
    zk: &Ensemble,
    peer: &mut Peer,
    (hosts, wire): (&str, bool),
    shape: Shape,
) -> Rates {
    let mut rates = Rates::default();
    for rep in 0..opts.reps {
        for who in Who::order(rep, wire) {
            let r = rate(who, zk, peer, hosts, shape, opts.contended).await;
            rates.rate[who as usize].push(r.per_second);
            rates.txns[who as usize].push(r.txns);
            rates.requests[who as usize].push(r.requests);
            rates.cpu[who as usize].push(r.cpu);
        }
    }
    rates
}

/// The rate rows of one workload: ours against zookeeper-client, ours against Curator.
fn rate_rows(table: &mut Table, label: &str, wire: bool, shape: Shape, rates: &Rates) {
    let scenario = format!(
        "per-key, {TASKS} tasks, {} session{}, {} keys, {label}",
        shape.sessions,
        if shape.sessions == 1 { "" } else { "s" },
        fmt_keys(shape.keys)
    );
    let ours = rates.median(Who::Ours);
    for peer in [Who::Zkc, Who::Curator] {
        let ratio = ours / rates.median(peer);
        let target = targets::per_key(peer == Who::Curator, wire, shape.sessions, ratio);
        let metric = match peer {
            Who::Curator => "acquisitions/s (peer: Curator InterProcessMutex)",
            _ => "acquisitions/s",
        };
        table.push(
            Row::new(&scenario, metric)
                .ours(rates.rate[Who::Ours as usize].cell())
                .peer(rates.rate[peer as usize].cell())
                .ratio(ratio)
                .target(target),
        );
    }
    let load = |who: Who| {
        let i = who as usize;
        format!(
            "{} / {}",
            fmt_num(rates.txns[i].median()),
            fmt_num(rates.requests[i].median())
        )
    };
    table.push(
        Row::new(
            &scenario,
            "server transactions / requests per acquisition (first touches included; \
             peer: zookeeper-client; Curator)",
        )
        .ours(load(Who::Ours))
        .peer(format!("{}; {}", load(Who::Zkc), load(Who::Curator)))
        .ratio(rates.requests[0].median() / rates.requests[1].median()),
    );
    if !wire {
        nagle_rows(table, &scenario, rates);
        let cpu = &rates.cpu;
        table.push(
            Row::new(
                &scenario,
                "client CPU µs per acquisition (peer: zookeeper-client)",
            )
            .ours(cpu[Who::Ours as usize].cell())
            .peer(cpu[Who::Zkc as usize].cell())
            .ratio(cpu[Who::Ours as usize].median() / cpu[Who::Zkc as usize].median()),
        );
    }
}

/// Ours with `tcp_nodelay(false)` against zookeeper-client (which never sets it): what
/// Nagle's gathering of small writes is worth where CPU, not round trips, is the bound.
fn nagle_rows(table: &mut Table, scenario: &str, rates: &Rates) {
    let (nagle, zkc) = (Who::OursNagle as usize, Who::Zkc as usize);
    table.push(
        Row::new(
            scenario,
            "acquisitions/s, ours with tcp_nodelay(false) (peer: zookeeper-client)",
        )
        .ours(rates.rate[nagle].cell())
        .peer(rates.rate[zkc].cell())
        .ratio(rates.rate[nagle].median() / rates.rate[zkc].median()),
    );
    table.push(
        Row::new(
            scenario,
            "client CPU µs per acquisition, ours with tcp_nodelay(false) (peer: zookeeper-client)",
        )
        .ours(rates.cpu[nagle].cell())
        .peer(rates.cpu[zkc].cell())
        .ratio(rates.cpu[nagle].median() / rates.cpu[zkc].median()),
    );
}

fn fmt_keys(keys: u64) -> String {
    if keys >= 10_000 {
        format!("{},{:03}", keys / 1000, keys % 1000)
    } else {
        keys.to_string()
    }
}

pub async fn run(table: &mut Table, opts: &Opts, zk: &Ensemble) {
    let proxy = DelayProxy::start(&zk.address(0), ONE_WAY);
    let mut peer = Peer::curator(zk, "/perkey-peer").await;
    let label = format!("{} ms one way", ONE_WAY.as_secs_f64() * 1e3);
    for (label, wire, hosts) in [
        (label.as_str(), true, proxy.address()),
        ("loopback", false, zk.address(0)),
    ] {
        for sessions in [1, 8] {
            for keys in [10_000, 10] {
                let shape = Shape { sessions, keys };
                eprintln!("per-key, {sessions} sessions, {keys} keys, {label}");
                let rates = measure(opts, zk, &mut peer, (&hosts, wire), shape).await;
                rate_rows(table, label, wire, shape, &rates);
            }
        }
    }
    peer.quit().await;
    crate::per_key_one::run(table, zk, &proxy.address()).await;
}
