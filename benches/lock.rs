//! Lock benchmark: zk-recipes' `Mutex` against zookeeper-client's built-in lock (the peer),
//! on the same real ZooKeeper servers, in the same run.
//!
//! `cargo bench --bench lock` (about 6 minutes on 2 cores), `-- --quick` for a short run.
//! Other flags: `--only <scenario>` (uncontended, contended, drain, election),
//! `--waiters 100,1000,10000`, `--drain-timeout <secs>`, `--reps <n>`.
//!
//! Prints one markdown table of medians over the repetitions, with the spread
//! `[min–max]` to show the noise, the ratio zk-recipes / peer, and the team's targets.

use zk_harness as support;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{unique_root, Ensemble};
use zk_recipes::{LeaderElection, Mutex, Session};
use zookeeper_client as zk;

/// Counts the bytes of live heap, so that memory per waiter is measured without the
/// allocator's fragmentation (which RSS includes).
struct Counting;

static LIVE_HEAP: AtomicUsize = AtomicUsize::new(0);
/// The most `LIVE_HEAP` reached since it was last reset.
static PEAK_HEAP: AtomicUsize = AtomicUsize::new(0);

// SAFETY: defers to the system allocator and only counts.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let live = LIVE_HEAP.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK_HEAP.fetch_max(live, Ordering::Relaxed);
        std::alloc::System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE_HEAP.fetch_sub(layout.size(), Ordering::Relaxed);
        std::alloc::System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Sessions of the drain scenario ask for this timeout, so a request flood cannot expire them.
const DRAIN_SESSION_TIMEOUT: Duration = Duration::from_secs(30);
/// Sessions the drain waiters are spread over.
const DRAIN_SESSIONS: usize = 4;
/// Sessions looping on one lock in the contended scenario.
const CONTENDERS: usize = 8;

struct Opts {
    reps: usize,
    cycles: usize,
    warmup: usize,
    contended: Duration,
    waiters: Vec<usize>,
    drain_timeout: Duration,
    only: Option<String>,
}

impl Opts {
    fn parse() -> Opts {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let quick = args.iter().any(|a| a == "--quick");
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let mut opts = if quick {
            Opts {
                reps: 1,
                cycles: 200,
                warmup: 30,
                contended: Duration::from_millis(1500),
                waiters: vec![100, 1000],
                drain_timeout: Duration::from_secs(15),
                only: None,
            }
        } else {
            Opts {
                reps: 3,
                cycles: 500,
                warmup: 100,
                contended: Duration::from_secs(3),
                waiters: vec![100, 1000, 10_000],
                drain_timeout: Duration::from_secs(30),
                only: None,
            }
        };
        if let Some(reps) = value("--reps").and_then(|v| v.parse().ok()) {
            opts.reps = reps;
        }
        if let Some(list) = value("--waiters") {
            opts.waiters = list.split(',').filter_map(|w| w.parse().ok()).collect();
        }
        if let Some(secs) = value("--drain-timeout").and_then(|v| v.parse().ok()) {
            opts.drain_timeout = Duration::from_secs(secs);
        }
        opts.only = value("--only");
        opts
    }

    fn runs(&self, scenario: &str) -> bool {
        match self.only.as_deref() {
            None => true,
            Some(only) => only == scenario,
        }
    }
}

// ----- statistics and the table -----

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Median over repetitions, with the spread.
#[derive(Clone, Debug, Default)]
struct Reps(Vec<f64>);

impl Reps {
    fn push(&mut self, x: f64) {
        self.0.push(x);
    }

    fn median(&self) -> f64 {
        percentile(&sorted(self.0.clone()), 50.0)
    }

    fn cell(&self, unit: &str) -> String {
        let finite: Vec<f64> = self.0.iter().copied().filter(|x| x.is_finite()).collect();
        if finite.is_empty() {
            return "n/a".into();
        }
        let s = sorted(finite);
        if s.len() == 1 {
            format!("{}{unit}", fmt_num(s[0]))
        } else {
            format!(
                "{}{unit} [{}–{}]",
                fmt_num(percentile(&s, 50.0)),
                fmt_num(s[0]),
                fmt_num(s[s.len() - 1])
            )
        }
    }
}

fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

struct Row {
    scenario: String,
    metric: String,
    ours: String,
    peer: String,
    ratio: String,
    target: String,
    met: String,
}

