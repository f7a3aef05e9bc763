//! The configurations explored: the protocol must keep every invariant, and each
//! known-bad variant must be caught.

#![cfg(test)]

use std::time::Instant;

use super::explorer::{explore, Outcome};
use super::{Config, Kind, Variant};

/// More states than this is a configuration too large for CI.
const LIMIT: usize = 3_000_000;

fn run(name: &str, cfg: &Config) -> Outcome {
    let started = Instant::now();
    let outcome = explore(cfg, LIMIT);
    println!(
        "{name} ({:?}): {} states in {:?}",
        cfg.variant,
        outcome.states,
        started.elapsed()
    );
    if let Some(violation) = &outcome.violation {
        println!("{violation}");
    }
    outcome
}

fn mutex(kinds: &[Kind]) -> Config {
    Config {
        kinds: kinds.to_vec(),
        variant: Variant::Correct,
        entries: 2,
        acquisitions: 1,
        nemesis: 0,
        writes: true,
        forge: false,
        losses: 0,
        expiries: 0,
        give_ups: 0,
    }
}

use Kind::{Foreign, Reader, Writer};

#[test]
fn plain() {
    let outcome = run("plain", &mutex(&[Writer, Writer, Writer]));
    assert!(outcome.violation.is_none());
}

fn with(mut cfg: Config, f: impl FnOnce(&mut Config)) -> Config {
    f(&mut cfg);
    cfg
}

#[test]
fn scratch() {
    let base = mutex(&[Writer, Writer]);
    let cfgs = [
        ("nemesis2", with(base.clone(), |c| c.nemesis = 2)),
        (
            "loss",
            with(base.clone(), |c| {
                c.nemesis = 1;
                c.losses = 1;
                c.expiries = 1
            }),
        ),
        (
            "foreign",
            with(mutex(&[Writer, Foreign]), |c| c.nemesis = 2),
        ),
        (
            "rw",
            with(mutex(&[Writer, Reader, Writer]), |c| c.nemesis = 1),
        ),
    ];
    for (name, cfg) in &cfgs {
        for variant in [
            Variant::Correct,
            Variant::NoConnectionCheck,
            Variant::NoOwnWatch,
            Variant::FirstExempt,
            Variant::ZeroRequest,
        ] {
            let cfg = with(cfg.clone(), |c| c.variant = variant);
            run(name, &cfg);
        }
    }
}
