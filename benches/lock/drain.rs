//! Queue drain at 100, 1,000 and 10,000 waiters, per side: one holder, the waiters
//! queued behind it on `SESSIONS` sessions, then µs per hand-off from the holder's
//! release until the last waiter is done. While they wait: the time to queue them, the
//! memory per waiting `lock()` (RSS and live heap), the server's watch count; and, to
//! compare, the memory floor (tasks that only enter a queue and watch) and the size of
//! one `lock()` future.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zookeeper_client as zk;

use crate::alloc::{Baseline, Growth};
use crate::side::{connect_client, PerSide, Side};
use crate::support::{unique_root, Ensemble};
use crate::table::{fmt_num, micros, Reps, Row, Table};
use crate::{targets, Opts};

/// Sessions of the drain scenario ask for this timeout, so a request flood cannot expire them.
const DRAIN_SESSION_TIMEOUT: Duration = Duration::from_secs(30);
/// Sessions the drain waiters are spread over.
pub const SESSIONS: usize = 4;
/// How long the waiters (or floor tasks) may take to queue.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(120);

/// One drain run of one side.
#[derive(Debug)]
struct Drain {
    /// Whether the waiters got into the queue in time at all.
    queued: bool,
    /// Seconds to get all waiters into the queue.
    queue_secs: f64,
    /// Memory growth while the waiters queue, per waiter.
    memory: Growth,
    /// The server's total watch count with the waiters queued.
    watches: usize,
    /// Mean µs per hand-off, release to last waiter done; NaN if it did not finish.
    per_handoff_us: f64,
    /// Waiters done when the drain ended (or timed out).
    done: usize,
    /// Seconds the drain ran.
    drain_secs: f64,
}

/// One drain of `waiters` on `hosts` (the ensemble's own address, or a proxy to it).
async fn drain(side: Side, zk: &Ensemble, hosts: &str, waiters: usize, timeout: Duration) -> Drain {
    let hosts = hosts.to_owned();
    let root = unique_root("drain");
    // Shared by the waiter tasks, so that none copies it.
    let shared_root: Arc<str> = Arc::from(root.as_str());
    let observer = connect_client(&hosts, DRAIN_SESSION_TIMEOUT).await;
    // The holder, on its own session.
    let holder = side.connect(&hosts, DRAIN_SESSION_TIMEOUT).await;
    let holder_lock = holder.lock_on(&root);
    let guard = holder_lock.lock().await;
    let mut conns = Vec::new();
    for _ in 0..SESSIONS {
        conns.push(side.connect(&hosts, DRAIN_SESSION_TIMEOUT).await);
    }
    let watches_before = zk.watch_count().await;
    let baseline = Baseline::take();

    let done = Arc::new(AtomicUsize::new(0));
    let queue_start = Instant::now();
    let tasks: Vec<_> = (0..waiters)
        .map(|i| conns[i % conns.len()].spawn_waiter(&shared_root, &done))
        .collect();
    // Queued: every node is there and every waiter has set its watch.
    let queued = wait_until(queue_start + QUEUE_TIMEOUT, || async {
        children(&observer, &root).await > waiters
            && zk.watch_count().await >= watches_before + waiters
    })
    .await;
    let queue_secs = queue_start.elapsed().as_secs_f64();
    // Let stragglers finish setting watches before the snapshot.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut result = Drain {
        queued,
        queue_secs,
        watches: zk.watch_count().await,
        memory: baseline.growth_per(waiters),
        per_handoff_us: f64::NAN,
        done: 0,
        drain_secs: 0.0,
    };

    if queued {
        let released = Instant::now();
        guard.release().await;
        let all = join_until(tasks, released + timeout).await;
        result.done = done.load(Ordering::Relaxed);
        result.drain_secs = released.elapsed().as_secs_f64();
        result.per_handoff_us = all.map_or(f64::NAN, |last| {
            micros(last.duration_since(released)) / waiters as f64
        });
    } else {
        for task in &tasks {
            task.abort();
        }
        drop(guard);
    }
    // Clean up: closing the sessions removes every node that is left.
    for conn in &conns {
        conn.close();
    }
    drop(conns);
    holder.close();
    drop(holder_lock);
    drop(holder);
    let _ = observer.delete(&root, None).await;
    drop(observer);
    tokio::time::sleep(Duration::from_millis(300)).await;
    result
}