#[derive(Default)]
struct Table {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Table {
    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        scenario: &str,
        metric: &str,
        ours: String,
        peer: String,
        ratio: Option<f64>,
        target: &str,
        met: Option<bool>,
    ) {
        let row = Row {
            scenario: scenario.into(),
            metric: metric.into(),
            ours,
            peer,
            ratio: ratio
                .filter(|r| r.is_finite())
                .map_or("—".into(), |r| format!("{r:.2}")),
            target: target.into(),
            met: match met {
                Some(true) => "met".into(),
                Some(false) => "**missed**".into(),
                None => "—".into(),
            },
        };
        eprintln!(
            "  {} | {} | ours {} | peer {} | ratio {} | {} {}",
            row.scenario, row.metric, row.ours, row.peer, row.ratio, row.target, row.met
        );
        self.rows.push(row);
    }

    fn note(&mut self, note: String) {
        eprintln!("  note: {note}");
        self.notes.push(note);
    }

    fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "| scenario | metric | zk-recipes | peer (zookeeper-client lock) | ours / peer | target | |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.scenario, r.metric, r.ours, r.peer, r.ratio, r.target, r.met
            );
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        out
    }
}

// ----- process and server probes -----

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Returns freed heap to the OS so that RSS growth counts what is live.
fn trim_heap() {
    // SAFETY: malloc_trim only releases free memory of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

async fn connect_client(hosts: &str, timeout: Duration) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(timeout)
        .connect(hosts)
        .await
        .unwrap_or_else(|e| panic!("connect {hosts}: {e}"))
}

async fn connect_session(hosts: &str, timeout: Duration) -> Session {
    Session::builder()
        .session_timeout(timeout)
        .connect(hosts)
        .await
        .unwrap_or_else(|e| panic!("connect {hosts}: {e}"))
}

async fn children(client: &zk::Client, root: &str) -> usize {
    match client.list_children(root).await {
        Ok(c) => c.len(),
        Err(_) => 0,
    }
}

// ----- the peer: zookeeper-client's own lock -----

/// The peer's lock on `root`, named as Curator (and zk-recipes) name their nodes.
fn peer_lock_args(root: &str) -> (zk::LockPrefix<'_>, zk::LockOptions<'static>) {
    let prefix = zk::LockPrefix::new_curator(root, "lock-").expect("lock prefix");
    let options = zk::LockOptions::new(zk::Acls::anyone_all())
        .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
        .expect("lock options");
    (prefix, options)
}

async fn peer_lock<'c>(client: &'c zk::Client, root: &str) -> zk::LockClient<'c> {
    let (prefix, options) = peer_lock_args(root);
    client.lock(prefix, b"", options).await.expect("peer lock")
}

/// Deletes the peer's lock node and waits for the server, as `MutexGuard::release` does.
async fn peer_release(lock: zk::LockClient<'_>) {
    let client = lock.client();
    client
        .delete(lock.lock_path(), None)
        .await
        .expect("peer release");
    // Already deleted: skip the background delete its Drop would send (a few bytes leak).
    std::mem::forget(lock);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    Ours,
    Peer,
}

impl Impl {
    /// Which side runs first in repetition `rep`: alternating, so drift favours neither.
    fn order(rep: usize) -> [Impl; 2] {
        if rep % 2 == 0 {
            [Impl::Ours, Impl::Peer]
        } else {
            [Impl::Peer, Impl::Ours]
        }
    }
}

// ----- scenario: round-trip floor -----

/// Raw request sequences on one session, p50 µs each: what a lock cycle can cost at least.
struct Floor {
    get: f64,
    create_delete: f64,
    /// create ‖ list, delete: the ideal pipelined cycle.
    pipelined: f64,
    /// create, list, delete: the peer's uncontended cycle.
    sequential: f64,
    /// create ‖ list, watch own node, drop the watch (RemoveWatches), delete.
    watch_removed: f64,
    /// create ‖ list, watch own node, delete (the watch fires on the delete).
    watch_fired: f64,
}

