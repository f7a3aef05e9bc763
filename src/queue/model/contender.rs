//! A contender's client: what it sends, and what it does with what it hears, one message
//! at a time, in the order its server sent them.

use super::super::decide::{find_own, listed, taken, Place};
use super::names::{seq_of, uuid, ROOT};
use super::server::{bit, Event, Msg, Path, Reply, Req, Seq, Watch};
use super::{Config, Kind, Variant, World};

/// A contender's session and where it stands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Client {
    pub(super) phase: Phase,
    /// Its node, once it knows it.
    pub(super) own: Option<Seq>,
    /// Requests sent and not yet answered, oldest first.
    pub(super) awaiting: Vec<Req>,
    /// How many of the last `awaiting` the server has not served yet.
    pub(super) unserved: u8,
    /// What the server sent and the client has not read yet, oldest first.
    pub(super) inbox: Vec<Msg>,
    pub(super) watches: Vec<Watch>,
    pub(super) connected: bool,
    /// The session expired while disconnected; the client learns it on reconnection.
    pub(super) expired: bool,
    /// Creates left (see [`Config::entries`]).
    pub(super) entries: u8,
    /// Acquisitions left.
    pub(super) acquisitions: u8,
    /// It decided that it holds while its node was gone (invariant I1).
    pub(super) broke_i1: bool,
    /// What it is (its node's name says so; a lease enters through the semaphore's gate).
    pub(super) kind: Kind,
}

/// Where a contender stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    /// Create and listing sent; `recovering`: the create's reply was lost, and the listing
    /// looks for the node by its owner (the uuid in its name).
    Entering {
        recovering: bool,
    },
    Waiting(Waiting),
    /// After its blocker left, the one request of the fallback: a listing if `list`, else
    /// an exists of its own node.
    Checking {
        list: bool,
    },
    /// A lease waiting for the semaphore's gate, a mutex (modelled as one: the mutex is
    /// the writers' protocol); it holds the gate from entering until it holds.
    Gated,
    /// A lease in a crowded root: listing it with a child watch until few enough are left.
    Crowded,
    Holding {
        trusted: bool,
    },
    /// Its removal was sent: a release, or a give-up (`give_up`).
    Leaving {
        give_up: bool,
    },
    Done,
}

/// A waiter, and what it heard since it armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Waiting {
    pub(super) blocker: Seq,
    /// The blocker was the lowest of the listing that placed us.
    pub(super) first: bool,
    /// The blocker's deletion was heard (or it was gone before watched).
    pub(super) gone: bool,
    /// The blocker's left-first signal was heard created.
    pub(super) signal: bool,
    /// The own exists watch was set (the node existed when served).
    pub(super) own_set: bool,
    /// The own watch fired for a write: it says nothing any more.
    pub(super) own_spent: bool,
    /// The connection changed since arming.
    pub(super) connection_changed: bool,
}

impl Client {
    pub(super) fn new(entries: u8, acquisitions: u8, kind: Kind) -> Client {
        Client {
            phase: Phase::Done,
            own: None,
            awaiting: Vec::new(),
            unserved: 0,
            inbox: Vec::new(),
            watches: Vec::new(),
            connected: true,
            expired: false,
            entries,
            acquisitions,
            broke_i1: false,
            kind,
        }
    }

    /// Whether it is between entering and holding: a lease that is holds the semaphore's
    /// gate (a mutex).
    pub(super) fn in_gate(&self) -> bool {
        matches!(
            self.phase,
            Phase::Entering { .. } | Phase::Waiting(_) | Phase::Checking { .. } | Phase::Crowded
        )
    }

    /// Whether it still takes part (a done contender hears nothing).
    pub(super) fn listening(&self) -> bool {
        self.phase != Phase::Done
    }

    /// Whether it may still decide to hold on what it hears.
    pub(super) fn may_decide(&self) -> bool {
        matches!(
            self.phase,
            Phase::Entering { .. } | Phase::Waiting(_) | Phase::Checking { .. } | Phase::Crowded
        )
    }

    fn send(&mut self, req: Req) {
        self.awaiting.push(req);
        self.unserved += 1;
    }

    /// Forgets the watches on paths other than `keep`, and what it has not read about them
    /// yet (it would ignore it).
    fn keep_watches(&mut self, keep: &[Path]) {
        self.watches.retain(|watch| keep.contains(&watch.path));
        self.inbox.retain(|msg| match msg {
            Msg::Notification(path, _) => keep.contains(path),
            Msg::Reply(_) | Msg::Ghost => true,
        });
    }

