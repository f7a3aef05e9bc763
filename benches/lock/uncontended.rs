//! Uncontended: one session takes and releases a free lock in a loop, per side; µs per
//! cycle (mean, p50, p99). Beside it, the floor: the raw request sequences a lock cycle
//! is made of, timed on one plain session against the same server.

use std::time::Instant;

use zookeeper_client as zk;

use crate::side::{connect_client, PerSide, Side, SESSION_TIMEOUT};
use crate::support::unique_root;
use crate::table::{fmt_num, mean, median, micros, percentile, sorted, Reps, Row, Table};
use crate::{targets, Opts};

/// Floor samples taken and dropped before the counted ones.
const FLOOR_WARMUP: usize = 50;

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

/// Times one of each raw sequence, in µs, on a root of its own.
struct FloorProbe {
    client: zk::Client,
    root: String,
    /// A plain ephemeral node.
    node: String,
    /// The prefix of sequential nodes, as a lock names them.
    prefix: String,
}

const EPHEMERAL: zk::CreateOptions<'static> =
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
const SEQUENTIAL: zk::CreateOptions<'static> =
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());

impl FloorProbe {
    async fn new(hosts: &str) -> FloorProbe {
        let client = connect_client(hosts, SESSION_TIMEOUT).await;
        let root = unique_root("floor");
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client
            .create(&root, b"", &persistent)
            .await
            .expect("floor root");
        FloorProbe {
            node: format!("{root}/n"),
            prefix: format!("{root}/lock-"),
            client,
            root,
        }
    }

    /// One lap: get, create+delete, pipelined, sequential, watch removed, watch fired.
    async fn lap(&self) -> [f64; 6] {
        [
            self.get().await,
            self.create_delete().await,
            self.pipelined().await,
            self.sequential().await,
            self.watched(false).await,
            self.watched(true).await,
        ]
    }

    async fn get(&self) -> f64 {
        let clock = Instant::now();
        self.client.get_data(&self.root).await.expect("get");
        micros(clock.elapsed())
    }

    async fn create_delete(&self) -> f64 {
        let clock = Instant::now();
        self.client
            .create(&self.node, b"", &EPHEMERAL)
            .await
            .expect("create");
        self.client.delete(&self.node, None).await.expect("delete");
        micros(clock.elapsed())
    }

    async fn pipelined(&self) -> f64 {
        let clock = Instant::now();
        let own = self.create_beside_list().await;
        self.client.delete(&own, None).await.expect("delete");
        micros(clock.elapsed())
    }

    async fn sequential(&self) -> f64 {
        let clock = Instant::now();
        let (_, seq) = self
            .client
            .create(&self.prefix, b"", &SEQUENTIAL)
            .await
            .expect("create");
        self.client.list_children(&self.root).await.expect("list");
        self.client
            .delete(&format!("{}{seq}", self.prefix), None)
            .await
            .expect("delete");
        micros(clock.elapsed())
    }

    /// create ‖ list, watch the own node, delete; the watch is dropped before the delete
    /// (`fire == false`) or fires on it (awaited after the clock stops).
    async fn watched(&self, fire: bool) -> f64 {
        let clock = Instant::now();
        let own = self.create_beside_list().await;
        let (_, _, watcher) = self.client.get_and_watch_data(&own).await.expect("watch");
        if !fire {
            drop(watcher);
            self.client.delete(&own, None).await.expect("delete");
            return micros(clock.elapsed());
        }
        self.client.delete(&own, None).await.expect("delete");
        let lap = micros(clock.elapsed());
        watcher.changed().await;
        lap
    }

    /// Creates a sequential node and lists the root, back to back; the node's path.
    async fn create_beside_list(&self) -> String {
        let create = self.client.create(&self.prefix, b"", &SEQUENTIAL);
        let list = self.client.list_children(&self.root);
        let (_, seq) = create.await.expect("create");
        list.await.expect("list");
        format!("{}{seq}", self.prefix)
    }
}