async fn floor(hosts: &str, samples: usize) -> Floor {
    let client = connect_client(hosts, Duration::from_secs(10)).await;
    let root = unique_root("floor");
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let sequential = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    client.create(&root, b"", &persistent).await.unwrap();
    let node = format!("{root}/n");
    let prefix = format!("{root}/lock-");
    let mut t: [Vec<f64>; 6] = Default::default();
    for i in 0..samples + 50 {
        let mut lap = [0.0; 6];
        let clock = Instant::now();
        client.get_data(&root).await.unwrap();
        lap[0] = clock.elapsed().as_secs_f64() * 1e6;

        let clock = Instant::now();
        client.create(&node, b"", &ephemeral).await.unwrap();
        client.delete(&node, None).await.unwrap();
        lap[1] = clock.elapsed().as_secs_f64() * 1e6;

        let clock = Instant::now();
        let create = client.create(&prefix, b"", &sequential);
        let list = client.list_children(&root);
        let (_, seq) = create.await.unwrap();
        list.await.unwrap();
        client
            .delete(&format!("{prefix}{seq}"), None)
            .await
            .unwrap();
        lap[2] = clock.elapsed().as_secs_f64() * 1e6;

        let clock = Instant::now();
        let (_, seq) = client.create(&prefix, b"", &sequential).await.unwrap();
        client.list_children(&root).await.unwrap();
        client
            .delete(&format!("{prefix}{seq}"), None)
            .await
            .unwrap();
        lap[3] = clock.elapsed().as_secs_f64() * 1e6;

        for (k, fire) in [(4, false), (5, true)] {
            let clock = Instant::now();
            let create = client.create(&prefix, b"", &sequential);
            let list = client.list_children(&root);
            let (_, seq) = create.await.unwrap();
            list.await.unwrap();
            let own = format!("{prefix}{seq}");
            let (_, _, watcher) = client.get_and_watch_data(&own).await.unwrap();
            if fire {
                client.delete(&own, None).await.unwrap();
                lap[k] = clock.elapsed().as_secs_f64() * 1e6;
                watcher.changed().await;
            } else {
                drop(watcher);
                client.delete(&own, None).await.unwrap();
                lap[k] = clock.elapsed().as_secs_f64() * 1e6;
            }
        }
        if i >= 50 {
            for (samples, x) in t.iter_mut().zip(lap) {
                samples.push(x);
            }
        }
    }
    client.delete(&root, None).await.unwrap();
    let p50 = |v: &Vec<f64>| percentile(&sorted(v.clone()), 50.0);
    Floor {
        get: p50(&t[0]),
        create_delete: p50(&t[1]),
        pipelined: p50(&t[2]),
        sequential: p50(&t[3]),
        watch_removed: p50(&t[4]),
        watch_fired: p50(&t[5]),
    }
}

// ----- scenario: uncontended -----

