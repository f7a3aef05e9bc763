//! The contender queue every recipe stands on (crate-private).
//!
//! # Order
//!
//! A contender is an EPHEMERAL_SEQUENTIAL child `ROOT/_c_<uuid>-<name><seq>` of the recipe
//! root (Apache Curator's "protected" naming; `name` is `lock-` or `latch-`). Contenders are
//! ordered by the sequence suffix of *every* child, whatever its prefix, so foreign clients
//! on the same root (Curator, kazoo) take part in the same order ([`decide`]). Sequence
//! numbers only grow, so no contender can ever appear ahead of one already queued, and one
//! that was first stays first until it goes.
//!
//! # Entering
//!
//! The create and the child listing are sent back to back on one session, so the listing
//! already holds the new node: it proves that the node exists and shows who is ahead. A
//! contender with no one ahead holds at once. Under a root that no session of the process
//! to the same servers has entered under lately, the root's create goes first in the same
//! round trip (roots are container
//! nodes, a lock per key makes many). A create whose reply was lost is found again by its
//! uuid ([`entering`]). A session has a bounded number of entries in flight per root,
//! so a burst of waiters does not hold a burst of listings, and entries on other roots (a
//! lock per key) do not wait behind it.
//!
//! # Waiting and hand-off
//!
//! This section is the one statement of the hand-off rule; the rest of the crate and the
//! docs (`docs/design.md`) link here.
//!
//! A contender waits on its *blocker*, the closest contender ahead of it that keeps it from
//! holding ([`Blockers`]), and remembers whether that blocker was first (lowest of the
//! whole root) when it listed. In one round trip with the blocker's data watch it also
//! sets two more ([`handoff`]): an exists watch on its own node, and one on the blocker's
//! *left-first signal* `<blocker>.left-first`, a node that an exclusive contender leaving
//! while first creates and deletes again in the transaction that deletes its own node (so
//! no one ever sees it in a listing). It takes a state watcher of the connection before
//! arming. Everything is a hint, never proof: writes into the blocker are watched past. A
//! blocker the session may not read ends the wait with `NoAuth` at once: servers that filter
//! notifications by ACL would never say that it went.
//!
//! When the blocker's deletion is heard, the contender holds **without a request** if:
//!
//! 1. the connection is the same since it armed (ZooKeeper sends one session's
//!    notifications in the order of the changes, and zookeeper-client hands them to their
//!    watchers in that order — verified for zookeeper-client 0.11.2 and pinned by
//!    `tests/suite/notification_order.rs` —, but only within one connection: watches set again
//!    after a reconnect are answered in no order);
//! 2. it heard nothing about its own node (not deleted, not written), so its node existed
//!    when the blocker was deleted;
//! 3. it heard the blocker's signal, so the blocker was first when it left, and its
//!    transaction deleted no other node. A blocker that was first when the contender looked
//!    must signal too: a deletion of the contender's node in the same transaction as the
//!    blocker's, after it (`zkCli deleteall`), is heard only after the blocker's.
//!
//! Otherwise it asks the servers, once: behind a blocker that was first (nothing can come
//! ahead of a first contender, sequence numbers only grow) whether its own node exists —
//! then it holds, else it is out of the queue; behind a blocker of unknown place (it gave
//! up, it died, it is a foreign client that never signals, an operator deleted it) it lists
//! the root and waits on its new blocker, or holds if none is left. A contender whose own
//! node is heard deleted enters the queue again at once, at its end. So a hand-off costs no
//! request in the common case and one otherwise, at any queue length, and a contender
//! reports holding only while its own node is known to exist.
//!
//! The steps, by name: [`Queue::acquire`] (every recipe) → [`Queue::enter`]: the session's
//! `ready` (an entry permit, the live session, its connection: one body), then `create`
//! (create ‖ list, placed by `Place::of`) → [`Ticket::wait_first`], unless the entry
//! placed it first: `HandOff::arm` (blocker, own node, signal), `HandOff::hear`, which
//! ends on `Heard::Taken` (held on what was heard: `decide::taken`) or, when what was
//! heard does not say, `Ticket::ask` (own node, or a listing) → first; the recipe then
//! starts its hold (`Holding::start`, in the hold core). The session's close and the
//! caller's deadline end a wait beside these steps (a `select!` arm each:
//! `Session::closed`, `Wait::passed`, `Wait::cut_off`), never as a frame around them.
//!
//! The rule is model-checked: `model` (test only) models this protocol — contenders,
//! servers with one ordered notification queue per session, multis, connection loss and
//! reconnection, session expiry, a nemesis, foreign contenders that never signal — and
//! explores it exhaustively for small configurations. The decisions (order, who blocks,
//! place, crowding, "taken without a request", whether leaving signals) are pure functions
//! with one home, [`decide`], which the code and the model both call: a change to one is
//! explored in `cargo test`. What the model still mirrors by hand (the requests, what is
//! heard, the fallback) is in its module doc's table: keep those together.
//!
//! Who blocks a contender is the recipe's choice ([`Blockers`]): every one ahead (a mutex,
//! a leader, a writer: the recipe names those ahead that never signal, readers), some names
//! only (a reader waits on the closest writer ahead, never on a reader), or the crowd: a
//! semaphore's lease holds while the root has at most so many children, itself included,
//! and waits on a child watch of the root until it has.
//!
//! # Leaving
//!
//! A contender owns its node: leaving, giving up, and dropping it all delete the node,
//! whatever was written into it ([`leaving`]). An exclusive contender that leaves while
//! first signals its successor in the transaction that deletes its node (a release is one
//! request either way); a signal that cannot be written (someone made its path, an ACL) is
//! left out. A removal keeps trying until the node is gone or its session is, on the
//! session's runtime.
//!
//! # Holding
//!
//! A ticket that is first is handed to the hold core ([`crate::hold`]), which watches it
//! for its loss and releases it: the queue knows nothing of holds.

mod contender;
mod creating;
mod decide;
mod entering;
mod handoff;
mod leaving;
#[cfg(test)]
mod model;
mod order;

pub(crate) use crate::session::Wait;
pub(crate) use contender::{Ticket, Turn};
pub(crate) use decide::{is_writer, sort_contenders, Blockers};
pub(crate) use entering::Queue;
pub(crate) use handoff::{armed, Armed};
pub(crate) use leaving::{spawn_removal, Left, Removal, Removing};
pub(crate) use order::is_contender_name;

/// The most data a contender node may carry: ZooKeeper servers drop a connection whose
/// request exceeds `jute.maxbuffer` (1 MiB by default), so larger data is refused before
/// anything is sent.
pub(crate) const MAX_DATA: usize = 960 * 1024;

/// A contender as an observer lists it: its node's name, data (`None` if the session may
/// not read the node: its ACL) and fencing token.
#[derive(Debug)]
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) data: Option<Vec<u8>>,
    pub(crate) token: u64,
}
