//! Client CPU per acquisition (issue #34, point 8): the user and system time of the bench
//! process (`getrusage(RUSAGE_SELF)`, every thread) over a window in which only one side's
//! client runs in it, divided by the acquisitions in the window. The servers are JVMs of
//! their own, and these windows use no delay proxy (which runs in the bench process), so
//! the process's time is the client's: the side's own code, its tokio tasks, the runtime's
//! thread wake-ups and the socket calls.
//!
//! Two workloads, each side in turn, same run, same standalone server on loopback:
//! uncontended (one session takes and releases one lock in a loop) and per-key (64 tasks
//! on 8 sessions, 10,000 keys, a new lock per acquisition: `per_key`'s workload). Beside
//! the time, what it is made of: context switches per acquisition (voluntary: a thread that
//! parks to wait for work; involuntary: one preempted), the tokio workers' parks, and the
//! heap allocations (the bench's counting allocator). CPU time is what a loaded machine
//! disturbs most, so these rows take more repetitions than the others.

use std::time::{Duration, Instant};

use crate::per_key::{self, Shape, Who};
use crate::side::{PerSide, Side, SESSION_TIMEOUT};
use crate::support::{unique_root, Ensemble};
use crate::table::{fmt_num, Reps, Row, Table};
use crate::{targets, Opts};

/// Timed lock cycles per uncontended window, as a multiple of `Opts::cycles`: the window
/// then lasts about a second on loopback.
const UNCONTENDED_SCALE: usize = 2;
/// Repetitions of each side: CPU time varies more from window to window than latency.
fn reps(opts: &Opts) -> usize {
    2 * opts.reps + 1
}

/// The per-key workload of the issue.
const PER_KEY: Shape = Shape {
    sessions: 8,
    keys: 10_000,
};

/// What the process used up to a moment: CPU time and context switches, of every thread.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    cpu: Duration,
    voluntary: i64,
    involuntary: i64,
    /// Times the runtime's workers parked (went to sleep for want of work).
    parks: u64,
    /// Heap allocations made (the bench's counting allocator).
    allocations: usize,
}

impl Usage {
    /// This process's usage so far.
    pub fn now() -> Usage {
        // SAFETY: getrusage writes into the struct it is given, nothing else.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut usage);
            usage
        };
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Usage {
            cpu: time(usage.ru_utime) + time(usage.ru_stime),
            voluntary: usage.ru_nvcsw,
            involuntary: usage.ru_nivcsw,
            parks: worker_parks(),
            allocations: crate::alloc::allocations(),
        }
    }

    /// What was used since `earlier`, per one of `n` acquisitions.
    pub fn per_since(&self, earlier: &Usage, n: f64) -> PerAcquisition {
        PerAcquisition {
            cpu_us: (self.cpu.saturating_sub(earlier.cpu)).as_secs_f64() * 1e6 / n,
            voluntary: (self.voluntary - earlier.voluntary) as f64 / n,
            involuntary: (self.involuntary - earlier.involuntary) as f64 / n,
            parks: self.parks.saturating_sub(earlier.parks) as f64 / n,
            allocations: self.allocations.saturating_sub(earlier.allocations) as f64 / n,
        }
    }
}

/// Parks of the current runtime's workers so far (0 outside a runtime).
fn worker_parks() -> u64 {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return 0;
    };
    let metrics = runtime.metrics();
    (0..metrics.num_workers())
        .map(|worker| metrics.worker_park_count(worker))
        .sum()
}

/// Usage per acquisition over one window.
#[derive(Clone, Copy, Debug)]
pub struct PerAcquisition {
    /// User + system CPU µs.
    pub cpu_us: f64,
    pub voluntary: f64,
    pub involuntary: f64,
    pub parks: f64,
    pub allocations: f64,
}

/// One side's windows over the repetitions.
#[derive(Default)]
struct Windows {
    cpu: Reps,
    voluntary: Reps,
    involuntary: Reps,
    parks: Reps,
    allocations: Reps,
}

