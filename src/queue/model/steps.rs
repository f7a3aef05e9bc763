//! The steps the system can take from a state, and how a trace shows them.

use std::fmt::Write as _;

use super::contender::{Client, Phase};
use super::explorer::Model;
use super::faults::orders;
use super::server::{Change, Msg, Path, Seq, Server};
use super::{invariants, Budget, Config, Kind, World};

/// One step; contenders are numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Step {
    /// The server serves the contender's oldest request not yet served.
    Serve(u8),
    /// The contender reads the next message from its server.
    Deliver(u8),
    /// The contender reconnects; the server answers its watches in this order.
    Reconnect(u8, u8),
    /// The lease takes the semaphore's gate and enters.
    Gate(u8),
    /// The holder releases (trusted or not).
    Release(u8),
    /// The waiter gives up (its deadline passed).
    GiveUp(u8),
    /// The contender's connection breaks.
    Lose(u8),
    /// The disconnected contender's session expires.
    Expire(u8),
    /// The nemesis deletes a node.
    Delete(Seq),
    /// The nemesis writes into a node.
    Write(Seq),
    /// The nemesis deletes a node and the next one in one transaction (`deleteall`).
    DeleteAll(Seq, Seq),
    /// The nemesis creates the signal path of a node.
    Forge(Seq),
}

impl Step {
    /// Faults and give-ups: steps that need not happen for the system to go on.
    fn optional(self) -> bool {
        !matches!(
            self,
            Step::Serve(_)
                | Step::Deliver(_)
                | Step::Reconnect(..)
                | Step::Gate(_)
                | Step::Release(_)
        )
    }
}

impl Model for Config {
    type State = World;
    type Step = Step;

    fn init(&self) -> World {
        let n = self.kinds.len();
        let mut world = World {
            server: Server::default(),
            clients: self
                .kinds
                .iter()
                .map(|kind| Client::new(self.entries, self.acquisitions, *kind))
                .collect(),
            budget: Budget {
                nemesis: self.nemesis,
                losses: self.losses,
                expiries: self.expiries,
                give_ups: self.give_ups,
            },
        };
        for c in 0..n {
            world.enter(c);
        }
        world
    }

    fn successors(&self, world: &World) -> Vec<(Step, World)> {
        let mut steps = Vec::new();
        for (c, client) in world.clients.iter().enumerate() {
            let i = u8::try_from(c).unwrap_or(u8::MAX);
            let ours = self.kinds[c].ours();
            if client.connected && client.unserved > 0 {
                steps.push(Step::Serve(i));
            }
            if client.connected && client.inbox.iter().any(|msg| *msg != Msg::Ghost) {
                steps.push(Step::Deliver(i));
            }
            if !client.connected {
                let n = orders(world.missed(c).len());
                steps.extend((0..n).map(|order| Step::Reconnect(i, order as u8)));
            }
            let gate_free = !self.gate
                || world
                    .clients
                    .iter()
                    .all(|other| other.kind != Kind::Lease || !other.in_gate());
            if client.phase == Phase::Gated && gate_free {
                steps.push(Step::Gate(i));
            }
            if matches!(client.phase, Phase::Holding { .. }) {
                steps.push(Step::Release(i));
            }
            let waiting = matches!(
                client.phase,
                Phase::Waiting(_) | Phase::Checking { .. } | Phase::Crowded
            );
            if ours && waiting && world.budget.give_ups > 0 {
                steps.push(Step::GiveUp(i));
            }
            if ours && client.connected && client.listening() && world.budget.losses > 0 {
                steps.push(Step::Lose(i));
            }
            if !client.connected && !client.expired && world.budget.expiries > 0 {
                steps.push(Step::Expire(i));
            }
        }
        if world.budget.nemesis > 0 {
            for seq in (0..32).filter(|&seq| world.server.is_live(seq)) {
                if self.deletes {
                    steps.push(Step::Delete(seq));
                    if let Some(next) = world.next_live(seq) {
                        steps.push(Step::DeleteAll(seq, next));
                    }
                }
                if self.writes {
                    steps.push(Step::Write(seq));
                }
                if self.forge && !world.server.exists(Path::Signal(seq)) {
                    steps.push(Step::Forge(seq));
                }
            }
        }
        steps
            .into_iter()
            .map(|step| {
                let mut next = world.clone();
                next.take(step, self);
                (step, next)
            })
            .collect()
    }

    fn optional(step: Step) -> bool {
        step.optional()
    }

    fn check(&self, world: &World, quiescent: bool) -> Result<(), String> {
        invariants::check(self, world, quiescent)
    }

    fn describe(&self, step: Step, before: &World, after: &World) -> String {
        let mut line = match step {
            Step::Serve(c) => {
                let client = &before.clients[usize::from(c)];
                let req = client.awaiting[client.awaiting.len() - usize::from(client.unserved)];
                format!("server serves c{c}'s {req:?}")
            }
            Step::Deliver(c) => {
                let client = &before.clients[usize::from(c)];
                let msg = client.inbox.iter().find(|msg| **msg != Msg::Ghost);
                format!("c{c} reads {msg:?}")
            }
            other => format!("{other:?}"),
        };
        let _ = write!(line, "\n      now: live {:?};", live(&after.server));
        for (c, client) in after.clients.iter().enumerate() {
            let _ = write!(
                line,
                " c{c}({:?}) own {:?} {:?}{};",
                self.kinds[c],
                client.own,
                client.phase,
                if client.connected {
                    ""
                } else {
                    " disconnected"
                }
            );
        }
        line
    }
}

fn live(server: &Server) -> Vec<(Seq, usize)> {
    (0..32)
        .filter(|&seq| server.is_live(seq))
        .map(|seq| (seq, usize::from(server.owner[usize::from(seq)])))
        .collect()
}

impl World {
    fn take(&mut self, step: Step, cfg: &Config) {
        match step {
            Step::Serve(c) => self.serve(usize::from(c)),
            Step::Deliver(c) => self.deliver(usize::from(c), cfg),
            Step::Reconnect(c, order) => self.reconnect(usize::from(c), usize::from(order)),
            Step::Gate(c) => {
                let client = &mut self.clients[usize::from(c)];
                client.phase = Phase::Entering { recovering: false };
                self.enter(usize::from(c));
            }
            Step::Release(c) => self.leave(usize::from(c), cfg),
            Step::GiveUp(c) => {
                self.budget.give_ups -= 1;
                self.leave(usize::from(c), cfg);
            }
            Step::Lose(c) => self.lose(usize::from(c)),
            Step::Expire(c) => self.expire(usize::from(c)),
            Step::Delete(seq) => self.nemesis(&[Change::Delete(Path::Node(seq))]),
            Step::Write(seq) => self.nemesis(&[Change::Write(seq)]),
            Step::DeleteAll(first, next) => self.nemesis(&[
                Change::Delete(Path::Node(first)),
                Change::Delete(Path::Node(next)),
            ]),
            Step::Forge(seq) => self.nemesis(&[Change::Create(Path::Signal(seq))]),
        }
    }
}
