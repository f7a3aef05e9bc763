//! A counting probe for the client-CPU work (issue #34, point 8): one side, one workload,
//! a fixed number of acquisitions, and nothing else in the process once the server runs,
//! so that a run under valgrind's callgrind counts that side's instructions. Time on a
//! shared machine moves by ±20 %; counts do not. Two runs of different lengths, subtracted,
//! give the count per acquisition with the start-up left out:
//!
//! ```text
//! cargo bench --bench lock --no-run
//! valgrind --tool=callgrind target/release/deps/lock-* --only probe --probe ours,uncontended,600
//! ```
//!
//! `--probe <ours|peer>,<uncontended|per-key>,<n>`. It prints the heap allocations per
//! acquisition of the measured part (the bench's counting allocator).
//!
//! `--probe <ours|peer>,waiters,<n>` queues `n` waiters behind one holder instead (as the
//! drain does), prints the live heap per waiter once every one has set its watch, and keeps
//! them waiting for `WAITERS_KEPT`, so that a heap profiler can take apart what a waiter
//! keeps (`valgrind --tool=massif`, then `vgdb detailed_snapshot <file>` meanwhile). The side runs on a
//! runtime of one thread of its own (no work stealing between workers; both sides alike);
//! `--only cpu` times the same work on the bench's runtime. The whole process's count
//! still moves by thousands of instructions per acquisition from run to run (the I/O
//! tasks' work follows the wall clock, which valgrind slows); the instructions of the
//! task that awaits `lock()` and `release()` (`callgrind_annotate --inclusive=yes`) move
//! by under 1 %.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::Mutex;

use crate::alloc::Baseline;
use crate::cpu::Usage;
use crate::drain;
use crate::per_key::{Keys, Sessions, Who};
use crate::side::{peer_lock, peer_release, Side, SESSION_TIMEOUT};
use crate::support::{unique_root, Ensemble};
use crate::Opts;

/// Sessions and tasks of the per-key workload (as `cpu`'s and `per_key`'s).
const SESSIONS: usize = 8;
const TASKS: usize = 64;
const KEYS: u64 = 10_000;

/// How long the `waiters` workload keeps its waiters queued once it printed their heap.
const WAITERS_KEPT: Duration = Duration::from_secs(30);

/// What to count: whose, which workload, how many acquisitions (or waiters).
struct Probe {
    side: Side,
    workload: Workload,
    n: usize,
}

#[derive(Clone, Copy)]
enum Workload {
    Uncontended,
    PerKey,
    Waiters,
}

impl Probe {
    fn parse(spec: &str) -> Probe {
        let parts: Vec<&str> = spec.split(',').collect();
        let [side, workload, n] = parts[..] else {
            panic!("--probe <ours|peer>,<uncontended|per-key|waiters>,<n>, not {spec}");
        };
        Probe {
            side: match side {
                "ours" => Side::Ours,
                "peer" => Side::Peer,
                other => panic!("--probe: no side {other}"),
            },
            workload: match workload {
                "uncontended" => Workload::Uncontended,
                "per-key" => Workload::PerKey,
                "waiters" => Workload::Waiters,
                other => panic!("--probe: no workload {other}"),
            },
            n: n.parse().expect("--probe: a number of acquisitions"),
        }
    }
}

pub async fn run(opts: &Opts, zk: &Ensemble) {
    let spec = opts.probe.clone().expect("--only probe needs --probe");
    let probe = Probe::parse(&spec);
    let hosts = zk.address(0);
    if let Workload::Waiters = probe.workload {
        return waiters(probe.side, zk, &hosts, probe.n).await;
    }
    let warmup = opts.warmup;
    let counted = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("probe runtime");
        runtime.block_on(async {
            match probe.workload {
                Workload::PerKey => per_key(probe.side, &hosts, probe.n).await,
                _ => uncontended(probe.side, &hosts, warmup, probe.n).await,
            }
        })
    });
    let allocations = counted.join().expect("probe thread");
    eprintln!("probe {spec}: {allocations:.2} allocations per acquisition");
}

