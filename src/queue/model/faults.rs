//! Faults: a lost connection and its reconnection, session expiry, and the nemesis.

use super::contender::Phase;
use super::server::{Change, Event, Path, Req, Seq};
use super::World;

impl World {
    /// The connection of contender `c` breaks: what the server had not delivered is lost,
    /// and so are the requests it had not served (all are sent again on reconnection).
    pub(super) fn lose(&mut self, c: usize) {
        self.budget.losses -= 1;
        let client = &mut self.clients[c];
        client.connected = false;
        client.inbox.clear();
        // Watches whose reply was lost are set again by the request sent again.
        client.watches.retain(|watch| watch.client);
        for watch in &mut client.watches {
            watch.server = false;
        }
        match &mut client.phase {
            Phase::Holding { trusted } => *trusted = false,
            Phase::Waiting(waiting) => waiting.connection_changed = true,
            Phase::Entering { recovering } if client.awaiting.contains(&Req::Create) => {
                // The create's outcome is unknown: look for the node by its uuid.
                client.awaiting.retain(|req| *req != Req::Create);
                *recovering = true;
            }
            Phase::Entering { .. }
            | Phase::Checking { .. }
            | Phase::Crowded
            | Phase::Gated
            | Phase::Leaving { .. } => {}
            Phase::Done => unreachable!("a done contender has no connection to lose"),
        }
        client.unserved = u8::try_from(client.awaiting.len()).unwrap_or(u8::MAX);
    }

    /// What the server answers, on reconnection of contender `c`, for the watches its
    /// client sets again: a notification for each path that changed since it was watched.
    pub(super) fn missed(&self, c: usize) -> Vec<(Path, Event)> {
        let client = &self.clients[c];
        if client.expired {
            return Vec::new();
        }
        let server = &self.server;
        client
            .watches
            .iter()
            .filter_map(|watch| {
                let event = match watch.path {
                    Path::Node(seq) if !server.is_live(seq) => Event::Deleted,
                    Path::Node(_) | Path::Children if watch.written => Event::Changed,
                    Path::Signal(seq) if server.exists(Path::Signal(seq)) => Event::Created,
                    Path::Node(_) | Path::Signal(_) | Path::Children => return None,
                };
                Some((watch.path, event))
            })
            .collect()
    }

    /// Contender `c` reconnects; the server answers for its watches in the `order`-th
    /// order of [`missed`](Self::missed). A client whose session expired learns it now.
    pub(super) fn reconnect(&mut self, c: usize, order: usize) {
        let mut missed = self.missed(c);
        let client = &mut self.clients[c];
        client.connected = true;
        if client.expired {
            client.expired = false;
            client.awaiting.clear();
            client.unserved = 0;
            client.watches.clear();
            return match client.phase {
                Phase::Entering { .. }
                | Phase::Waiting(_)
                | Phase::Checking { .. }
                | Phase::Crowded => self.enter(c),
                Phase::Holding { .. } => self.left(c, false),
                Phase::Leaving { give_up } => self.left(c, give_up),
                Phase::Gated | Phase::Done => {}
            };
        }
        for watch in &mut client.watches {
            watch.server = !missed.iter().any(|(path, _)| *path == watch.path);
        }
        let mut order = order;
        while !missed.is_empty() {
            let (path, event) = missed.remove(order % missed.len());
            order /= missed.len() + 1;
            client
                .inbox
                .push(super::server::Msg::Notification(path, event));
        }
    }

    /// The session of disconnected contender `c` expires: the server deletes its node.
    pub(super) fn expire(&mut self, c: usize) {
        self.budget.expiries -= 1;
        self.clients[c].expired = true;
        // Its node, even one whose create's reply it never read.
        let owned = (0..32).find(|&seq| {
            self.server.is_live(seq) && usize::from(self.server.owner[usize::from(seq)]) == c
        });
        if let Some(own) = owned {
            self.apply(&[Change::Delete(Path::Node(own))]);
        }
    }

    /// The nemesis makes `changes` (one transaction).
    pub(super) fn nemesis(&mut self, changes: &[Change]) {
        self.budget.nemesis -= 1;
        self.apply(changes);
    }

    /// The live node after `seq`, if any (the other node a `deleteall` deletes with it).
    pub(super) fn next_live(&self, seq: Seq) -> Option<Seq> {
        (seq + 1..32).find(|&next| self.server.is_live(next))
    }
}

/// How many orders the server may answer `n` missed changes in.
pub(super) fn orders(n: usize) -> usize {
    (1..=n).product()
}