    /// It will decide nothing more: ghost markers say nothing any more.
    fn decided(&mut self) {
        self.inbox.retain(|msg| *msg != Msg::Ghost);
    }

    /// The reply that set a watch on `path` was delivered.
    fn watch_known(&mut self, path: Path) {
        if let Some(watch) = self.watches.iter_mut().find(|watch| watch.path == path) {
            watch.client = true;
        }
    }

    /// Whether a watch on its own node is set and not yet heard firing.
    fn own_watched(&self) -> bool {
        let own = self.own.map(Path::Node);
        self.watches
            .iter()
            .any(|watch| Some(watch.path) == own && (watch.server || watch.client))
    }
}

impl World {
    /// Enters the queue (again): create and list, back to back. Done when no entry is left.
    pub(super) fn enter(&mut self, c: usize) {
        let client = &mut self.clients[c];
        client.own = None;
        client.watches.clear();
        if client.entries == 0 {
            return self.finish(c);
        }
        if client.kind == Kind::Lease && !client.in_gate() {
            client.phase = Phase::Gated;
            return;
        }
        client.entries -= 1;
        client.phase = Phase::Entering { recovering: false };
        client.send(Req::Create);
        client.send(Req::List);
    }

    pub(super) fn finish(&mut self, c: usize) {
        let client = &mut self.clients[c];
        client.phase = Phase::Done;
        client.own = None;
        client.awaiting.clear();
        client.unserved = 0;
        client.inbox.clear();
        client.watches.clear();
    }

    /// Its node left (released, given up, gone with the session): enter again for the next
    /// acquisition, if any.
    pub(super) fn left(&mut self, c: usize, gave_up: bool) {
        let client = &mut self.clients[c];
        client.acquisitions = client.acquisitions.saturating_sub(1);
        if gave_up || client.acquisitions == 0 {
            self.finish(c);
        } else {
            self.enter(c);
        }
    }

    /// Its node is gone while it waited: enter again (a foreign contender stops).
    fn evicted(&mut self, c: usize, cfg: &Config) {
        match cfg.kinds[c] {
            Kind::Foreign => self.finish(c),
            Kind::Writer | Kind::Reader | Kind::Lease => self.enter(c),
        }
    }

    /// Releases a holding, or gives up waiting: deletes the node, in one transaction with
    /// its signal if it is an exclusive holder of ours.
    pub(super) fn leave(&mut self, c: usize, cfg: &Config) {
        let client = &mut self.clients[c];
        let give_up = !matches!(client.phase, Phase::Holding { .. });
        // `Ticket::leave`: a holder is first, a waiter that gives up is not.
        let signal = client.kind.ours() && cfg.blockers(c).signals(!give_up);
        client.keep_watches(&[]);
        client.decided();
        client.phase = Phase::Leaving { give_up };
        match client.own {
            Some(own) => client.send(Req::Remove(own, signal)),
            None => self.left(c, give_up),
        }
    }

    /// Reads the next message of contender `c` (ghost markers before it are dropped).
    pub(super) fn deliver(&mut self, c: usize, cfg: &Config) {
        let client = &mut self.clients[c];
        while client.inbox.first() == Some(&Msg::Ghost) {
            client.inbox.remove(0);
        }
        match client.inbox.remove(0) {
            Msg::Reply(reply) => {
                let req = client.awaiting.remove(0);
                self.replied(c, req, reply, cfg);
            }
            Msg::Notification(path, event) => {
                if let Some(watch) = client.watches.iter_mut().find(|w| w.path == path) {
                    watch.client = false;
                }
                self.heard(c, path, event, cfg);
            }
            Msg::Ghost => unreachable!("ghosts are skipped"),
        }
        let client = &self.clients[c];
        if let Phase::Waiting(waiting) = client.phase {
            if waiting.gone && client.awaiting.is_empty() {
                self.decide(c, waiting, cfg);
            }
        }
    }

