//! A model of the contender-queue protocol, checked exhaustively (test only).
//!
//! # What is modelled
//!
//! The protocol that [`queue`](super) states, step by step, for small configurations:
//! two or three contenders, ours (exclusive, [`Blockers::Every`](super::Blockers::Every):
//! a mutex, a leader, a writer; readers, [`Blockers::Only`](super::Blockers::Only); a
//! semaphore's leases, [`Blockers::Crowd`](super::Blockers::Crowd), which enter one at a
//! time through the semaphore's gate, a mutex, modelled as one) and foreign ones (Curator,
//! kazoo: they hold when lowest, watch their predecessor, list again when it changes,
//! release with a plain delete and never signal).
//!
//! * The server ([`server`]): the root's children with their sequence numbers, owners
//!   and names ([`names`]: the crate's format, sequence numbers across the 32-bit wrap);
//!   left-first signal paths; watches per session (data, exists and child watches,
//!   fired once); one FIFO queue per session of what the server sends (replies and
//!   notifications); a transaction applied at once, its notifications to one session in
//!   the order of its operations.
//! * Our contenders ([`contender`]): enter (create and list sent back to back), place,
//!   arm (blocker's data watch, own exists watch, the blocker's signal watch), hear,
//!   decide (placing and deciding by the code's own functions, below), fall back (exists of the own node behind a blocker that was first, else a
//!   listing), hold until a loss is heard, release (signal, delete in one transaction), give
//!   up (plain delete), enter again when evicted or expired.
//! * Faults ([`faults`]): connection loss (what was not delivered is lost, requests not yet
//!   served are dropped and sent again on reconnection, watches are set again and the
//!   server answers for changes since in any order), session expiry of a disconnected
//!   session (its node deleted, learned on reconnection), and a nemesis that deletes or
//!   writes any contender node, deletes two adjacent nodes in one transaction (`zkCli
//!   deleteall`), or creates a node on a signal path (a forgery; off unless asked).
//!
//! # What is abstracted away
//!
//! Time (timeouts, back-off, the liveness bound: a holder that loses its connection stops
//! trusting at once, and a session expires only while disconnected); one session per
//! contender (the queue shares a session between contenders: their notifications share
//! one order, which only adds constraints); ACLs, data contents (a write only
//! fires watches, and is remembered by a watch whose client has not heard it yet, for the
//! answer on reconnection); the owner of a node deleted (a stale listing names it with a
//! uuid of no one, unless it is the reader's own: only its owner looks for it by uuid, and
//! makes another node whether it finds a name of a node gone or none); a root that does
//! not exist; the bounded
//! entries in flight; request errors other than a lost connection; a holder's delayed own
//! watch (the watch is sent at once: the server may serve it at any later point). A
//! connection loss is seen by the client when it happens (with no server change between
//! the loss and the client noticing it). A waiter sets its own watch again at each wait
//! (the code keeps one that has not fired: the same knowledge), and a watch it no longer
//! needs is dropped with what it had not read about it (it would ignore it). Bounded:
//! entries per contender, acquisitions, faults, give-ups (so every run is finite).
//!
//! # Exploring
//!
//! [`explorer`] visits every reachable state once, breadth first (a shortest trace for a
//! violation). `tests.rs` holds the configurations run by `cargo test --lib` (about three
//! million states, half a minute on two cores in a debug build), the known-bad variants
//! that must be caught, and larger configurations for release builds (`--ignored`).
//!
//! # Invariants ([`invariants`])
//!
//! * I1: a contender of ours decides that it holds only on a view in which its node exists:
//!   its node exists at the server, or its deletion came after the message the decision
//!   rests on (a ghost marker in its queue, placed before a transaction's notifications).
//! * I2: two trusted holders whose nodes exist are never both exclusive, nor an exclusive
//!   one with a reader; no more trusted leases than the semaphore grants.
//! * I3 and liveness: in a state where no contender, server or reconnection step can be
//!   taken (faults, give-ups aside), every contender is done and no node of ours is left.
//! * I4: a trusted holder has no node ahead of it that keeps it from holding (a successor
//!   never takes over while its predecessor's node exists), and an exclusive one is the
//!   first that observers list ([`sort_contenders`](super::sort_contenders), as
//!   `LeaderElection::leader` and `contenders()` order the queue).
//!
//! # The code's decisions, called
//!
//! The model decides as the code does by calling the code's own functions
//! ([`decide`](super::decide)) on real names ([`names`]): a mutation of one of them is
//! explored by `cargo test`.
//!
//! | decision | function | the code calls it in | the model calls it in |
//! | --- | --- | --- | --- |
//! | order: sequence numbers, as serial numbers across the wrap | `sequence`, `Place::of` | `Queue::create`, `Ticket::ask` | `World::placed` |
//! | own node in a listing; who blocks; whether the blocker was first; crowded | `Place::of` (`listed`, `Blockers::blocks`, `Blockers::crowded`) | `Queue::create`, `Ticket::ask` | `World::placed` |
//! | a crowded root thinned out | `listed`, `Blockers::crowded` | `Ticket::thinned` | `World::placed` (`Phase::Crowded`) |
//! | whether the blocker's signal is watched | `Blockers::signalled_by` | `Ticket::wait_first` | `World::placed` |
//! | held without a request | `taken` | `HandOff::hear` | `World::decide` (a known-bad variant changes what it is told) |
//! | whether leaving signals | `Blockers::signals` | `Ticket::leave` | `World::leave` |
//! | a create's node found by its uuid | `find_own` | `Creating::recover` | `World::replied` (`Entering { recovering }`) |
//! | who blocks a recipe's contender | `Blockers::EVERY`, `READER`, `WRITER` (`is_writer`), `Crowd` | `Mutex`, `RwLock`, `Semaphore` | `Config::blockers` |
//! | the queue's order as observers list it | `sort_contenders` | `Queue::listed`, `LeaderElection::leader` | invariant I4 |
//!
//! # Steps kept by hand
//!
//! The requests and the waiting are mirrored step by step; a change to one of these
//! functions is a change to the step beside it.
//!
//! | model | queue |
//! | --- | --- |
//! | `World::enter`: create and list sent back to back | `Queue::enter`, `Queue::create` |
//! | `World::placed`, arming: blocker's data watch, own exists watch, signal exists watch | `Ticket::wait_first`, `HandOff::arm` (the blocker's data watch with the others; its state watcher is the connection generation) |
//! | `World::deliver`, `World::heard`: one message at a time; a write into the blocker watches it again | `HandOff::hear` (`poll_heard` looks at the own node, the signal, the connection and the blocker, in that order; it watches a blocker written into again) |
//! | `World::decide`, not held: exists of the own node behind a blocker that was first (`Phase::Checking { list: false }`), else list and place again | `Ticket::wait_first` (`Heard::BlockerGone`): `Ticket::ask` |
//! | `World::evicted`: enter again at the end | `Ticket::evicted`, `Turn::Evicted` in `Queue::acquire` |
//! | `World::hold`: trusted; the own node watched (the waiting watch kept if unspent) | `Holding::start` in the hold core (`Ticket::take_own_watch`, `NodeWatch`) |
//! | `Holding { trusted: false }`: own node deleted, connection lost, session expired | `Watching::lost` (`Watching::node_lost`, `connection_lost`) |
//! | `World::leave`: the removal (with the signal: one transaction) | `Ticket::leave`, `give_up`, `spawn_removal`, `remove`, `remove_signalling` |
//! | `World::lose`, `World::reconnect`: requests sent again; a removal until gone | `session::retry`, `remove_until_gone` |
//! | `World::reconnect` of an expired session | `Ticket::failed` (`Turn::Expired`), `Queue::enter` on the new session |
//! | `Step::Gate`: one lease enters at a time | `Semaphore::acquire_within` (its `gate`, a `Mutex`) |
//! | `Kind::Foreign`, `World::placed_foreign` | Curator's `LockInternals`, kazoo's `Lock` (their own rules, not ours) |
//!
//! The model follows the target protocol of issue 24 (no hand-off mark in the root: the
//! fallback behind a blocker that was first is an exists of the own node).

