//! The invariants, checked in every state reached.

use super::super::decide::sort_contenders;
use super::contender::Phase;
use super::names::seq_of;
use super::server::Seq;
use super::{Config, Kind, World};

/// Whether `world` keeps every invariant; `quiescent`: no step can be taken in it but
/// faults and give-ups.
pub(super) fn check(cfg: &Config, world: &World, quiescent: bool) -> Result<(), String> {
    for (c, client) in world.clients.iter().enumerate() {
        if client.broke_i1 {
            return Err(format!(
                "I1: c{c} decided that it holds on a view in which its node was gone"
            ));
        }
    }
    // I2: trusted holders whose nodes exist.
    let holders: Vec<(usize, Kind)> = world
        .clients
        .iter()
        .enumerate()
        .filter(|(_, client)| client.phase == Phase::Holding { trusted: true })
        .filter(|(_, client)| client.own.is_some_and(|own| world.server.is_live(own)))
        .map(|(c, _)| (c, cfg.kinds[c]))
        .collect();
    let exclusive = holders.iter().filter(|(_, kind)| kind.exclusive()).count();
    if exclusive > 0 && holders.len() > 1 {
        return Err(format!(
            "I2: trusted holders {holders:?} exclude each other"
        ));
    }
    let leases = holders
        .iter()
        .filter(|(_, kind)| *kind == Kind::Lease)
        .count();
    if leases > usize::from(cfg.leases) {
        return Err(format!("I2: {leases} trusted leases of {}", cfg.leases));
    }
    // I4: a holder has no node ahead of it that keeps it from holding (a successor never
    // takes over while its predecessor's node exists), and observers list an exclusive
    // holder first (`sort_contenders`, as `LeaderElection::leader` and `contenders()` do).
    for &(c, kind) in &holders {
        let own = world.clients[c].own.unwrap_or_default();
        let ahead = (0..own).filter(|&seq| world.server.is_live(seq));
        let made_by = |seq: &Seq| world.server.made_by[usize::from(*seq)];
        let blocking = match kind {
            Kind::Writer | Kind::Foreign => ahead.min(),
            Kind::Reader => ahead.filter(|seq| made_by(seq) != Kind::Reader).min(),
            Kind::Lease => None,
        };
        if let Some(seq) = blocking {
            return Err(format!(
                "I4: c{c} holds while node {seq} ahead of it exists"
            ));
        }
        if kind.exclusive() {
            let mut names = cfg.listing(&world.server, world.server.live, c, None);
            sort_contenders(&mut names);
            let first = names.first().map(|name| seq_of(name));
            if first != Some(own) {
                return Err(format!(
                    "I4: c{c} holds, and observers list node {first:?} first"
                ));
            }
        }
    }
    if quiescent {
        if let Some(c) = world.clients.iter().position(|client| client.listening()) {
            return Err(format!(
                "liveness: nothing more can happen, and c{c} is not done"
            ));
        }
        let ours = (0..world.server.owner.len())
            .filter(|&seq| world.server.live & (1 << seq) != 0)
            .find(|&seq| cfg.kinds[usize::from(world.server.owner[seq])].ours());
        if let Some(seq) = ours {
            return Err(format!("I3: node {seq} of ours outlives its contender"));
        }
    }
    Ok(())
}