impl Windows {
    fn push(&mut self, per: PerAcquisition) {
        self.cpu.push(per.cpu_us);
        self.voluntary.push(per.voluntary);
        self.involuntary.push(per.involuntary);
        self.parks.push(per.parks);
        self.allocations.push(per.allocations);
    }

    /// Context switches (voluntary / involuntary) and worker parks, medians.
    fn switches(&self) -> String {
        format!(
            "{} / {}; {}",
            fmt_num(self.voluntary.median()),
            fmt_num(self.involuntary.median()),
            fmt_num(self.parks.median())
        )
    }
}

/// One lock cycle after another on one session of `side`: usage per cycle over `cycles`
/// timed ones, after `warmup` untimed.
async fn uncontended(side: Side, hosts: &str, warmup: usize, cycles: usize) -> PerAcquisition {
    let root = unique_root("cpu");
    let conn = side.connect(hosts, SESSION_TIMEOUT).await;
    let lock = conn.lock_on(&root);
    for _ in 0..warmup {
        lock.lock().await.release().await;
    }
    let before = Usage::now();
    for _ in 0..cycles {
        lock.lock().await.release().await;
    }
    let per = Usage::now().per_since(&before, cycles as f64);
    conn.close();
    per
}

/// One per-key window of `who` on a root of its own: usage per acquisition.
async fn per_key(who: Who, hosts: &str, run: Duration) -> PerAcquisition {
    let root = format!("{}/jobs", unique_root("cpu-perkey"));
    let counted = per_key::rust_rate(who, hosts, PER_KEY, &root, run).await;
    eprintln!(
        "    per-key {who:?}: {:.0} acquisitions in {:.1} s",
        counted.acquisitions, counted.secs
    );
    counted.usage.expect("a side of this process")
}

pub async fn run(table: &mut Table, opts: &Opts, zk: &Ensemble) {
    let hosts = zk.address(0);
    eprintln!("client CPU per acquisition, loopback");
    let started = Instant::now();
    let mut cycles = PerSide::<Windows>::default();
    for side in Side::alternating(reps(opts)) {
        let per = uncontended(side, &hosts, opts.warmup, opts.cycles * UNCONTENDED_SCALE).await;
        eprintln!("    uncontended {side:?}: {per:?}");
        cycles[side].push(per);
    }
    push_rows(table, "uncontended, standalone, loopback", "cycle", &cycles);
    let mut keyed = PerSide::<Windows>::default();
    for side in Side::alternating(reps(opts)) {
        let who = match side {
            Side::Ours => Who::Ours,
            Side::Peer => Who::Zkc,
        };
        let per = per_key(who, &hosts, opts.contended).await;
        eprintln!("    per-key {side:?}: {per:?}");
        keyed[side].push(per);
    }
    let scenario = format!(
        "per-key, 64 tasks, {} sessions, 10,000 keys, loopback",
        PER_KEY.sessions
    );
    push_rows(table, &scenario, "acquisition", &keyed);
    eprintln!("  ({:.0} s)", started.elapsed().as_secs_f64());
}

/// The CPU row with its target, and what the time is made of.
fn push_rows(table: &mut Table, scenario: &str, unit: &str, windows: &PerSide<Windows>) {
    let (ours, peer) = (&windows.ours, &windows.peer);
    let ratio = ours.cpu.median() / peer.cpu.median();
    table.push(
        Row::new(
            scenario,
            &format!("client CPU µs per {unit} (getrusage of the bench process, user + sys)"),
        )
        .ours(ours.cpu.cell())
        .peer(peer.cpu.cell())
        .ratio(ratio)
        .target(targets::client_cpu(ratio)),
    );
    table.push(
        Row::new(
            scenario,
            &format!("context switches per {unit}: voluntary / involuntary; tokio worker parks"),
        )
        .ours(ours.switches())
        .peer(peer.switches())
        .ratio(ours.voluntary.median() / peer.voluntary.median()),
    );
    table.push(
        Row::new(scenario, &format!("heap allocations per {unit}"))
            .ours(ours.allocations.cell())
            .peer(peer.allocations.cell())
            .ratio(ours.allocations.median() / peer.allocations.median()),
    );
}