mod contender;
mod explorer;
mod faults;
mod invariants;
mod names;
mod server;
mod steps;
mod tests;

use std::cell::OnceCell;

use contender::Client;
use server::Server;

/// What a contender is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// Ours, exclusive ([`Blockers::Every`](super::Blockers::Every)).
    Writer,
    /// Ours, a reader ([`Blockers::Only`](super::Blockers::Only) writers).
    Reader,
    /// Curator or kazoo (named as kazoo names its nodes): exclusive, never signals, never
    /// checks its own node.
    Foreign,
    /// Ours, a semaphore's lease ([`Blockers::Crowd`](super::Blockers::Crowd) of
    /// [`Config::leases`]).
    Lease,
}

impl Kind {
    fn ours(self) -> bool {
        self != Kind::Foreign
    }

    fn exclusive(self) -> bool {
        matches!(self, Kind::Writer | Kind::Foreign)
    }
}

/// Which protocol our contenders follow: the target, or a known-bad variant of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// The protocol as the queue implements it.
    Correct,
    /// (a) A waiter holds on the signal without checking that its connection stayed.
    NoConnectionCheck,
    /// (b) A waiter arms no watch on its own node.
    NoOwnWatch,
    /// (c) A blocker that was first need not signal: its deletion alone hands off.
    FirstExempt,
    /// (d) The first design: a blocker that was first is gone, so hold, without a request.
    ZeroRequest,
}

/// A configuration to explore.
#[derive(Clone, Debug)]
struct Config {
    kinds: Vec<Kind>,
    variant: Variant,
    /// Creates a contender may make (acquisitions and entries again after evictions).
    entries: u8,
    /// Acquisitions per contender.
    acquisitions: u8,
    nemesis: u8,
    /// Whether the nemesis may delete nodes.
    deletes: bool,
    /// Whether the nemesis may write into nodes (besides deleting them).
    writes: bool,
    /// Whether the nemesis may create nodes on signal paths.
    forge: bool,
    losses: u8,
    expiries: u8,
    give_ups: u8,
    /// How many leases a semaphore grants.
    leases: u8,
    /// Whether leases enter through the semaphore's gate (off: a known-bad variant).
    gate: bool,
    /// The names of the nodes, made on first use (see [`names`]).
    names: OnceCell<Vec<String>>,
}

/// What is left of the faults (and give-ups) a run may still use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Budget {
    nemesis: u8,
    losses: u8,
    expiries: u8,
    give_ups: u8,
}

/// The whole system: the server and every contender's client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    server: Server,
    clients: Vec<Client>,
    budget: Budget,
}
