//! Election fail-over: two sessions take turns leading, per side; p50 µs from the
//! leader leaving to the next one leading. Ours: `resign()` → the follower's
//! `leadership()`; the peer: release → the waiter's `lock()`.

use std::time::{Duration, Instant};

use crate::side::{PerSide, Side, SESSION_TIMEOUT};
use crate::support::unique_root;
use crate::table::{median, micros, Reps, Row, Table};
use crate::Opts;

/// Long enough for the follower to be queued and watching before the leader leaves.
const SETTLE: Duration = Duration::from_millis(20);

/// µs per hand-over, over `rounds` hand-overs between two sessions.
async fn hand_overs(side: Side, hosts: &str, rounds: usize) -> Vec<f64> {
    let root = unique_root("failover");
    let conns = [
        side.connect(hosts, SESSION_TIMEOUT).await,
        side.connect(hosts, SESSION_TIMEOUT).await,
    ];
    let seats = [conns[0].election(&root, "a"), conns[1].election(&root, "b")];
    let mut out = Vec::with_capacity(rounds);
    let mut leader = seats[0].join().await.lead().await;
    for round in 0..rounds {
        let follower = seats[(round + 1) % 2].join().await;
        let (t0, (t1, next)) = tokio::join!(
            async {
                tokio::time::sleep(SETTLE).await;
                let t0 = Instant::now();
                leader.release().await;
                t0
            },
            async {
                let next = follower.lead().await;
                (Instant::now(), next)
            }
        );
        out.push(micros(t1.duration_since(t0)));
        leader = next;
    }
    leader.release().await;
    for conn in &conns {
        conn.close();
    }
    out
}

/// Both sides' p50 µs per hand-over on `hosts`, alternating.
pub async fn measure(opts: &Opts, hosts: &str) -> PerSide<Reps> {
    let rounds = if opts.reps > 1 { 100 } else { 40 };
    let mut stats = PerSide::<Reps>::default();
    for side in Side::alternating(opts.reps) {
        stats[side].push(median(hand_overs(side, hosts, rounds).await));
    }
    stats
}

/// The metric of a fail-over row.
pub const METRIC: &str = "p50 µs resign() → next leadership() (peer: release → next lock())";

pub async fn run(table: &mut Table, opts: &Opts, hosts: &str) {
    eprintln!("election fail-over");
    let stats = measure(opts, hosts).await;
    table.push(Row::new("election fail-over, 2 sessions, standalone", METRIC).medians(&stats));
}
