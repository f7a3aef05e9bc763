//! The read/write lock and the semaphore beside Apache Curator, in the same run: `SESSIONS`
//! sessions loop on one path for a fixed window; acquisitions per second. Ours are
//! zk-recipes' `RwLock` and `Semaphore`; the peer is Curator's `InterProcessReadWriteLock`
//! and `InterProcessSemaphoreV2`, each thread on its own client, in the Curator peer of
//! the interop tests (a JVM driven over stdin/stdout, started once per scenario).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::{RwLock, Semaphore, Session};

use crate::side::{PerSide, Side, SESSION_TIMEOUT};
use crate::support::peers::Peer;
use crate::support::{session, unique_root, Ensemble};
use crate::table::{Reps, Row, Table};
use crate::Opts;

/// Sessions looping on one path, per side.
const SESSIONS: usize = 8;
/// Writers among them in the read-mostly scenario; the others read.
const WRITERS: usize = 1;
/// The semaphore's maximum.
const MAX: u32 = 3;

#[derive(Clone, Copy)]
enum Scenario {
    ReadMostly,
    Semaphore,
}

impl Scenario {
    fn row(self) -> String {
        match self {
            Scenario::ReadMostly => format!(
                "read-mostly RwLock, {} readers + {WRITERS} writer on {SESSIONS} sessions, \
                 standalone (peer: Curator InterProcessReadWriteLock)",
                SESSIONS - WRITERS
            ),
            Scenario::Semaphore => format!(
                "Semaphore of {MAX}, {SESSIONS} sessions, standalone \
                 (peer: Curator InterProcessSemaphoreV2)"
            ),
        }
    }

    /// The Curator peer's command for a window of `run`.
    fn command(self, run: Duration) -> String {
        let ms = run.as_millis();
        match self {
            Scenario::ReadMostly => format!("rw-rate {ms} {} {WRITERS}", SESSIONS - WRITERS),
            Scenario::Semaphore => format!("sem-rate {ms} {SESSIONS} {MAX}"),
        }
    }

    /// What contender `i` takes on `session`.
    fn taker(self, session: &Session, root: &str, i: usize) -> Taker {
        match self {
            Scenario::ReadMostly if i < WRITERS => {
                Taker::Write(RwLock::new(session, root).expect("rwlock"))
            }
            Scenario::ReadMostly => Taker::Read(RwLock::new(session, root).expect("rwlock")),
            Scenario::Semaphore => {
                Taker::Lease(Semaphore::new(session, root, MAX).expect("semaphore"))
            }
        }
    }
}

/// One of our contenders.
enum Taker {
    Read(RwLock),
    Write(RwLock),
    Lease(Semaphore),
}

impl Taker {
    /// One acquisition and its release.
    async fn cycle(&self) {
        match self {
            Taker::Read(lock) => lock.read().await.expect("read").release().await,
            Taker::Write(lock) => lock.write().await.expect("write").release().await,
            Taker::Lease(semaphore) => semaphore.acquire().await.expect("lease").release().await,
        }
        .expect("release");
    }
}

/// Our acquisitions per second: `SESSIONS` sessions cycle on `root` for `run`.
async fn ours(scenario: Scenario, hosts: &str, root: &str, run: Duration) -> f64 {
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        sessions.push(session(hosts, SESSION_TIMEOUT).await);
    }
    let start = Instant::now() + Duration::from_millis(200);
    let end = start + run;
    let count = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, session)| {
            let taker = scenario.taker(&session, root, i);
            let count = count.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(start.into()).await;
                while Instant::now() < end {
                    taker.cycle().await;
                    count.fetch_add(1, Ordering::Relaxed);
                }
                session.close();
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("contender task");
    }
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Curator's acquisitions per second, from the peer's `<acquisitions> <elapsed ms>`.
async fn curator(scenario: Scenario, peer: &mut Peer, run: Duration) -> f64 {
    let reply = peer.call(&scenario.command(run)).await;
    let numbers: Vec<f64> = reply
        .split(' ')
        .map(|n| n.parse().expect("a number"))
        .collect();
    numbers[0] / (numbers[1] / 1e3)
}

/// Both sides' acquisitions per second in `scenario`, alternating, on one path.
async fn measure(scenario: Scenario, opts: &Opts, zk: &Ensemble) -> PerSide<Reps> {
    let hosts = zk.connect_string();
    let root = unique_root("recipes");
    let mut peer = Peer::curator(zk, &root).await;
    // Make the path (and a semaphore's locks and leases) first, outside every window.
    let warm = session(&hosts, SESSION_TIMEOUT).await;
    scenario.taker(&warm, &root, 0).cycle().await;
    let mut stats = PerSide::<Reps>::default();
    for side in Side::alternating(opts.reps) {
        let rate = match side {
            Side::Ours => ours(scenario, &hosts, &root, opts.contended).await,
            Side::Peer => curator(scenario, &mut peer, opts.contended).await,
        };
        stats[side].push(rate);
    }
    peer.quit().await;
    warm.close();
    stats
}

pub async fn run(table: &mut Table, opts: &Opts, zk: &Ensemble) {
    table.note(
        "Curator rows: Curator 5.4 in one JVM on the same cores (the interop peer: C1 only, \
         -Xmx128m, serial GC), one client per thread"
            .into(),
    );
    for scenario in [Scenario::ReadMostly, Scenario::Semaphore] {
        eprintln!("recipes: {}", scenario.row());
        let stats = measure(scenario, opts, zk).await;
        table.push(Row::new(scenario.row(), "acquisitions/s").medians(&stats));
    }
}
