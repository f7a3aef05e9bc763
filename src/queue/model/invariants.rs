//! The invariants, checked in every state reached.

use super::contender::Phase;
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