async fn floor(hosts: &str, samples: usize) -> Floor {
    let probe = FloorProbe::new(hosts).await;
    let mut t: [Vec<f64>; 6] = Default::default();
    for i in 0..samples + FLOOR_WARMUP {
        let lap = probe.lap().await;
        if i >= FLOOR_WARMUP {
            for (samples, x) in t.iter_mut().zip(lap) {
                samples.push(x);
            }
        }
    }
    probe
        .client
        .delete(&probe.root, None)
        .await
        .expect("floor root delete");
    let [get, create_delete, pipelined, sequential, watch_removed, watch_fired] = t.map(median);
    Floor {
        get,
        create_delete,
        pipelined,
        sequential,
        watch_removed,
        watch_fired,
    }
}

/// Per-cycle (acquire + release) latencies in µs.
async fn cycles(side: Side, hosts: &str, warmup: usize, cycles: usize) -> Vec<f64> {
    let root = unique_root("uncontended");
    let mut out = Vec::with_capacity(cycles);
    let conn = side.connect(hosts, SESSION_TIMEOUT).await;
    let lock = conn.lock_on(&root);
    for i in 0..warmup + cycles {
        let t = Instant::now();
        lock.lock().await.release().await;
        if i >= warmup {
            out.push(micros(t.elapsed()));
        }
    }
    conn.close();
    out
}

/// Each side's mean, p50 and p99 µs per cycle, over the repetitions.
#[derive(Default)]
pub struct Cycles {
    pub mean: PerSide<Reps>,
    pub p50: PerSide<Reps>,
    pub p99: PerSide<Reps>,
}

/// Both sides' cycles on `hosts`, alternating, `cycles` timed ones per repetition.
pub async fn measure(opts: &Opts, hosts: &str, cycles_per_rep: usize) -> Cycles {
    let mut stats = Cycles::default();
    for side in Side::alternating(opts.reps) {
        let lat = cycles(side, hosts, opts.warmup, cycles_per_rep).await;
        stats.mean[side].push(mean(&lat));
        let s = sorted(lat);
        stats.p50[side].push(percentile(&s, 50.0));
        stats.p99[side].push(percentile(&s, 99.0));
    }
    stats
}

pub async fn run(table: &mut Table, opts: &Opts, label: &str, hosts: &str) {
    eprintln!("uncontended ({label})");
    let floor = floor(hosts, opts.cycles.min(300)).await;
    let stats = measure(opts, hosts, opts.cycles).await;
    let scenario = format!("uncontended, {label}");
    table.push(
        Row::new(&scenario, "mean µs/cycle")
            .medians(&stats.mean)
            .target(targets::uncontended_mean(stats.mean.ratio())),
    );
    table.push(Row::new(&scenario, "p50 µs/cycle").medians(&stats.p50));
    table.push(Row::new(&scenario, "p99 µs/cycle").medians(&stats.p99));
    floor_rows(table, &scenario, &floor);
}

fn floor_rows(table: &mut Table, scenario: &str, floor: &Floor) {
    table.push(
        Row::new(scenario, "raw floor p50 µs: get_data / create+delete").ours(format!(
            "{} / {}",
            fmt_num(floor.get),
            fmt_num(floor.create_delete)
        )),
    );
    table.push(
        Row::new(
            scenario,
            "raw p50 µs: create‖list+delete vs create,list,delete",
        )
        .ours(fmt_num(floor.pipelined))
        .peer(fmt_num(floor.sequential))
        .ratio(floor.pipelined / floor.sequential)
        .target(targets::floor_ratio()),
    );
    table.push(
        Row::new(
            scenario,
            "raw p50 µs: + own-node watch, removed / fired by the delete",
        )
        .ours(format!(
            "{} / {}",
            fmt_num(floor.watch_removed),
            fmt_num(floor.watch_fired)
        )),
    );
}
