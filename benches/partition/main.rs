//! Partition benchmark: zk-recipes' `Partitioner` against kazoo's `SetPartitioner` (a Python
//! peer), 100 partitions on 10 member processes of each, on one real standalone ZooKeeper
//! server, in the same run: how long a rebalance takes and how many requests it costs after a
//! join (10 → 11 members), a clean leave (SIGTERM, 11 → 10) and a kill -9 (SIGKILL, 10 → 9),
//! and how many partitions stop being worked meanwhile.
//!
//! `cargo bench --bench partition` (3 repetitions, alternating which side goes first;
//! `-- --quick`: 1; `-- --reps N`). Its results: `benches/README.md`.
//!
//! * **Rebalance time**: from the event (the newcomer's group node seen by an observer; the
//!   SIGTERM; the SIGKILL) to the first instant after which the members left work every
//!   partition, each ⌊P/N⌋ or ⌈P/N⌉ of them, and go on doing so for 1.5 s (so a late move
//!   counts); read from the lines the members print.
//! * **Requests**: packets the server received (`mntr`'s `zk_packets_received`) from just
//!   before the event to the end of that quiet window, less the pings: the rate measured over
//!   3 s at rest just before, times the time elapsed.
//! * **Partitions stopped**: the "stopped" lines printed from the event on (a killed member
//!   prints none): kazoo releases the whole set on every change of the party.
//!
//! Both sides use 4 s sessions; kazoo's `time_boundary` (how long the party must be at rest
//! before it allocates) is 0.5 s instead of its default 30 s.

mod side;

use std::collections::BTreeMap;
use std::time::Duration;

use side::{Kind, Side};
use zk_harness::{now_ms, observer, Ensemble};
use zookeeper_client::Client;

/// How long a side may take to start and settle, and to settle after an event.
const SETTLE: Duration = Duration::from_secs(120);

/// A window after the members settled in which they must stay settled.
const QUIET: Duration = Duration::from_millis(1500);

/// The rest over which the ping rate is measured.
const REST: Duration = Duration::from_secs(3);

const MEMBERS: usize = 10;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    if let Ok(what) = std::env::var(side::MEMBER) {
        runtime.block_on(side::member(&what));
        return;
    }
    runtime.block_on(run(zk_harness::reps_from_args()));
}

/// What one event cost one side.
struct Cost {
    ms: f64,
    requests: f64,
    stopped: f64,
}

const EVENTS: [&str; 3] = [
    "join, 100 partitions, 10 → 11 members",
    "clean leave (SIGTERM), 100 partitions, 11 → 10 members",
    "kill -9 (SIGKILL), 100 partitions, 10 → 9 members, 4 s sessions",
];

async fn run(reps: usize) {
    let zk = Ensemble::start(1).await;
    // Per event and side: the costs of each repetition.
    let mut costs: BTreeMap<(usize, Kind), Vec<Cost>> = BTreeMap::new();
    for rep in 0..reps {
        let order = match rep % 2 {
            0 => [Kind::Ours, Kind::Kazoo],
            _ => [Kind::Kazoo, Kind::Ours],
        };
        for kind in order {
            eprintln!("repetition {}/{reps}: {kind:?}", rep + 1);
            for (event, cost) in events(&zk, kind, rep).await.into_iter().enumerate() {
                costs.entry((event, kind)).or_default().push(cost);
            }
        }
    }
    print_table(&costs);
}

/// One side through the three events, on a root of its own.
async fn events(zk: &Ensemble, kind: Kind, rep: usize) -> Vec<Cost> {
    let root = format!("/bench-partition-{kind:?}-{rep}").to_lowercase();
    let mut side = Side::new(kind, &zk.connect_string(), &root);
    for i in 0..MEMBERS {
        side.start(&format!("m{i:02}"));
    }
    side.await_balanced(SETTLE)
        .await
        .unwrap_or_else(|| panic!("{kind:?}: 10 members never settled"));

    let outside = observer(&zk.connect_string()).await;
    let mut costs = Vec::new();
    for event in [Event::Join("m10"), Event::Leave("m03"), Event::Kill("m05")] {
        costs.push(measure(zk, &mut side, &outside, event).await);
    }
    side.stop_all().await;
    costs
}