/// Per-cycle (acquire + release) latencies in µs.
async fn uncontended(which: Impl, hosts: &str, warmup: usize, cycles: usize) -> Vec<f64> {
    let root = unique_root("uncontended");
    let mut out = Vec::with_capacity(cycles);
    match which {
        Impl::Ours => {
            let session = connect_session(hosts, Duration::from_secs(10)).await;
            let mutex = Mutex::new(&session, &root).unwrap();
            for i in 0..warmup + cycles {
                let t = Instant::now();
                let guard = mutex.lock().await.expect("lock");
                guard.release().await.expect("release");
                if i >= warmup {
                    out.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
            session.close();
        }
        Impl::Peer => {
            let client = connect_client(hosts, Duration::from_secs(10)).await;
            for i in 0..warmup + cycles {
                let t = Instant::now();
                let lock = peer_lock(&client, &root).await;
                peer_release(lock).await;
                if i >= warmup {
                    out.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    out
}

async fn run_uncontended(table: &mut Table, opts: &Opts, label: &str, hosts: &str) {
    eprintln!("uncontended ({label})");
    let floor = floor(hosts, opts.cycles.min(300)).await;
    let mut stats: [[Reps; 3]; 2] = Default::default();
    for rep in 0..opts.reps {
        let order = Impl::order(rep);
        for which in order {
            let lat = uncontended(which, hosts, opts.warmup, opts.cycles).await;
            let m = mean(&lat);
            let s = sorted(lat);
            let i = which as usize;
            stats[i][0].push(m);
            stats[i][1].push(percentile(&s, 50.0));
            stats[i][2].push(percentile(&s, 99.0));
        }
    }
    let scenario = format!("uncontended, {label}");
    for (k, metric) in ["mean µs/cycle", "p50 µs/cycle", "p99 µs/cycle"]
        .iter()
        .enumerate()
    {
        let ratio = stats[0][k].median() / stats[1][k].median();
        let (target, met) = if k == 0 {
            ("≤ 0.75", Some(ratio <= 0.75))
        } else {
            ("", None)
        };
        table.row(
            &scenario,
            metric,
            stats[0][k].cell(""),
            stats[1][k].cell(""),
            Some(ratio),
            target,
            met,
        );
    }
    table.row(
        &scenario,
        "raw floor p50 µs: get_data / create+delete",
        format!("{} / {}", fmt_num(floor.get), fmt_num(floor.create_delete)),
        String::new(),
        None,
        "",
        None,
    );
    table.row(
        &scenario,
        "raw p50 µs: create‖list+delete vs create,list,delete",
        fmt_num(floor.pipelined),
        fmt_num(floor.sequential),
        Some(floor.pipelined / floor.sequential),
        "best possible ratio",
        None,
    );
    table.row(
        &scenario,
        "raw p50 µs: + own-node watch, removed / fired by the delete",
        format!(
            "{} / {}",
            fmt_num(floor.watch_removed),
            fmt_num(floor.watch_fired)
        ),
        String::new(),
        None,
        "",
        None,
    );
}

// ----- scenario: contended -----

/// Acquisitions per second of `CONTENDERS` sessions looping on one lock; panics on a
/// mutual-exclusion violation.
async fn contended(which: Impl, hosts: &str, run: Duration) -> f64 {
    let root = unique_root("contended");
    let held = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let start = Instant::now() + Duration::from_millis(200);
    let end = start + run;
    let mut tasks = Vec::new();
    match which {
        Impl::Ours => {
            let mut sessions = Vec::new();
            for _ in 0..CONTENDERS {
                sessions.push(connect_session(hosts, Duration::from_secs(10)).await);
            }
            // Make the root first, so that no contender pays for it inside the window.
            let first = Mutex::new(&sessions[0], &root).unwrap();
            first.lock().await.unwrap().release().await.unwrap();
            for session in sessions {
                let (held, count, root) = (held.clone(), count.clone(), root.clone());
                tasks.push(tokio::spawn(async move {
                    let mutex = Mutex::new(&session, &root).unwrap();
                    tokio::time::sleep_until(start.into()).await;
                    while Instant::now() < end {
                        let guard = mutex.lock().await.expect("lock");
                        assert!(!held.swap(true, Ordering::SeqCst), "two holders");
                        held.store(false, Ordering::SeqCst);
                        guard.release().await.expect("release");
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    session.close();
                }));
            }
        }
        Impl::Peer => {
            let mut clients = Vec::new();
            for _ in 0..CONTENDERS {
                clients.push(connect_client(hosts, Duration::from_secs(10)).await);
            }
            peer_release(peer_lock(&clients[0], &root).await).await;
            for client in clients {
                let (held, count, root) = (held.clone(), count.clone(), root.clone());
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep_until(start.into()).await;
                    while Instant::now() < end {
                        let lock = peer_lock(&client, &root).await;
                        assert!(!held.swap(true, Ordering::SeqCst), "two holders");
                        held.store(false, Ordering::SeqCst);
                        peer_release(lock).await;
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
        }
    }
    for task in tasks {
        task.await.expect("contender task");
    }
    let elapsed = start.elapsed();
    count.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
}

async fn run_contended(table: &mut Table, opts: &Opts, hosts: &str) {
    eprintln!("contended");
    let mut stats: [Reps; 2] = Default::default();
    for rep in 0..opts.reps {
        let order = Impl::order(rep);
        for which in order {
            stats[which as usize].push(contended(which, hosts, opts.contended).await);
        }
    }
    let ratio = stats[0].median() / stats[1].median();
    table.row(
        &format!("contended, {CONTENDERS} sessions, standalone"),
        "acquisitions/s",
        stats[0].cell(""),
        stats[1].cell(""),
        Some(ratio),
        "≥ 1.0",
        Some(ratio >= 1.0),
    );
}

// ----- scenario: queue drain, memory, watches -----

#[derive(Debug, Default)]
struct Drain {
    /// Seconds to get all waiters into the queue.
    queue_secs: f64,
    /// RSS growth while the waiters queue, KiB per waiter.
    rss_kib_per_waiter: f64,
    /// Live heap growth while the waiters queue, bytes per waiter.
    heap_bytes_per_waiter: f64,
    /// Peak live heap growth while the waiters queue, bytes per waiter.
    peak_heap_bytes_per_waiter: f64,
    /// The server's total watch count with the waiters queued.
    watches: usize,
    /// Mean µs per hand-off, release to last waiter done; NaN if it did not finish.
    per_handoff_us: f64,
    /// Waiters done when the drain ended (or timed out).
    done: usize,
    /// Seconds the drain ran.
    drain_secs: f64,
    /// Whether the waiters got into the queue in time at all.
    queued: bool,
}

/// Spawns one waiter's task; it records the instant it finished (held and released).
fn spawn_waiter(
    which: Impl,
    ours: &[Session],
    peers: &[zk::Client],
    i: usize,
    root: &Arc<str>,
    done: &Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Instant> {
    let done = done.clone();
    match which {
        Impl::Ours => {
            // Made here: the task holds what a waiter needs, its `Mutex` and `lock()`.
            let mutex = Mutex::new(&ours[i % ours.len()], root).unwrap();
            tokio::spawn(async move {
                let guard = mutex.lock().await.expect("waiter lock");
                guard.release().await.expect("waiter release");
                done.fetch_add(1, Ordering::Relaxed);
                Instant::now()
            })
        }
        Impl::Peer => {
            let client = peers[i % peers.len()].clone();
            let root = root.clone();
            tokio::spawn(async move {
                let lock = peer_lock(&client, &root).await;
                peer_release(lock).await;
                done.fetch_add(1, Ordering::Relaxed);
                Instant::now()
            })
        }
    }
}

async fn drain(which: Impl, zk: &Ensemble, waiters: usize, timeout: Duration) -> Drain {
    let hosts = zk.connect_string();
    let root = unique_root("drain");
    // Shared by the waiter tasks, so that none copies it.
    let shared_root: Arc<str> = Arc::from(root.as_str());
    let observer = connect_client(&hosts, DRAIN_SESSION_TIMEOUT).await;
    let mut result = Drain {
        per_handoff_us: f64::NAN,
        ..Drain::default()
    };

    // The holder, on its own session.
    let holder_session = connect_session(&hosts, DRAIN_SESSION_TIMEOUT).await;
    let holder_client = connect_client(&hosts, DRAIN_SESSION_TIMEOUT).await;
    let holder_mutex = Mutex::new(&holder_session, &root).unwrap();
    let (ours_guard, peer_guard) = match which {
        Impl::Ours => (Some(holder_mutex.lock().await.unwrap()), None),
        Impl::Peer => (
            None,
            Some(peer_lock(&holder_client, &root).await.into_owned()),
        ),
    };

    let mut sessions = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..DRAIN_SESSIONS {
        match which {
            Impl::Ours => sessions.push(connect_session(&hosts, DRAIN_SESSION_TIMEOUT).await),
            Impl::Peer => clients.push(connect_client(&hosts, DRAIN_SESSION_TIMEOUT).await),
        }
    }
    let watches_before = zk.watch_count().await;
    trim_heap();
    let rss_before = vm_rss_kib();
    let heap_before = LIVE_HEAP.load(Ordering::Relaxed);
    PEAK_HEAP.store(heap_before, Ordering::Relaxed);

    let done = Arc::new(AtomicUsize::new(0));
    let queue_start = Instant::now();
    let tasks: Vec<_> = (0..waiters)
        .map(|i| spawn_waiter(which, &sessions, &clients, i, &shared_root, &done))
        .collect();
    // Queued: every node is there and every waiter has set its watch.
    let queue_deadline = queue_start + Duration::from_secs(120);
    let want_watches = watches_before + waiters;
    loop {
        let nodes = children(&observer, &root).await;
        if nodes > waiters && zk.watch_count().await >= want_watches {
            result.queued = true;
            break;
        }
        if Instant::now() >= queue_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    result.queue_secs = queue_start.elapsed().as_secs_f64();
    // Let stragglers finish setting watches before the snapshot.
    tokio::time::sleep(Duration::from_millis(200)).await;
    result.watches = zk.watch_count().await;
    trim_heap();
    result.rss_kib_per_waiter =
        vm_rss_kib().saturating_sub(rss_before) as f64 / waiters.max(1) as f64;
    result.heap_bytes_per_waiter = LIVE_HEAP
        .load(Ordering::Relaxed)
        .saturating_sub(heap_before) as f64
        / waiters.max(1) as f64;
    result.peak_heap_bytes_per_waiter = PEAK_HEAP
        .load(Ordering::Relaxed)
        .saturating_sub(heap_before) as f64
        / waiters.max(1) as f64;

    if result.queued {
        let released = Instant::now();
        match which {
            Impl::Ours => ours_guard.unwrap().release().await.unwrap(),
            Impl::Peer => {
                let lock = peer_guard.unwrap();
                holder_client.delete(lock.lock_path(), None).await.unwrap();
                std::mem::forget(lock);
            }
        }
        let all = futures_join(tasks, released + timeout).await;
        result.done = done.load(Ordering::Relaxed);
        result.drain_secs = released.elapsed().as_secs_f64();
        result.per_handoff_us = match all {
            Some(last) => last.duration_since(released).as_secs_f64() * 1e6 / waiters as f64,
            None => f64::NAN,
        };
    } else {
        for task in &tasks {
            task.abort();
        }
        drop(ours_guard);
        drop(peer_guard);
    }
    // Clean up: closing the sessions removes every node that is left.
    for session in &sessions {
        session.close();
    }
    drop(sessions);
    drop(clients);
    holder_session.close();
    drop(holder_mutex);
    drop(holder_session);
    drop(holder_client);
    let _ = observer.delete(&root, None).await;
    drop(observer);
    tokio::time::sleep(Duration::from_millis(300)).await;
    result
}

/// Waits for every task until `deadline`; the latest finish instant if all finished.
/// Tasks still running at the deadline are aborted.
async fn futures_join(
    tasks: Vec<tokio::task::JoinHandle<Instant>>,
    deadline: Instant,
) -> Option<Instant> {
    let mut last: Option<Instant> = None;
    let mut complete = true;
    for task in tasks {
        if !complete {
            task.abort();
            continue;
        }
        match tokio::time::timeout_at(deadline.into(), task).await {
            Ok(Ok(at)) => last = Some(last.map_or(at, |l| l.max(at))),
            Ok(Err(e)) => panic!("waiter failed: {e}"),
            Err(_) => complete = false,
        }
    }
    complete.then_some(last).flatten()
}

/// The size of a waiting acquisition's future, as a task stores it (never polled here).
async fn future_sizes(table: &mut Table, hosts: &str) {
    let session = connect_session(hosts, DRAIN_SESSION_TIMEOUT).await;
    let client = connect_client(hosts, DRAIN_SESSION_TIMEOUT).await;
    let root = unique_root("sizes");
    let mutex = Mutex::new(&session, &root).unwrap();
    let ours = std::mem::size_of_val(&mutex.lock());
    let (prefix, options) = peer_lock_args(&root);
    let peer = std::mem::size_of_val(&client.lock(prefix, b"", options));
    table.row(
        "lock() future",
        "bytes (size_of_val; the task that awaits it stores it)",
        ours.to_string(),
        peer.to_string(),
        Some(ours as f64 / peer as f64),
        "",
        None,
    );
    session.close();
}

async fn run_drain(table: &mut Table, opts: &Opts, zk: &Ensemble) {
    future_sizes(table, &zk.connect_string()).await;
    let reps = |w: usize| if w >= 10_000 { 1 } else { opts.reps };
    let mut handoff: Vec<[Reps; 2]> = Vec::new();
    let mut extra: Vec<[Option<Drain>; 2]> = Vec::new();
    for &w in &opts.waiters {
        eprintln!("queue drain, {w} waiters");
        let mut stats: [Reps; 2] = Default::default();
        let mut last: [Option<Drain>; 2] = Default::default();
        // 10,000 waiters: one run, and twice the time to drain.
        let timeout = opts.drain_timeout * if w >= 10_000 { 2 } else { 1 };
        for rep in 0..reps(w) {
            let order = Impl::order(rep);
            for which in order {
                // Once a side did not finish, do not spend the time again.
                if last[which as usize]
                    .as_ref()
                    .is_some_and(|d: &Drain| !d.per_handoff_us.is_finite())
                {
                    continue;
                }
                let d = drain(which, zk, w, timeout).await;
                eprintln!("    {which:?}: {d:?}");
                stats[which as usize].push(d.per_handoff_us);
                last[which as usize] = Some(d);
            }
        }
        handoff.push(stats);
        extra.push(last);
    }
    let at = |w: usize| opts.waiters.iter().position(|&x| x == w);
    for (k, &w) in opts.waiters.iter().enumerate() {
        let [ours, peer] = &handoff[k];
        let [ours_d, peer_d] = &extra[k];
        let cell = |r: &Reps, d: &Option<Drain>| match d {
            Some(d) if !d.queued => format!("did not queue in 120 s ({:.0} s)", d.queue_secs),
            Some(d) if !d.per_handoff_us.is_finite() => format!(
                "DNF: {}/{w} done in {:.0} s (≥ {} µs/hand-off)",
                d.done,
                d.drain_secs,
                fmt_num(d.drain_secs * 1e6 / d.done.max(1) as f64)
            ),
            _ => r.cell(""),
        };
        let ratio = ours.median() / peer.median();
        let mut target = Vec::new();
        let mut met = Vec::new();
        if w == 1000 {
            if let Some(i100) = at(100) {
                let scale = ours.median() / handoff[i100][0].median();
                if scale.is_finite() {
                    target.push(format!("≤ 1.2 × ours@100 (is {scale:.2})"));
                } else {
                    target.push("≤ 1.2 × ours@100 (DNF)".into());
                }
                met.push(scale <= 1.2);
            }
            target.push("≤ 0.8 × peer".into());
            met.push(ratio <= 0.8);
        }
        if w == 10_000 {
            target.push("completes".into());
            met.push(ours.median().is_finite());
        }
        let met = if met.is_empty() {
            None
        } else {
            Some(met.iter().all(|&m| m))
        };
        table.row(
            &format!("queue drain, {w} waiters / {DRAIN_SESSIONS} sessions"),
            "µs per hand-off (release → last waiter done) / W",
            cell(ours, ours_d),
            cell(peer, peer_d),
            Some(ratio),
            &target.join("; "),
            met,
        );
    }
    for (k, &w) in opts.waiters.iter().enumerate() {
        let [ours_d, peer_d] = &extra[k];
        let (Some(o), Some(p)) = (ours_d, peer_d) else {
            continue;
        };
        table.row(
            &format!("queueing {w} waiters"),
            "s to enqueue all (create + list each)",
            format!("{:.2}", o.queue_secs),
            format!("{:.2}", p.queue_secs),
            Some(o.queue_secs / p.queue_secs),
            "",
            None,
        );
        let per_10k = |d: &Drain| d.rss_kib_per_waiter * 10_000.0 / 1024.0;
        table.row(
            &format!("memory, {w} waiting lock() futures"),
            "RSS growth, MiB per 10,000 waiters (KiB/waiter)",
            format!("{:.1} ({:.2})", per_10k(o), o.rss_kib_per_waiter),
            format!("{:.1} ({:.2})", per_10k(p), p.rss_kib_per_waiter),
            Some(o.rss_kib_per_waiter / p.rss_kib_per_waiter),
            // The memory scenario: growth per 10,000 waiting futures. Smaller
            // queues spread the sessions' fixed buffers over fewer waiters.
            if w == 10_000 { "≤ 2 KiB/waiter" } else { "" },
            (w == 10_000).then_some(o.rss_kib_per_waiter <= 2.0),
        );
        table.row(
            &format!("memory, {w} waiting lock() futures"),
            "live heap growth, bytes per waiter (counting allocator): queued / peak while queueing",
            format!(
                "{:.0} / {:.0}",
                o.heap_bytes_per_waiter, o.peak_heap_bytes_per_waiter
            ),
            format!(
                "{:.0} / {:.0}",
                p.heap_bytes_per_waiter, p.peak_heap_bytes_per_waiter
            ),
            Some(o.heap_bytes_per_waiter / p.heap_bytes_per_waiter),
            "",
            None,
        );
        let (floor_rss, floor_heap) = memory_floor(zk, w).await;
        table.row(
            &format!("memory floor, {w} tasks that enter a queue and watch"),
            "tokio task: create ‖ list, then one watch; no lock: RSS KiB / live heap bytes per task",
            format!(
                "{:.2} / {:.0} (ours)",
                o.rss_kib_per_waiter, o.heap_bytes_per_waiter
            ),
            format!("{floor_rss:.2} / {floor_heap:.0} (floor)"),
            Some(o.heap_bytes_per_waiter / floor_heap),
            "",
            None,
        );
        // Expected: one predecessor watch per waiter, plus the holder's own-node watch
        // (ours: the loss monitor; the peer has none) and the observer's none.
        let expected = w + usize::from(true);
        table.row(
            &format!("watches, {w} waiters queued"),
            "server wchs total",
            o.watches.to_string(),
            p.watches.to_string(),
            None,
            &format!("ours = {expected}"),
            Some(o.watches == expected),
        );
    }
}

/// KiB of RSS and bytes of live heap per task for `w` tasks that each do what any waiter
/// of a ZooKeeper lock on zookeeper-client does at least: create a Curator-named sequential
/// node and list the root back to back (the listing is dropped at once), then await one
/// watch (an exists-watch on an absent node). The floor under a waiting `lock()`.
async fn memory_floor(zk: &Ensemble, w: usize) -> (f64, f64) {
    const NODE: zk::CreateOptions<'static> =
        zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let hosts = zk.connect_string();
    let root = unique_root("floor");
    let observer = connect_client(&hosts, DRAIN_SESSION_TIMEOUT).await;
    observer
        .create(
            &root,
            b"",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .expect("floor root");
    let mut clients = Vec::new();
    for _ in 0..DRAIN_SESSIONS {
        clients.push(connect_client(&hosts, DRAIN_SESSION_TIMEOUT).await);
    }
    let watches_before = zk.watch_count().await;
    trim_heap();
    let rss_before = vm_rss_kib();
    let heap_before = LIVE_HEAP.load(Ordering::Relaxed);
    let tasks: Vec<_> = (0..w)
        .map(|i| {
            let client = clients[i % clients.len()].clone();
            let root = root.clone();
            tokio::spawn(async move {
                let prefix = format!("{root}/_c_{}-lock-", uuid::Uuid::new_v4());
                let create = client.create(&prefix, b"", &NODE);
                let list = client.list_children(&root);
                let (_, sequence) = create.await.expect("floor create");
                std::hint::black_box(list.await.expect("floor list").len());
                let absent = format!("{prefix}{sequence}-absent");
                let (_, watcher) = client.check_and_watch_stat(&absent).await.expect("watch");
                watcher.changed().await;
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while zk.watch_count().await < watches_before + w && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    trim_heap();
    let rss = vm_rss_kib().saturating_sub(rss_before) as f64 / w.max(1) as f64;
    let heap = LIVE_HEAP
        .load(Ordering::Relaxed)
        .saturating_sub(heap_before) as f64
        / w.max(1) as f64;
    for task in tasks {
        task.abort();
    }
    // Closing the sessions removes their nodes; then the root can go.
    drop(clients);
    let deadline = Instant::now() + Duration::from_secs(10);
    while children(&observer, &root).await > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = observer.delete(&root, None).await;
    (rss, heap)
}

// ----- scenario: election fail-over -----

/// µs from the leader's `resign()` call to the follower's `leadership()` resolving (ours),
/// or from the holder's release to the waiter's `lock()` resolving (the peer).
async fn failover(which: Impl, hosts: &str, rounds: usize) -> Vec<f64> {
    let root = unique_root("failover");
    let mut out = Vec::with_capacity(rounds);
    // Long enough for the follower to be queued and watching before the leader leaves.
    let settle = Duration::from_millis(20);
    match which {
        Impl::Ours => {
            let a = connect_session(hosts, Duration::from_secs(10)).await;
            let b = connect_session(hosts, Duration::from_secs(10)).await;
            let elections = [
                LeaderElection::new(&a, &root, "a").unwrap(),
                LeaderElection::new(&b, &root, "b").unwrap(),
            ];
            let mut leader = elections[0].join().await.expect("join");
            leader.leadership().await.expect("first leadership");
            for round in 0..rounds {
                let follower = elections[(round + 1) % 2].join().await.expect("join");
                let (t0, t1) = tokio::join!(
                    async {
                        tokio::time::sleep(settle).await;
                        let t0 = Instant::now();
                        leader.resign().await.expect("resign");
                        t0
                    },
                    async {
                        follower.leadership().await.expect("leadership");
                        Instant::now()
                    }
                );
                out.push(t1.duration_since(t0).as_secs_f64() * 1e6);
                leader = follower;
            }
            leader.resign().await.expect("resign");
            a.close();
            b.close();
        }
        Impl::Peer => {
            let clients = [
                connect_client(hosts, Duration::from_secs(10)).await,
                connect_client(hosts, Duration::from_secs(10)).await,
            ];
            let mut holder = peer_lock(&clients[0], &root).await;
            for round in 0..rounds {
                let next = &clients[(round + 1) % 2];
                let (t0, (t1, lock)) = tokio::join!(
                    async {
                        tokio::time::sleep(settle).await;
                        let t0 = Instant::now();
                        peer_release(holder).await;
                        t0
                    },
                    async {
                        let lock = peer_lock(next, &root).await;
                        (Instant::now(), lock)
                    }
                );
                out.push(t1.duration_since(t0).as_secs_f64() * 1e6);
                holder = lock;
            }
            peer_release(holder).await;
        }
    }
    out
}

async fn run_failover(table: &mut Table, opts: &Opts, hosts: &str) {
    eprintln!("election fail-over");
    let rounds = if opts.reps > 1 { 100 } else { 40 };
    let mut stats: [Reps; 2] = Default::default();
    for rep in 0..opts.reps {
        let order = Impl::order(rep);
        for which in order {
            let lat = failover(which, hosts, rounds).await;
            stats[which as usize].push(percentile(&sorted(lat), 50.0));
        }
    }
    table.row(
        "election fail-over, 2 sessions, standalone",
        "p50 µs resign() → next leadership() (peer: release → next lock())",
        stats[0].cell(""),
        stats[1].cell(""),
        Some(stats[0].median() / stats[1].median()),
        "",
        None,
    );
}

// ----- main -----

fn main() {
    let opts = Opts::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let table = runtime.block_on(run(&opts));
    println!("{}", table.render());
}

async fn run(opts: &Opts) -> Table {
    let mut table = Table::default();
    table.note(format!(
        "{} cores; {} repetitions per scenario (10,000 waiters: 1); cells are median [min–max]",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        opts.reps
    ));
    let standalone = Ensemble::start(1).await;
    let hosts = standalone.connect_string();
    if opts.runs("uncontended") {
        run_uncontended(&mut table, opts, "standalone", &hosts).await;
        let ensemble = Ensemble::start(3).await;
        // Both sides on the same follower: a write through a follower costs a hop more
        // than one through the leader, so a random server per client would decide the ratio.
        let leader = ensemble.wait_for_leader(Duration::from_secs(30)).await;
        let follower = ensemble.address((leader + 1) % ensemble.len());
        run_uncontended(
            &mut table,
            opts,
            "3-server ensemble, via a follower",
            &follower,
        )
        .await;
        drop(ensemble);
    }
    if opts.runs("contended") {
        run_contended(&mut table, opts, &hosts).await;
    }
    if opts.runs("election") {
        run_failover(&mut table, opts, &hosts).await;
    }
    if opts.runs("drain") {
        run_drain(&mut table, opts, &standalone).await;
    }
    drop(standalone);
    table
}
