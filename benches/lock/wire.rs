//! On the wire: what users meet between machines. The uncontended cycle, 8 contending
//! sessions, the queue drain at 100 and 1,000 waiters and the election fail-over, run
//! through a proxy that delays each direction by 1 ms and by 0.5 ms (round trips of 2 and
//! 1 ms). Beside them, the floor: one read, and two reads sent back to back, on a plain
//! zookeeper-client connection (Nagle's algorithm on) and on a zk-recipes session's
//! connection (`TCP_NODELAY` set by the session).

use std::time::{Duration, Instant};

use zk_recipes::Session;
use zookeeper_client as zk;

use crate::delay::DelayProxy;
use crate::side::{connect_client, SESSION_TIMEOUT};
use crate::support::Ensemble;
use crate::table::{fmt_num, median, micros, Row, Table};
use crate::{contended, drain, failover, targets, uncontended, Opts};

/// The one-way delays measured.
const DELAYS: [Duration; 2] = [Duration::from_millis(1), Duration::from_micros(500)];
/// Floor samples per connection kind.
const FLOOR_SAMPLES: usize = 200;

pub async fn run(table: &mut Table, opts: &Opts, zk: &Ensemble) {
    for one_way in DELAYS {
        let proxy = DelayProxy::start(&zk.address(0), one_way);
        let hosts = proxy.address();
        let label = format!("{} ms one way", one_way.as_secs_f64() * 1e3);
        eprintln!("on the wire, {label}");
        floor_rows(table, &label, &hosts).await;
        uncontended_rows(table, opts, &label, &hosts).await;
        let stats = contended::measure(opts, &hosts).await;
        table.push(
            Row::new(
                format!("contended, {} sessions, {label}", contended::CONTENDERS),
                "acquisitions/s",
            )
            .medians(&stats)
            .target(targets::wire_contended(stats.ratio())),
        );
        for waiters in opts.waiters.iter().copied().filter(|w| *w <= 1000) {
            let q = drain::queue(opts, zk, &hosts, waiters).await;
            let (ours, peer) = (q.handoff().ours.median(), q.handoff().peer.median());
            let scenario = format!("queue drain, {} waiters, {label}", q.waiters());
            table.push(
                q.row(scenario)
                    .target(targets::wire_drain(waiters, ours / peer)),
            );
        }
        let stats = failover::measure(opts, &hosts).await;
        table.push(
            Row::new(format!("election fail-over, {label}"), failover::METRIC).medians(&stats),
        );
    }
}

async fn uncontended_rows(table: &mut Table, opts: &Opts, label: &str, hosts: &str) {
    // A cycle costs milliseconds here: fewer cycles give the same p50.
    let stats = uncontended::measure(opts, hosts, opts.cycles / 2).await;
    let scenario = format!("uncontended, {label}");
    table.push(
        Row::new(&scenario, "p50 µs/cycle")
            .medians(&stats.p50)
            .target(targets::wire_uncontended(stats.p50.ratio())),
    );
    table.push(Row::new(&scenario, "mean µs/cycle").medians(&stats.mean));
}

/// One read, and two back to back, on each kind of connection: what pipelining can gain,
/// and what Nagle's algorithm takes back.
async fn floor_rows(table: &mut Table, label: &str, hosts: &str) {
    let session = Session::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect(hosts)
        .await
        .expect("zk-recipes session");
    let ours = session.client().expect("live session");
    let plain = connect_client(hosts, SESSION_TIMEOUT).await;
    let (ours_one, ours_two) = reads(&ours).await;
    let (plain_one, plain_two) = reads(&plain).await;
    drop(ours);
    session.close();
    let scenario = format!("raw requests, {label}");
    table.push(
        Row::new(&scenario, "p50 µs: one get_data (one round trip)")
            .ours(fmt_num(ours_one))
            .peer(fmt_num(plain_one))
            .ratio(ours_one / plain_one),
    );
    table.push(
        Row::new(
            &scenario,
            "p50 µs: get_data ‖ get_data (ours: session socket, TCP_NODELAY; peer: Nagle)",
        )
        .ours(fmt_num(ours_two))
        .peer(fmt_num(plain_two))
        .ratio(ours_two / plain_two),
    );
}

/// p50 µs of one read, and of two reads sent back to back.
async fn reads(client: &zk::Client) -> (f64, f64) {
    let (mut one, mut two) = (Vec::new(), Vec::new());
    for _ in 0..FLOOR_SAMPLES {
        let clock = Instant::now();
        client.get_data("/").await.expect("get");
        one.push(micros(clock.elapsed()));
        let clock = Instant::now();
        let (a, b) = (client.get_data("/"), client.get_data("/"));
        a.await.expect("get");
        b.await.expect("get");
        two.push(micros(clock.elapsed()));
    }
    (median(one), median(two))
}