/// `n` cycles on one lock of one session, after `warmup`: allocations per cycle.
async fn uncontended(side: Side, hosts: &str, warmup: usize, n: usize) -> f64 {
    let root = unique_root("probe");
    let conn = side.connect(hosts, SESSION_TIMEOUT).await;
    let lock = conn.lock_on(&root);
    for _ in 0..warmup {
        lock.lock().await.release().await;
    }
    let before = Usage::now();
    for _ in 0..n {
        lock.lock().await.release().await;
    }
    let allocations = Usage::now().per_since(&before, n as f64).allocations;
    conn.close();
    allocations
}

/// `n` acquisitions, a new lock each, by `TASKS` tasks on `SESSIONS` sessions drawing from
/// `KEYS` keys (the keys of `per_key`'s tasks): allocations per acquisition.
async fn per_key(side: Side, hosts: &str, n: usize) -> f64 {
    let who = match side {
        Side::Ours => Who::Ours,
        Side::Peer => Who::Zkc,
    };
    let root = format!("{}/jobs", unique_root("probe-perkey"));
    let sessions = Sessions::connect(who, hosts, SESSIONS).await;
    let claimed = Arc::new(AtomicUsize::new(0));
    let before = Usage::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (claimed, root) = (claimed.clone(), root.clone());
            let mut keys = Keys::new(task, KEYS);
            match &sessions {
                Sessions::Ours(all) => {
                    let session = all[task % all.len()].clone();
                    tokio::spawn(async move {
                        while claimed.fetch_add(1, Ordering::Relaxed) < n {
                            let path = format!("{root}/k{}", keys.next());
                            let mutex = Mutex::new(&session, &path).expect("mutex");
                            let guard = mutex.lock().await.expect("lock");
                            guard.release().await.expect("release");
                        }
                    })
                }
                Sessions::Zkc(all) => {
                    let client = all[task % all.len()].clone();
                    tokio::spawn(async move {
                        while claimed.fetch_add(1, Ordering::Relaxed) < n {
                            let path = format!("{root}/k{}", keys.next());
                            peer_release(peer_lock(&client, &path).await).await;
                        }
                    })
                }
            }
        })
        .collect();
    for task in tasks {
        task.await.expect("probe task");
    }
    let allocations = Usage::now().per_since(&before, n as f64).allocations;
    sessions.close();
    allocations
}

/// `n` waiters of `side` queued behind one holder on the drain's sessions: prints their
/// live heap per waiter once all are queued and have set their watches, then keeps them
/// waiting for `WAITERS_KEPT`.
async fn waiters(side: Side, zk: &Ensemble, hosts: &str, n: usize) {
    let root = unique_root("probe-waiters");
    let shared_root: Arc<str> = Arc::from(root.as_str());
    let holder = side.connect(hosts, SESSION_TIMEOUT).await;
    let holder_lock = holder.lock_on(&root);
    let guard = holder_lock.lock().await;
    let mut conns = Vec::new();
    for _ in 0..drain::SESSIONS {
        conns.push(side.connect(hosts, SESSION_TIMEOUT).await);
    }
    let watches_before = zk.watch_count().await;
    let baseline = Baseline::take();
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..n)
        .map(|i| conns[i % conns.len()].spawn_waiter(&shared_root, &done))
        .collect();
    while zk.watch_count().await < watches_before + n {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Stragglers' last watches, as the drain lets them.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let growth = baseline.growth_per(n);
    eprintln!(
        "probe waiters: {:.0} bytes of live heap per waiter (peak {:.0}), {:.2} KiB RSS, lock() future {} bytes; pid {}; kept {WAITERS_KEPT:?}",
        growth.heap_bytes,
        growth.peak_heap_bytes,
        growth.rss_kib,
        holder.lock_future_bytes(&root),
        std::process::id()
    );
    tokio::time::sleep(WAITERS_KEPT).await;
    for task in &tasks {
        task.abort();
    }
    drop(guard);
    for conn in &conns {
        conn.close();
    }
    holder.close();
}
