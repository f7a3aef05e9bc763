//! Lock benchmark: zk-recipes' `Mutex` against zookeeper-client's built-in lock (the peer),
//! and its `RwLock` and `Semaphore` against Apache Curator's (a Java peer), on the same real
//! ZooKeeper servers, in the same run.
//!
//! `cargo bench --bench lock` (its run time and results: `benches/README.md`), `-- --quick`
//! for a short run.
//! Other flags: `--only <scenario>` (wire, uncontended, cpu, contended, drain, election,
//! recipes, per-key; and probe, a counting probe, with `--probe`: see `probe`),
//! `--waiters 100,1000,10000`, `--drain-timeout <secs>`, `--reps <n>`.
//!
//! Prints one markdown table of medians over the repetitions, with the spread
//! `[min–max]` to show the noise, the ratio zk-recipes / peer, and the team's targets.
//!
//! This file holds the options and the run order; each scenario family has its own
//! module, the two sides are in `side`, the targets in `targets`, the statistics and
//! table in `table`, the memory probes in `alloc`, the client's CPU per acquisition in `cpu`.

use zk_harness as support;

mod alloc;
mod contended;
mod cpu;
mod delay;
mod drain;
mod failover;
mod per_key;
mod per_key_one;
mod probe;
mod recipes;
mod side;
mod table;
mod targets;
mod uncontended;
mod wire;

use std::time::Duration;

use support::Ensemble;
use table::Table;

pub struct Opts {
    /// Repetitions per scenario, each side once per repetition.
    pub reps: usize,
    /// Timed lock cycles per uncontended run.
    pub cycles: usize,
    /// Untimed lock cycles before them.
    pub warmup: usize,
    /// How long the contenders loop.
    pub contended: Duration,
    /// Queue sizes of the drain scenario.
    pub waiters: Vec<usize>,
    /// How long a queue may take to drain (twice that at 10,000 waiters).
    pub drain_timeout: Duration,
    /// Run this scenario alone.
    pub only: Option<String>,
    /// What the counting probe counts (`--only probe`).
    pub probe: Option<String>,
}

impl Opts {
    fn parse() -> Opts {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let mut opts = if args.iter().any(|a| a == "--quick") {
            Opts::quick()
        } else {
            Opts::full()
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
        opts.probe = value("--probe");
        opts
    }

    fn quick() -> Opts {
        Opts {
            reps: 1,
            cycles: 200,
            warmup: 30,
            contended: Duration::from_millis(1500),
            waiters: vec![100, 1000],
            drain_timeout: Duration::from_secs(15),
            only: None,
            probe: None,
        }
    }

    fn full() -> Opts {
        Opts {
            reps: 3,
            cycles: 500,
            warmup: 100,
            contended: Duration::from_secs(3),
            waiters: vec![100, 1000, 10_000],
            drain_timeout: Duration::from_secs(30),
            only: None,
            probe: None,
        }
    }

    /// Whether `scenario` runs: every one but the probe, unless one is named alone.
    fn runs(&self, scenario: &str) -> bool {
        match self.only.as_deref() {
            Some(only) => only == scenario,
            None => scenario != "probe",
        }
    }
}

fn main() {
    let opts = Opts::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let table = runtime.block_on(run(&opts));
    println!("{}", table.render());
}

/// The scenarios, in the order of the table.
async fn run(opts: &Opts) -> Table {
    let mut table = Table::default();
    table.note(format!(
        "{} cores; {} repetitions per scenario (10,000 waiters: 1); cells are median [min–max]",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        opts.reps
    ));
    let standalone = Ensemble::start(1).await;
    let hosts = standalone.connect_string();
    if opts.runs("wire") {
        wire::run(&mut table, opts, &standalone).await;
    }
    if opts.runs("uncontended") {
        uncontended::run(&mut table, opts, "standalone", &hosts).await;
        via_follower(&mut table, opts).await;
    }
    if opts.runs("cpu") {
        cpu::run(&mut table, opts, &standalone).await;
    }
    if opts.runs("contended") {
        contended::run(&mut table, opts, &hosts).await;
    }
    if opts.runs("election") {
        failover::run(&mut table, opts, &hosts).await;
    }
    if opts.runs("drain") {
        drain::run(&mut table, opts, &standalone).await;
    }
    if opts.runs("recipes") {
        recipes::run(&mut table, opts, &standalone).await;
    }
    if opts.runs("per-key") {
        per_key::run(&mut table, opts, &standalone).await;
    }
    if opts.runs("probe") {
        probe::run(opts, &standalone).await;
    }
    drop(standalone);
    table
}

/// Uncontended on a 3-server ensemble, both sides on the same follower: a write through
/// a follower costs a hop more than one through the leader, so a random server per
/// client would decide the ratio.
async fn via_follower(table: &mut Table, opts: &Opts) {
    let ensemble = Ensemble::start(3).await;
    let leader = ensemble.wait_for_leader(Duration::from_secs(30)).await;
    let follower = ensemble.address((leader + 1) % ensemble.len());
    uncontended::run(table, opts, "3-server ensemble, via a follower", &follower).await;
}
