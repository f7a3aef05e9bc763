//! The configurations explored: the protocol must keep every invariant in each, and each
//! known-bad variant must be caught (its trace is printed: `--nocapture`). Together about
//! three million states: in a debug build about a minute of one core (half on two).

use std::cell::OnceCell;
use std::time::Instant;

use super::explorer::{explore, Order, Outcome};
use super::{Config, Kind, Variant};
use Kind::{Foreign, Reader, Writer};

/// More states than this is a configuration too large for CI.
const LIMIT: usize = 5_000_000;

fn run(name: &str, cfg: &Config) -> Outcome {
    run_in(name, cfg, Order::Breadth)
}

fn run_in(name: &str, cfg: &Config, order: Order) -> Outcome {
    let started = Instant::now();
    let outcome = explore(cfg, LIMIT, order);
    println!(
        "{name} ({:?}): {} states{} in {:?}",
        cfg.variant,
        outcome.states,
        if outcome.complete { "" } else { " (stopped)" },
        started.elapsed()
    );
    if let Some(violation) = &outcome.violation {
        println!("{violation}");
    }
    outcome
}

/// Contenders of `kinds`, each acquiring once (entering at most twice), without faults.
fn mutex(kinds: &[Kind]) -> Config {
    Config {
        kinds: kinds.to_vec(),
        variant: Variant::Correct,
        entries: 2,
        acquisitions: 1,
        nemesis: 0,
        deletes: true,
        writes: true,
        forge: false,
        losses: 0,
        expiries: 0,
        give_ups: 0,
        leases: 1,
        gate: true,
        names: OnceCell::new(),
    }
}

/// `cfg`, changed by `change`.
fn with(mut cfg: Config, change: impl FnOnce(&mut Config)) -> Config {
    change(&mut cfg);
    cfg
}

/// Explores `cfg` with the protocol: every reachable state must keep every invariant.
fn holds(name: &str, cfg: Config) {
    let outcome = run(name, &cfg);
    if let Some(violation) = outcome.violation {
        panic!("{name}: {violation}");
    }
    assert!(outcome.complete, "{name}: more than {LIMIT} states");
}

/// Explores `cfg` with `variant`: it must be caught.
fn caught(name: &str, variant: Variant, cfg: Config) {
    let outcome = run(name, &with(cfg, |c| c.variant = variant));
    assert!(
        outcome.violation.is_some(),
        "{name}: {variant:?} was not caught in {} states",
        outcome.states
    );
}

/// Two writers through a lost connection, an expiry and a nemesis action: the
/// configuration every known-bad variant must fail in.
fn connection() -> Config {
    with(mutex(&[Writer, Writer]), |c| {
        c.nemesis = 1;
        c.losses = 1;
        c.expiries = 1;
    })
}

#[test]
fn three_writers() {
    holds(
        "three writers, one gives up",
        with(mutex(&[Writer, Writer, Writer]), |c| c.give_ups = 1),
    );
}

#[test]
fn nemesis() {
    holds(
        "two writers, two nemesis actions",
        with(mutex(&[Writer, Writer]), |c| c.nemesis = 2),
    );
}

#[test]
fn connection_and_expiry() {
    holds("two writers, connection loss and expiry", connection());
}

#[test]
fn give_up_through_faults() {
    holds(
        "two writers, a give-up, nemesis, connection loss",
        with(mutex(&[Writer, Writer]), |c| {
            c.give_ups = 1;
            c.nemesis = 1;
            c.losses = 1;
        }),
    );
}

#[test]
fn acquire_twice() {
    holds(
        "two writers, two acquisitions each",
        with(mutex(&[Writer, Writer]), |c| {
            c.acquisitions = 2;
            c.entries = 3;
            c.nemesis = 1;
        }),
    );
}

#[test]
fn foreign() {
    holds("two writers and Curator", mutex(&[Writer, Writer, Foreign]));
    holds(
        "a writer and Curator through faults",
        with(mutex(&[Writer, Foreign]), |c| {
            c.nemesis = 2;
            c.losses = 1;
            c.expiries = 1;
        }),
    );
}

#[test]
fn readers_and_writers() {
    for (name, kinds) in [
        ("reader, writer", [Reader, Writer]),
        ("writer, reader", [Writer, Reader]),
    ] {
        holds(
            name,
            with(mutex(&kinds), |c| {
                c.nemesis = 1;
                c.losses = 1;
                c.expiries = 1;
            }),
        );
    }
}