    fn heard(&mut self, c: usize, path: Path, event: Event, cfg: &Config) {
        let client = &mut self.clients[c];
        let own = client.own.map(Path::Node);
        match (client.phase, cfg.kinds[c]) {
            // Curator lists again on any word about its predecessor.
            (Phase::Waiting(waiting), Kind::Foreign) if path == Path::Node(waiting.blocker) => {
                client.phase = Phase::Checking { list: true };
                client.send(Req::List);
            }
            (Phase::Waiting(_), Kind::Foreign) => {}
            // Any change of the children: list again.
            (Phase::Crowded, _) if path == Path::Children => client.send(Req::ListWatch),
            (Phase::Waiting(mut waiting), _) => {
                match (path, event) {
                    (path, Event::Deleted) if Some(path) == own => return self.evicted(c, cfg),
                    (path, _) if Some(path) == own => waiting.own_spent = true,
                    (Path::Node(seq), Event::Deleted) if seq == waiting.blocker => {
                        waiting.gone = true
                    }
                    (Path::Node(seq), _) if seq == waiting.blocker => client.send(Req::Watch(seq)),
                    (Path::Signal(seq), Event::Created) if seq == waiting.blocker => {
                        waiting.signal = true
                    }
                    _ => {}
                }
                client.phase = Phase::Waiting(waiting);
            }
            (Phase::Holding { .. }, _) if Some(path) == own => match event {
                Event::Deleted => client.phase = Phase::Holding { trusted: false },
                // A write is no loss: watch again.
                Event::Created | Event::Changed => client.send(Req::Exists(path, true)),
            },
            _ => {}
        }
    }

    fn replied(&mut self, c: usize, req: Req, reply: Reply, cfg: &Config) {
        let client = &mut self.clients[c];
        let own = client.own;
        match (client.phase, req, reply) {
            (Phase::Entering { .. }, Req::Create, Reply::Created(seq)) => client.own = Some(seq),
            (Phase::Entering { recovering: true }, Req::List, Reply::Listed(live)) => {
                // `Creating::recover`: the node found by the uuid in its name.
                let names = cfg.listing(&self.server, live, c, None);
                let owner = u8::try_from(c).unwrap_or_default();
                match find_own(&names, &uuid(owner)) {
                    Some(name) => {
                        client.own = Some(seq_of(name));
                        self.placed(c, live, cfg);
                    }
                    None => {
                        // The create was never served: create again.
                        client.phase = Phase::Entering { recovering: false };
                        client.send(Req::Create);
                        client.send(Req::List);
                    }
                }
            }
            (
                Phase::Entering { .. } | Phase::Checking { list: true },
                Req::List,
                Reply::Listed(live),
            )
            | (Phase::Crowded, Req::ListWatch, Reply::Listed(live)) => self.placed(c, live, cfg),
            (Phase::Checking { list: false }, Req::Exists(_, false), Reply::Found(found)) => {
                match found {
                    true => self.hold(c, cfg),
                    false => self.evicted(c, cfg),
                }
            }
            (Phase::Waiting(mut waiting), Req::Watch(seq), Reply::Found(found))
                if seq == waiting.blocker =>
            {
                match (found, cfg.kinds[c]) {
                    (true, _) => client.watch_known(Path::Node(seq)),
                    (false, Kind::Foreign) => {
                        client.phase = Phase::Checking { list: true };
                        client.send(Req::List);
                    }
                    (false, _) => {
                        waiting.gone = true;
                        client.phase = Phase::Waiting(waiting);
                    }
                }
            }
            (Phase::Waiting(mut waiting), Req::Exists(path, true), Reply::Found(found)) => {
                if Some(path) == own.map(Path::Node) {
                    waiting.own_set = found;
                    client.phase = Phase::Waiting(waiting);
                }
                // Watched if it could say something: the own node found, the signal not.
                if found == matches!(path, Path::Node(_)) {
                    client.watch_known(path);
                }
            }
            (Phase::Holding { .. }, Req::Exists(path, true), Reply::Found(found)) => match found {
                true => client.watch_known(path),
                false => client.phase = Phase::Holding { trusted: false },
            },
            (Phase::Leaving { give_up }, Req::Remove(..), Reply::Removed) => self.left(c, give_up),
            // A reply to a request that no longer matters.
            _ => {}
        }
    }

