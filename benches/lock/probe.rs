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
//! acquisition of the measured part (the bench's counting allocator). The side runs on a
//! runtime of one thread of its own (no work stealing between workers; both sides alike);
//! `--only cpu` times the same work on the bench's runtime. The whole process's count
//! still moves by thousands of instructions per acquisition from run to run (the I/O
//! tasks' work follows the wall clock, which valgrind slows); the instructions of the
//! task that awaits `lock()` and `release()` (`callgrind_annotate --inclusive=yes`) move
//! by under 1 %.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use zk_recipes::Mutex;

use crate::cpu::Usage;
use crate::per_key::{Keys, Sessions, Who};
use crate::side::{peer_lock, peer_release, Side, SESSION_TIMEOUT};
use crate::support::{unique_root, Ensemble};
use crate::Opts;

/// Sessions and tasks of the per-key workload (as `cpu`'s and `per_key`'s).
const SESSIONS: usize = 8;
const TASKS: usize = 64;
const KEYS: u64 = 10_000;

/// What to count: whose, which workload, how many acquisitions.
struct Probe {
    side: Side,
    per_key: bool,
    n: usize,
}

impl Probe {
    fn parse(spec: &str) -> Probe {
        let parts: Vec<&str> = spec.split(',').collect();
        let [side, workload, n] = parts[..] else {
            panic!("--probe <ours|peer>,<uncontended|per-key>,<n>, not {spec}");
        };
        Probe {
            side: match side {
                "ours" => Side::Ours,
                "peer" => Side::Peer,
                other => panic!("--probe: no side {other}"),
            },
            per_key: match workload {
                "uncontended" => false,
                "per-key" => true,
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
    let warmup = opts.warmup;
    let counted = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("probe runtime");
        runtime.block_on(async {
            match probe.per_key {
                false => uncontended(probe.side, &hosts, warmup, probe.n).await,
                true => per_key(probe.side, &hosts, probe.n).await,
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