#[test]
fn semaphore() {
    use Kind::Lease;
    holds(
        "three leases of two",
        with(mutex(&[Lease, Lease, Lease]), |c| {
            c.leases = 2;
            c.give_ups = 1;
        }),
    );
    holds(
        "two leases of one through faults",
        with(mutex(&[Lease, Lease]), |c| {
            c.nemesis = 1;
            c.losses = 1;
            c.expiries = 1;
        }),
    );
}

/// Without the semaphore's gate, leases that all entered a crowded root wait for each
/// other: the liveness check catches it.
#[test]
fn leases_without_the_gate() {
    let cfg = with(mutex(&[Kind::Lease, Kind::Lease, Kind::Lease]), |c| {
        c.leases = 2;
        c.gate = false;
    });
    let outcome = run("leases without the gate", &cfg);
    assert!(outcome
        .violation
        .is_some_and(|v| v.broken.starts_with("liveness")));
}

#[test]
fn without_a_connection_check() {
    caught("(a)", Variant::NoConnectionCheck, connection());
}

#[test]
fn without_an_own_watch() {
    caught("(b)", Variant::NoOwnWatch, connection());
}

#[test]
fn first_blockers_exempt_from_signalling() {
    caught("(c)", Variant::FirstExempt, connection());
}

#[test]
fn zero_request_hand_off() {
    caught("(d)", Variant::ZeroRequest, connection());
}

/// A signal is trusted as heard: someone who creates a node on a signal path (with write
/// access to the root) can let a waiter in while a node ahead of it exists (I4), and so
/// while another holds (I2). A known limit, as any write access to the root is (it can
/// delete a holder's node as well).
#[test]
fn a_forged_signal_is_believed() {
    let cfg = with(mutex(&[Writer, Writer, Writer]), |c| {
        c.entries = 1;
        c.nemesis = 1;
        c.deletes = false;
        c.writes = false;
        c.forge = true;
        c.give_ups = 1;
    });
    // Depth first: the violation is deep.
    let outcome = run_in("forged signal", &cfg, Order::Depth);
    assert!(outcome
        .violation
        .is_some_and(|v| v.broken.starts_with("I4") || v.broken.starts_with("I2")));
}

/// Larger configurations, for a release build (`cargo test --release --lib model::tests::
/// larger -- --ignored --nocapture`; minutes).
#[test]
#[ignore]
fn larger() {
    let cfgs = [
        (
            "three writers, nemesis",
            with(mutex(&[Writer, Writer, Writer]), |c| {
                c.nemesis = 1;
                c.writes = false;
            }),
        ),
        (
            "writer, reader, writer, nemesis",
            with(mutex(&[Writer, Reader, Writer]), |c| {
                c.nemesis = 1;
                c.writes = false;
            }),
        ),
        (
            "reader, writer, reader, nemesis",
            with(mutex(&[Reader, Writer, Reader]), |c| {
                c.nemesis = 1;
                c.writes = false;
            }),
        ),
        (
            "two writers, every fault",
            with(mutex(&[Writer, Writer]), |c| {
                c.nemesis = 2;
                c.losses = 1;
                c.expiries = 1;
                c.give_ups = 1;
            }),
        ),
    ];
    explore_larger(&cfgs);
}

/// As [`larger`], with faults.
#[test]
#[ignore]
fn larger_with_faults() {
    let cfgs = [
        (
            "three writers, nemesis, loss, expiry",
            with(mutex(&[Writer, Writer, Writer]), |c| {
                c.nemesis = 1;
                c.writes = false;
                c.losses = 1;
                c.expiries = 1;
            }),
        ),
        (
            "writer, Curator, writer, nemesis, loss",
            with(mutex(&[Writer, Foreign, Writer]), |c| {
                c.nemesis = 1;
                c.writes = false;
                c.losses = 1;
            }),
        ),
        (
            "three writers, give-up, nemesis, loss",
            with(mutex(&[Writer, Writer, Writer]), |c| {
                c.give_ups = 1;
                c.nemesis = 1;
                c.writes = false;
                c.losses = 1;
            }),
        ),
    ];
    explore_larger(&cfgs);
}

fn explore_larger(cfgs: &[(&str, Config)]) {
    for (name, cfg) in cfgs {
        let started = Instant::now();
        let outcome = explore(cfg, 15_000_000, Order::Breadth);
        println!(
            "{name}: {} states, complete {}, in {:?}",
            outcome.states,
            outcome.complete,
            started.elapsed()
        );
        if let Some(violation) = &outcome.violation {
            panic!("{name}: {violation}");
        }
    }
}