    /// Places contender `c` of ours by a listing `live` made after its create, as
    /// `Place::of` does (`Queue::create`, `Ticket::ask`); a lease waiting for
    /// a crowded root to thin out, as `Ticket::thinned` does.
    fn placed(&mut self, c: usize, live: u32, cfg: &Config) {
        if cfg.kinds[c] == Kind::Foreign {
            return self.placed_foreign(c, live, cfg);
        }
        let Some(own) = self.clients[c].own else {
            return self.evicted(c, cfg);
        };
        let names = cfg.listing(&self.server, live, c, Some(own));
        let own_name = cfg.own_name(c, own);
        let blockers = cfg.blockers(c);
        if self.clients[c].phase == Phase::Crowded {
            return match (listed(own_name, &names), blockers.crowded(names.len())) {
                (false, _) => self.evicted(c, cfg),
                // The reply of a listing with a child watch: wait for the watch.
                (true, true) => self.clients[c].watch_known(Path::Children),
                (true, false) => self.hold(c, cfg),
            };
        }
        let (blocker, first) = match Place::of(ROOT, own_name, &names, blockers) {
            None => return self.evicted(c, cfg),
            Some(Place::First) => return self.hold(c, cfg),
            Some(Place::Crowded) => {
                let client = &mut self.clients[c];
                client.phase = Phase::Crowded;
                client.keep_watches(&[Path::Node(own)]);
                return client.send(Req::ListWatch);
            }
            Some(Place::Behind {
                blocker,
                blocker_first,
            }) => (blocker, blocker_first),
        };
        // `Ticket::wait_first`: the signal is watched if the blocker's name says it signals.
        let signals = blockers.signalled_by(&blocker);
        self.wait_on(c, seq_of(&blocker), first, signals, cfg);
    }

    /// Places foreign contender `c` by its own rule (Curator's, kazoo's): it holds when
    /// lowest, else watches the one just ahead.
    fn placed_foreign(&mut self, c: usize, live: u32, cfg: &Config) {
        let Some(own) = self.clients[c].own.filter(|&own| live & bit(own) != 0) else {
            return self.evicted(c, cfg);
        };
        let ahead = live & (bit(own) - 1);
        if ahead == 0 {
            return self.hold(c, cfg);
        }
        let blocker = Seq::try_from(31 - ahead.leading_zeros()).unwrap_or_default();
        self.wait_on(c, blocker, false, false, cfg);
    }

    /// Contender `c` waits on `blocker` (first when listed if `first`): it watches the
    /// blocker, and, if ours, its own node and, if `signals`, the blocker's signal.
    fn wait_on(&mut self, c: usize, blocker: Seq, first: bool, signals: bool, cfg: &Config) {
        let client = &mut self.clients[c];
        let Some(own) = client.own else {
            return;
        };
        client.phase = Phase::Waiting(Waiting {
            blocker,
            first,
            gone: false,
            signal: false,
            own_set: false,
            own_spent: false,
            connection_changed: false,
        });
        client.keep_watches(&[Path::Node(own), Path::Node(blocker), Path::Signal(blocker)]);
        client.send(Req::Watch(blocker));
        if !client.kind.ours() {
            return;
        }
        if cfg.variant != Variant::NoOwnWatch {
            client.send(Req::Exists(Path::Node(own), true));
        }
        if signals {
            client.send(Req::Exists(Path::Signal(blocker), true));
        }
    }

    /// The blocker of waiter `c` is gone and every reply to its arming is in: hold on what
    /// was heard, or fall back to one request.
    fn decide(&mut self, c: usize, waiting: Waiting, cfg: &Config) {
        // `HandOff::hear` (`decide::taken`); a known-bad variant changes what it is told.
        let same = !waiting.connection_changed;
        let own_watched = waiting.own_set && !waiting.own_spent;
        let signal = waiting.signal;
        let hold = match cfg.variant {
            Variant::Correct => taken(same, own_watched, signal),
            Variant::NoConnectionCheck => taken(true, own_watched, signal),
            Variant::NoOwnWatch => taken(same, !waiting.own_spent, signal),
            Variant::FirstExempt => taken(same, own_watched, signal || waiting.first),
            Variant::ZeroRequest => taken(same, own_watched, signal) || waiting.first,
        };
        if hold {
            return self.hold(c, cfg);
        }
        let client = &mut self.clients[c];
        let list = !waiting.first;
        client.phase = Phase::Checking { list };
        client.send(match (list, client.own) {
            (false, Some(own)) => Req::Exists(Path::Node(own), false),
            _ => Req::List,
        });
    }

    /// Contender `c` decides that it holds.
    fn hold(&mut self, c: usize, cfg: &Config) {
        let exists = self.clients[c]
            .own
            .is_some_and(|own| self.server.is_live(own));
        let client = &mut self.clients[c];
        client.phase = Phase::Holding { trusted: true };
        if !cfg.kinds[c].ours() {
            // Curator watches nothing while it holds.
            return client.keep_watches(&[]);
        }
        if !exists && !client.inbox.contains(&Msg::Ghost) {
            client.broke_i1 = true;
        }
        client.decided();
        let own = client.own.map(Path::Node);
        client.keep_watches(own.as_slice());
        if !client.own_watched() {
            if let Some(own) = own {
                client.send(Req::Exists(own, true));
            }
        }
    }
}
