//! Contended: `CONTENDERS` sessions loop on one lock for a fixed window, per side;
//! acquisitions per second. Panics if two contenders ever hold the lock at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::side::{Conn, PerSide, Side, SESSION_TIMEOUT};
use crate::support::unique_root;
use crate::table::{Reps, Row, Table};
use crate::{targets, Opts};

/// Sessions looping on one lock.
pub const CONTENDERS: usize = 8;

/// What the contenders share: the window they loop in, a flag that catches a second
/// holder, and the count of acquisitions.
struct Window {
    start: Instant,
    end: Instant,
    held: AtomicBool,
    count: AtomicUsize,
}

/// Acquisitions per second of `CONTENDERS` sessions looping on one lock for `run`.
async fn throughput(side: Side, hosts: &str, run: Duration) -> f64 {
    let root = unique_root("contended");
    let start = Instant::now() + Duration::from_millis(200);
    let window = Arc::new(Window {
        start,
        end: start + run,
        held: AtomicBool::new(false),
        count: AtomicUsize::new(0),
    });
    let mut conns = Vec::new();
    for _ in 0..CONTENDERS {
        conns.push(side.connect(hosts, SESSION_TIMEOUT).await);
    }
    // Make the root first, so that no contender pays for it inside the window.
    conns[0].lock_on(&root).lock().await.release().await;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|conn| tokio::spawn(contend(conn, root.clone(), window.clone())))
        .collect();
    for task in tasks {
        task.await.expect("contender task");
    }
    window.count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// One contender: takes and releases the lock until the window ends, counting.
async fn contend(conn: Conn, root: String, window: Arc<Window>) {
    let lock = conn.lock_on(&root);
    tokio::time::sleep_until(window.start.into()).await;
    while Instant::now() < window.end {
        let guard = lock.lock().await;
        assert!(!window.held.swap(true, Ordering::SeqCst), "two holders");
        window.held.store(false, Ordering::SeqCst);
        guard.release().await;
        window.count.fetch_add(1, Ordering::Relaxed);
    }
    conn.close();
}

/// Both sides' acquisitions per second on `hosts`, alternating.
pub async fn measure(opts: &Opts, hosts: &str) -> PerSide<Reps> {
    let mut stats = PerSide::<Reps>::default();
    for side in Side::alternating(opts.reps) {
        stats[side].push(throughput(side, hosts, opts.contended).await);
    }
    stats
}

pub async fn run(table: &mut Table, opts: &Opts, hosts: &str) {
    eprintln!("contended");
    let stats = measure(opts, hosts).await;
    table.push(
        Row::new(
            format!("contended, {CONTENDERS} sessions, standalone"),
            "acquisitions/s",
        )
        .medians(&stats)
        .target(targets::contended(stats.ratio())),
    );
}