/// What is done to a side's members.
#[derive(Clone, Copy)]
enum Event {
    Join(&'static str),
    Leave(&'static str),
    Kill(&'static str),
}

/// Does `event`; when it happened (ms): for a join, when an observer saw the newcomer's
/// group node.
async fn happen(side: &mut Side, outside: &Client, event: Event) -> u64 {
    match event {
        Event::Join(id) => {
            let group = side.kind.group(&side.root);
            let (_, watcher) = outside.list_and_watch_children(&group).await.expect("list");
            side.start(id);
            watcher.changed().await;
            now_ms()
        }
        Event::Leave(id) | Event::Kill(id) => {
            let signal = match event {
                Event::Kill(_) => libc::SIGKILL,
                _ => libc::SIGTERM,
            };
            let at = now_ms();
            side.end(id, signal);
            at
        }
    }
}

/// Rests, does `event`, and measures the rebalance that follows.
async fn measure(zk: &Ensemble, side: &mut Side, outside: &Client, event: Event) -> Cost {
    let (rest_from, rested) = (now_ms(), packets(zk).await);
    tokio::time::sleep(REST).await;
    let (before_ms, before) = (now_ms(), packets(zk).await);
    let pings_per_ms = (before - rested) / (before_ms - rest_from) as f64;
    let at = happen(side, outside, event).await;
    let settled = side.await_balanced(SETTLE).await;
    tokio::time::sleep(QUIET).await;
    let (after_ms, after) = (now_ms(), packets(zk).await);
    let end = settled.and(side.balanced_since());
    Cost {
        ms: end.map_or(f64::NAN, |end| end.saturating_sub(at) as f64),
        requests: (after - before) - pings_per_ms * (after_ms - before_ms) as f64,
        stopped: side.stopped_since(at) as f64,
    }
}

/// The packets the server has received so far.
async fn packets(zk: &Ensemble) -> f64 {
    let mntr = zk.four_letter(0, "mntr").await;
    (mntr.lines())
        .find_map(|line| line.strip_prefix("zk_packets_received"))
        .and_then(|n| n.trim().parse().ok())
        .expect("mntr says zk_packets_received")
}

/// `median [min–max]` of the finite values (one alone: just it), `n/a` if none.
fn cell(values: &[f64]) -> String {
    let mut finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    finite.sort_by(f64::total_cmp);
    match finite.as_slice() {
        [] => "n/a".into(),
        [one] => format!("{one:.0}"),
        all => format!(
            "{:.0} [{:.0}–{:.0}]",
            all[all.len() / 2],
            all[0],
            all[all.len() - 1]
        ),
    }
}

fn median(values: &[f64]) -> f64 {
    let mut finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    finite.sort_by(f64::total_cmp);
    finite.get(finite.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A row's metric: its name, and how it is read from a cost.
type Metric = (&'static str, fn(&Cost) -> f64);

fn print_table(costs: &BTreeMap<(usize, Kind), Vec<Cost>>) {
    println!(
        "| event | metric | zk-recipes `Partitioner` | kazoo `SetPartitioner` | ours / kazoo |"
    );
    println!("|---|---|---|---|---|");
    let metrics: [Metric; 3] = [
        (
            "rebalance ms (event → all partitions worked, balanced)",
            |c| c.ms,
        ),
        ("requests (server packets less pings)", |c| c.requests),
        ("partitions stopped", |c| c.stopped),
    ];
    for (event, name) in EVENTS.iter().enumerate() {
        for (metric, of) in metrics {
            let values = |kind| -> Vec<f64> {
                costs
                    .get(&(event, kind))
                    .map_or(Vec::new(), |c| c.iter().map(of).collect())
            };
            let (ours, kazoo) = (values(Kind::Ours), values(Kind::Kazoo));
            let ratio = median(&ours) / median(&kazoo);
            println!(
                "| {name} | {metric} | {} | {} | {ratio:.2} |",
                cell(&ours),
                cell(&kazoo)
            );
        }
    }
}
