//! Shared counter benchmark: zk-recipes' `SharedCounter::add(1)` against Curator's
//! `SharedCount` (a Java peer: each increment a loop of `trySetCount(getVersionedValue(),
//! value + 1)` until it is true), on one real standalone ZooKeeper server, in the same run:
//! increments per second by 1 session alone and by 8 sessions contending for one counter.
//!
//! `cargo bench --bench counter` (3 repetitions, alternating which side goes first;
//! `-- --quick`: 1; `-- --reps N`). Its results: `benches/README.md`.
//!
//! Each side runs its sessions (each its own ZooKeeper session: a Rust `Session` per task,
//! a Curator client per Java thread) for [`WINDOW`] on a counter of its own, every session
//! incrementing as fast as it can; the rate is the increments done over the time taken.
//! Under contention most tries of either side lose to another session's write and read
//! again: both pay a read and a write per try. Our `add` reads with a plain read; Curator's
//! reads its cached value, kept by its watch, and re-reads after a failed try.

use std::time::{Duration, Instant};

use zk_harness::peers::Peer;
use zk_harness::{session, Ensemble};
use zk_recipes::{Session, SharedCounter};

/// How long each side increments.
const WINDOW: Duration = Duration::from_secs(5);

/// The session counts measured.
const SESSIONS: [usize; 2] = [1, 8];

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Ours,
    Curator,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(run(zk_harness::reps_from_args()));
}

async fn run(reps: usize) {
    let zk = Ensemble::start(1).await;
    let mut curator = Peer::curator(&zk, "/bench-counter-unused").await;
    // Per session count and side: the rate of each repetition.
    let mut rates = std::collections::BTreeMap::<(usize, Side), Vec<f64>>::new();
    for rep in 0..reps {
        let order = match rep % 2 {
            0 => [Side::Ours, Side::Curator],
            _ => [Side::Curator, Side::Ours],
        };
        for sessions in SESSIONS {
            for side in order {
                let path = format!("/bench-counter/{side:?}-{sessions}-{rep}").to_lowercase();
                let rate = match side {
                    Side::Ours => ours(&zk, &path, sessions).await,
                    Side::Curator => theirs(&mut curator, &path, sessions).await,
                };
                eprintln!(
                    "repetition {}/{reps}: {side:?}, {sessions} sessions: {rate:.0}/s",
                    rep + 1
                );
                rates.entry((sessions, side)).or_default().push(rate);
            }
        }
    }
    curator.quit().await;
    print_table(&rates);
}

/// Increments per second by `sessions` Rust sessions, each adding 1 as fast as it can.
async fn ours(zk: &Ensemble, path: &str, sessions: usize) -> f64 {
    let mut opened: Vec<Session> = Vec::new();
    for _ in 0..sessions {
        opened.push(session(&zk.connect_string(), SESSION_TIMEOUT).await);
    }
    // Made before the clock starts, as Curator's start() makes it.
    SharedCounter::new(&opened[0], path, 0)
        .expect("counter")
        .get()
        .await
        .expect("create the counter");
    let start = Instant::now();
    let end = start + WINDOW;
    let tasks: Vec<_> = opened
        .iter()
        .map(|session| {
            let counter = SharedCounter::new(session, path, 0).expect("counter");
            tokio::spawn(async move {
                let mut done = 0u64;
                while Instant::now() < end {
                    counter.add(1).await.expect("add");
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        done += task.await.expect("adder");
    }
    let elapsed = start.elapsed();
    let read = SharedCounter::new(&opened[0], path, 0)
        .expect("counter")
        .get()
        .await
        .expect("read the counter");
    assert_eq!(
        u64::try_from(read.value).ok(),
        Some(done),
        "increments lost"
    );
    for session in &opened {
        let _ = session.close().await;
    }
    done as f64 / elapsed.as_secs_f64()
}

/// Increments per second by `sessions` Curator clients in the Java peer.
async fn theirs(curator: &mut Peer, path: &str, sessions: usize) -> f64 {
    let ms = WINDOW.as_millis();
    let reply = curator
        .call(&format!("count-rate {path} {ms} {sessions}"))
        .await;
    let (done, elapsed) = reply.split_once(' ').expect("<increments> <elapsed ms>");
    let done: f64 = done.parse().expect("increments");
    let elapsed: f64 = elapsed.parse().expect("elapsed ms");
    done / (elapsed / 1000.0)
}

/// The median of `values`, with their `[min–max]` spread.
fn median(values: &[f64]) -> (f64, String) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let spread = match (sorted.first(), sorted.last()) {
        (Some(min), Some(max)) => format!("[{min:.0}–{max:.0}]"),
        _ => String::new(),
    };
    (
        sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN),
        spread,
    )
}

fn print_table(rates: &std::collections::BTreeMap<(usize, Side), Vec<f64>>) {
    println!(
        "| sessions incrementing one counter | zk-recipes `add(1)` /s | Curator `SharedCount` /s | ratio |"
    );
    println!("|---|---|---|---|");
    for sessions in SESSIONS {
        let of = |side| median(rates.get(&(sessions, side)).map_or(&[][..], Vec::as_slice));
        let ((ours, ours_spread), (theirs, theirs_spread)) = (of(Side::Ours), of(Side::Curator));
        println!(
            "| {sessions} | {ours:.0} {ours_spread} | {theirs:.0} {theirs_spread} | {:.2} |",
            ours / theirs
        );
    }
}