/// Polls `ready` every 50 ms until it holds (true) or `deadline` passes (false).
async fn wait_until<F, R>(deadline: Instant, mut ready: F) -> bool
where
    F: FnMut() -> R,
    R: Future<Output = bool>,
{
    loop {
        if ready().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn children(client: &zk::Client, root: &str) -> usize {
    match client.list_children(root).await {
        Ok(c) => c.len(),
        Err(_) => 0,
    }
}

/// Waits for every task until `deadline`; the latest finish instant if all finished.
/// Tasks still running at the deadline are aborted.
async fn join_until(tasks: Vec<JoinHandle<Instant>>, deadline: Instant) -> Option<Instant> {
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

/// One queue size's runs: per side, µs per hand-off over the repetitions, and the last
/// run (for the memory and watch rows).
pub struct Queue {
    waiters: usize,
    handoff: PerSide<Reps>,
    last: PerSide<Option<Drain>>,
}

/// Both sides' drains of `waiters` on `hosts`, alternating.
pub async fn queue(opts: &Opts, zk: &Ensemble, hosts: &str, waiters: usize) -> Queue {
    eprintln!("queue drain, {waiters} waiters");
    // 10,000 waiters: one run, and twice the time to drain.
    let (reps, timeout) = if waiters >= 10_000 {
        (1, opts.drain_timeout * 2)
    } else {
        (opts.reps, opts.drain_timeout)
    };
    let mut q = Queue {
        waiters,
        handoff: PerSide::default(),
        last: PerSide::default(),
    };
    for side in Side::alternating(reps) {
        // Once a side did not finish, do not spend the time again.
        if q.last[side]
            .as_ref()
            .is_some_and(|d| !d.per_handoff_us.is_finite())
        {
            continue;
        }
        let d = drain(side, zk, hosts, waiters, timeout).await;
        eprintln!("    {side:?}: {d:?}");
        q.handoff[side].push(d.per_handoff_us);
        q.last[side] = Some(d);
    }
    q
}

pub async fn run(table: &mut Table, opts: &Opts, zk: &Ensemble) {
    future_sizes(table, &zk.connect_string()).await;
    let mut queues = Vec::new();
    let hosts = zk.connect_string();
    for &waiters in &opts.waiters {
        queues.push(queue(opts, zk, &hosts, waiters).await);
    }
    let ours_at_100 = queues
        .iter()
        .find(|q| q.waiters == 100)
        .map(|q| q.handoff.ours.median());
    for q in &queues {
        table.push(handoff_row(q, ours_at_100));
    }
    for q in &queues {
        if let PerSide {
            ours: Some(ours),
            peer: Some(peer),
        } = &q.last
        {
            memory_rows(table, zk, q.waiters, ours, peer).await;
        }
    }
}

fn handoff_row(q: &Queue, ours_at_100: Option<f64>) -> Row {
    let (ours, peer) = (q.handoff.ours.median(), q.handoff.peer.median());
    q.row(format!(
        "queue drain, {} waiters / {SESSIONS} sessions",
        q.waiters
    ))
    .target(targets::drain(q.waiters, ours, peer, ours_at_100))
}

impl Queue {
    pub fn waiters(&self) -> usize {
        self.waiters
    }

    pub fn handoff(&self) -> &PerSide<Reps> {
        &self.handoff
    }

    /// The hand-off row of `scenario`, without a target.
    pub fn row(&self, scenario: String) -> Row {
        let w = self.waiters;
        Row::new(scenario, "µs per hand-off (release → last waiter done) / W")
            .ours(handoff_cell(w, &self.handoff.ours, &self.last.ours))
            .peer(handoff_cell(w, &self.handoff.peer, &self.last.peer))
            .ratio(self.handoff.ratio())
    }
}

/// The medians, or why there are none: the waiters did not queue, or did not finish.
fn handoff_cell(waiters: usize, reps: &Reps, last: &Option<Drain>) -> String {
    match last {
        Some(d) if !d.queued => format!(
            "did not queue in {} s ({:.0} s)",
            QUEUE_TIMEOUT.as_secs(),
            d.queue_secs
        ),
        Some(d) if !d.per_handoff_us.is_finite() => format!(
            "DNF: {}/{waiters} done in {:.0} s (≥ {} µs/hand-off)",
            d.done,
            d.drain_secs,
            fmt_num(d.drain_secs * 1e6 / d.done.max(1) as f64)
        ),
        _ => reps.cell(),
    }
}

/// Queueing time, memory, the memory floor (measured here) and watches at `w` waiters.
async fn memory_rows(table: &mut Table, zk: &Ensemble, w: usize, o: &Drain, p: &Drain) {
    let runs = PerSide { ours: o, peer: p };
    table.push(runs.row(
        format!("queueing {w} waiters"),
        "s to enqueue all (create + list each)",
        |d| format!("{:.2}", d.queue_secs),
        |d| d.queue_secs,
    ));
    table.push(
        runs.row(
            format!("memory, {w} waiting lock() futures"),
            "RSS growth, MiB per 10,000 waiters (KiB/waiter)",
            |d| {
                let per_10k = d.memory.rss_kib * 10_000.0 / 1024.0;
                format!("{per_10k:.1} ({:.2})", d.memory.rss_kib)
            },
            |d| d.memory.rss_kib,
        )
        .target(targets::memory(w, o.memory.rss_kib)),
    );
    table.push(runs.row(
        format!("memory, {w} waiting lock() futures"),
        "live heap growth, bytes per waiter (counting allocator): queued / peak while queueing",
        |d| {
            format!(
                "{:.0} / {:.0}",
                d.memory.heap_bytes, d.memory.peak_heap_bytes
            )
        },
        |d| d.memory.heap_bytes,
    ));
    let floor = memory_floor(zk, w).await;
    table.push(
        Row::new(
            format!("memory floor, {w} tasks that enter a queue and watch"),
            "tokio task: create ‖ list, then one watch; no lock: RSS KiB / live heap bytes per task",
        )
        .ours(format!("{:.2} / {:.0} (ours)", o.memory.rss_kib, o.memory.heap_bytes))
        .peer(format!("{:.2} / {:.0} (floor)", floor.rss_kib, floor.heap_bytes))
        .ratio(o.memory.heap_bytes / floor.heap_bytes),
    );
    table.push(
        Row::new(format!("watches, {w} waiters queued"), "server wchs total")
            .ours(o.watches.to_string())
            .peer(p.watches.to_string())
            .target(targets::watches(w, o.watches)),
    );
}

impl PerSide<&Drain> {
    /// A row of one measurement of both sides' last runs: each cell by `cell`, the ratio
    /// of `value`.
    fn row(
        &self,
        scenario: String,
        metric: &str,
        cell: impl Fn(&Drain) -> String,
        value: impl Fn(&Drain) -> f64,
    ) -> Row {
        Row::new(scenario, metric)
            .ours(cell(self.ours))
            .peer(cell(self.peer))
            .ratio(value(self.ours) / value(self.peer))
    }
}

/// The size of a waiting acquisition's future, as a task stores it (never polled here).
async fn future_sizes(table: &mut Table, hosts: &str) {
    let root = unique_root("sizes");
    let mut bytes = PerSide::<usize>::default();
    for side in Side::BOTH {
        let conn = side.connect(hosts, DRAIN_SESSION_TIMEOUT).await;
        bytes[side] = conn.lock_future_bytes(&root);
        conn.close();
    }
    table.push(
        Row::new(
            "lock() future",
            "bytes (size_of_val; the task that awaits it stores it)",
        )
        .ours(bytes.ours.to_string())
        .peer(bytes.peer.to_string())
        .ratio(bytes.ours as f64 / bytes.peer as f64),
    );
}

/// RSS and live heap per task for `w` tasks that each do what any waiter of a ZooKeeper
/// lock on zookeeper-client does at least: create a Curator-named sequential node and
/// list the root back to back (the listing is dropped at once), then await one watch
/// (an exists-watch on an absent node). The floor under a waiting `lock()`.
async fn memory_floor(zk: &Ensemble, w: usize) -> Growth {
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
    for _ in 0..SESSIONS {
        clients.push(connect_client(&hosts, DRAIN_SESSION_TIMEOUT).await);
    }
    let watches_before = zk.watch_count().await;
    let baseline = Baseline::take();
    let tasks: Vec<_> = (0..w)
        .map(|i| spawn_floor_task(clients[i % clients.len()].clone(), root.clone()))
        .collect();
    wait_until(Instant::now() + QUEUE_TIMEOUT, || async {
        zk.watch_count().await >= watches_before + w
    })
    .await;
    let growth = baseline.growth_per(w);
    for task in tasks {
        task.abort();
    }
    // Closing the sessions removes their nodes; then the root can go.
    drop(clients);
    wait_until(Instant::now() + Duration::from_secs(10), || async {
        children(&observer, &root).await == 0
    })
    .await;
    let _ = observer.delete(&root, None).await;
    growth
}

/// One floor task: enters a queue under `root` and waits on a watch that never fires.
fn spawn_floor_task(client: zk::Client, root: String) -> JoinHandle<()> {
    const NODE: zk::CreateOptions<'static> =
        zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
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
}
