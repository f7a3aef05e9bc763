//! The contender queue every recipe stands on (crate-private).
//!
//! # Order
//!
//! A contender is an EPHEMERAL_SEQUENTIAL child `ROOT/_c_<uuid>-<name><seq>` of the recipe
//! root (Apache Curator's "protected" naming; `name` is `lock-` or `latch-`). Contenders are
//! ordered by the sequence suffix of *every* child, whatever its prefix, so foreign clients
//! on the same root (Curator, kazoo) take part in the same order ([`order`]). Sequence
//! numbers only grow, so no contender can ever appear ahead of one already queued, and one
//! that was first stays first until it goes.
//!
//! # Entering
//!
//! The create and the child listing are sent back to back on one session, so the listing
//! already holds the new node: it proves that the node exists and shows who is ahead. A
//! contender with no one ahead holds at once. A create whose reply was lost is found again
//! by its uuid ([`entering`]). A session has a bounded number of entries in flight, so a
//! burst of waiters does not hold a burst of listings.
//!
//! # Waiting and hand-off
//!
//! A contender watches only its *blocker*, the closest contender ahead of it (a data
//! watch), and remembers whether that blocker was first when it last looked ([`waiting`]).
//! A notification is a hint, never proof: when the blocker's node changes the contender
//! looks at it again. When it is gone the contender holds if its own node exists and its
//! blocker left while first, and it learns both without a request where it can
//! ([`handoff`]): it also watches its own node and the blocker's *left-first signal*, a
//! node that an exclusive contender leaving while first creates and deletes in the
//! transaction that deletes its node. ZooKeeper delivers one session's
//! notifications in the order of the changes, so a waiter that heard its blocker's deletion
//! and nothing about its own node knows that its node existed then. Where that cannot be
//! known (its own node was written into, the blocker left without a signal, the connection
//! broke meanwhile) it reads, in one request, its own node and the root's hand-off mark,
//! and only when the blocker's place is still unknown (it gave up, died, or is a foreign
//! client) does it list the root once. So a hand-off costs no request in the common case
//! and one small request otherwise, at any queue length, and a contender reports holding
//! only while its own node is known to exist.
//!
//! Who blocks a contender is the recipe's choice ([`Blockers`]): every one ahead (a mutex,
//! a leader, a writer), some names only (a reader waits on the closest writer ahead, never
//! on a reader), or the crowd: a semaphore's lease holds while the root has at most so many
//! children, itself included, and waits on a child watch of the root until it has.
//!
//! # Leaving
//!
//! A contender owns its node: leaving, giving up, and dropping it all delete the node (in
//! the background when the connection is down), whatever was written into it. A contender
//! that held after waiting creates and deletes its left-first signal and writes the mark
//! into the root in the transaction that deletes its node ([`leaving`]): its successor hears
//! the signal, and every successor that looks reads the mark, so no one need list the queue
//! to know that no one is ahead any more. A contender that was first at entry needs no mark
//! (every successor saw it first) but signals all the same, in one transaction with its
//! delete: a release is one request either way.
//!
//! # Holding
//!
//! A contender that holds is watched in the background for the moment it can no longer be
//! trusted: session expiry, suspension, deletion of its node ([`holding`]). Guards and
//! leaderships share that one implementation.

mod entering;
mod handoff;
mod holding;
mod leaving;
#[cfg(test)]
mod model;
mod order;
mod waiting;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tracing::{info, warn, Instrument, Span};
use zookeeper_client::Client;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::path;
use crate::session::{disconnected, retry, Session};

pub use holding::Loss;
use holding::NODE_WATCH_DELAY;
pub(crate) use holding::{guard_methods, Announce, Holding, NodeWatch, Trust};
pub(crate) use leaving::Left;
pub(crate) use order::sort_contenders;
pub(crate) use waiting::Turn;

/// The most data a contender node may carry: ZooKeeper servers drop a connection whose
/// request exceeds `jute.maxbuffer` (1 MiB by default), so larger data is refused before
/// anything is sent.
pub(crate) const MAX_DATA: usize = 960 * 1024;

/// A recipe root, the contender name used under it, who blocks such a contender, and
/// the ACL of the nodes it creates.
#[derive(Clone, Debug)]
pub(crate) struct Queue {
    root: Arc<str>,
    name: &'static str,
    blockers: Blockers,
    acl: NodeAcl,
}

/// Which contenders ahead keep a contender from holding.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Blockers {
    /// Every one: at most one holds (a mutex, a leader, a writer). A holder is first of
    /// the whole queue, so one that waited marks the root as it leaves.
    Every,
    /// Only those whose names this accepts (a reader: writers only). Several may hold at
    /// once, and a holder does not know whether it is first, so none marks the root.
    Only(fn(&str) -> bool),
    /// None by name: it holds while the root has at most this many children, itself
    /// included, whatever their order (a semaphore's lease, counted as Curator counts). It
    /// waits on a child watch of the root; several hold at once, and none marks the root.
    Crowd(u32),
}

impl Blockers {
    /// Which names ahead keep such a contender from holding (a contender keeps only this,
    /// not the whole `Blockers`: it is stored by every waiter).
    fn blocks(self) -> fn(&str) -> bool {
        fn every(_: &str) -> bool {
            true
        }
        fn none(_: &str) -> bool {
            false
        }
        match self {
            Blockers::Every => every,
            Blockers::Only(blocks) => blocks,
            Blockers::Crowd(_) => none,
        }
    }

    /// The most children a root may have for such a contender to hold, if a root with
    /// `children` children has more.
    fn crowded(self, children: usize) -> Option<u32> {
        match self {
            Blockers::Crowd(max) if usize::try_from(max).is_ok_and(|max| children > max) => {
                Some(max)
            }
            Blockers::Every | Blockers::Only(_) | Blockers::Crowd(_) => None,
        }
    }
}

/// How long an acquisition may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// Not at all: a contender that is not first gives up at once, and nothing waits for a
    /// connection.
    Never,
    /// Until this instant.
    Until(Instant),
    /// As long as it takes.
    Forever,
}

impl Wait {
    /// At most `timeout` from now; a deadline too far to represent is no deadline.
    pub(crate) fn at_most(timeout: Duration) -> Wait {
        Instant::now()
            .checked_add(timeout)
            .map_or(Wait::Forever, Wait::Until)
    }

    pub(crate) fn is_never(self) -> bool {
        matches!(self, Wait::Never)
    }

    /// Resolves when the deadline passes; never without one. The timer is boxed, so that
    /// a wait without a deadline does not carry it.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn passed(self) {
        match self {
            Wait::Until(deadline) => Box::pin(tokio::time::sleep_until(deadline.into())).await,
            Wait::Never | Wait::Forever => std::future::pending().await,
        }
    }

    /// Runs `work` while the connection of `client` is up, or until the deadline, if any;
    /// `Ok(None)` if the deadline passed with the connection down. Requests that the servers
    /// are answering are never cut short: a deadline that has passed already still lets one
    /// attempt finish.
    pub(crate) async fn bound_while_connected<T>(
        self,
        client: &Client,
        work: Pin<&mut impl Future<Output = Result<T>>>,
    ) -> Result<Option<T>> {
        let cut_off = async {
            self.passed().await;
            disconnected(client).await;
        };
        tokio::select! {
            biased;
            done = work => done.map(Some),
            () = cut_off => Ok(None),
        }
    }

    /// Runs `work` until the deadline, if any; `Ok(None)` if it passed first. `work` comes
    /// pinned by the caller: a future passed by value would be stored twice while it runs.
    pub(crate) async fn bound<T>(
        self,
        work: Pin<&mut impl Future<Output = Result<T>>>,
    ) -> Result<Option<T>> {
        tokio::select! {
            biased;
            done = work => done.map(Some),
            () = self.passed() => Ok(None),
        }
    }
}

impl Queue {
    /// A queue of `name` contenders (`"lock-"`, `"latch-"`) under `root`, each kept from
    /// holding by `blockers`, whose nodes get `acl`.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `root` is malformed or too long.
    pub(crate) fn new(
        root: &str,
        name: &'static str,
        blockers: Blockers,
        acl: NodeAcl,
    ) -> Result<Queue> {
        Ok(Queue {
            root: Arc::from(path::validate_root(root)?),
            name,
            blockers,
            acl,
        })
    }

    /// The same queue, creating its nodes with `acl`.
    pub(crate) fn with_acl(self, acl: NodeAcl) -> Queue {
        Queue { acl, ..self }
    }

    pub(crate) fn acl(&self) -> NodeAcl {
        self.acl
    }

    pub(crate) fn root(&self) -> &str {
        &self.root
    }

    /// The contenders under the root, first first, as `(name, data)`; for observers.
    ///
    /// # Notable errors
    /// * [`Error::ConnectionLoss`] at once if the connection is down: it does not wait.
    /// * [`Error::NoAuth`] if the root cannot be read.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn contenders(&self, session: &Session) -> Result<Vec<(String, Vec<u8>)>> {
        let client = session.connected()?;
        let mut names = self.list(&client).await?;
        sort_contenders(&mut names);
        // Sent back to back; a contender that left meanwhile is skipped.
        let reads: Vec<_> = names
            .iter()
            .map(|name| client.get_data(&path::join(&self.root, name)))
            .collect();
        let mut contenders = Vec::with_capacity(names.len());
        for (name, read) in names.into_iter().zip(reads) {
            match read.await {
                Ok((data, _)) => contenders.push((name, data)),
                Err(zookeeper_client::Error::NoNode) => {}
                Err(err) => return Err(Error::at(&self.root, err)),
            }
        }
        Ok(contenders)
    }

    /// Enters the queue and waits, within `wait`, to hold, under `span` (whose `node` field
    /// records the node): a holding, watched for its loss (deletion of its node from
    /// [`NODE_WATCH_DELAY`] on); `None`, with the node deleted, if the deadline passed first
    /// (with [`Wait::Never`]: if it did not hold at once). A contender whose node is lost
    /// while it waits (deleted by someone, or gone with its expired session) enters again, at
    /// the end of the queue.
    ///
    /// Not an `async fn`: a waiting acquisition is stored by the task that awaits it, so it
    /// keeps nothing but what it needs.
    ///
    /// # Notable errors
    /// As [`enter`](Self::enter) and [`Contender::wait_first`].
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped acquisition deletes its node in the background, even if the
    /// reply to its create was lost.
    pub(crate) fn hold<'a>(
        &'a self,
        session: &'a Session,
        wait: Wait,
        span: Span,
    ) -> impl Future<Output = Result<Option<Holding>>> + Send + 'a {
        let started = Instant::now();
        async move {
            loop {
                // Boxed: a waiting acquisition need not keep room for entering.
                let entering = Box::pin(self.enter(session, &[], wait));
                let Some(mut contender) = entering.await? else {
                    return Ok(None);
                };
                Span::current().record("node", contender.node());
                let turn = match wait {
                    Wait::Never if !contender.is_first() => Turn::Late,
                    _ => contender.wait_first(wait).await?,
                };
                match turn {
                    Turn::First => {
                        let holding =
                            Holding::start(contender, NodeWatch::After(NODE_WATCH_DELAY), None);
                        info!(token = holding.token(), waited = ?started.elapsed(), "acquired");
                        return Ok(Some(holding));
                    }
                    Turn::Late => {
                        info!("not acquired in time");
                        // Boxed: leaving takes no room in a waiting acquisition.
                        Box::pin(contender.give_up()).await;
                        return Ok(None);
                    }
                    Turn::Evicted | Turn::Expired => {
                        warn!(?turn, "out of the queue; entering again")
                    }
                }
            }
        }
        .instrument(span)
    }

    /// The children of the root (none if it does not exist).
    async fn list(&self, client: &Client) -> Result<Vec<String>> {
        match retry(client, || client.list_children(&self.root)).await {
            Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => Ok(Vec::new()),
            other => other.map_err(|err| err.at_root(&self.root)),
        }
    }
}

impl Error {
    /// Names the recipe root in errors about it.
    fn at_root(self, root: &str) -> Error {
        match self {
            Error::ZooKeeper(err) => Error::at(root, err),
            other => other,
        }
    }
}

/// Our node in a queue. Dropping it deletes the node in the background.
#[derive(Debug)]
pub(crate) struct Contender {
    session: Session,
    /// The client of the session the node belongs to. Weak: only [`Session`] keeps a
    /// client alive, so that closing it ends the ZooKeeper session.
    client: Weak<Client>,
    /// Full path of the node; the root is its parent.
    node: String,
    czxid: i64,
    place: Place,
    /// Which names ahead keep it from holding (see [`Blockers::blocks`]).
    blocks: fn(&str) -> bool,
    /// Whether it excludes every other holder ([`Blockers::Every`]): leaving while first, it
    /// signals its successor (see [`handoff`]).
    exclusive: bool,
    /// Whether leaving while first must mark the root: an exclusive contender that entered
    /// behind others, so its successors may not know that it became first.
    marks: bool,
    /// Whether dropping it deletes the node.
    armed: bool,
    /// While it waits: what it watches so that a hand-off needs no request.
    handoff: Option<Box<handoff::HandOff>>,
}

/// Where a contender stands, as far as it knows.
#[derive(Debug)]
enum Place {
    /// No one ahead blocks it.
    First,
    /// The root has more children than this, the most it may have (see
    /// [`Blockers::Crowd`]).
    Crowded(u32),
    /// Behind `blocker` (a full path), which was first when last looked if `blocker_first`.
    Behind {
        blocker: Box<str>,
        blocker_first: bool,
    },
}

impl Contender {
    /// Full path of the node.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// The zxid that created the node: a fencing token, greater for every later node.
    pub(crate) fn token(&self) -> u64 {
        u64::try_from(self.czxid).unwrap_or_default()
    }

    /// Whether nothing is known to keep it from holding (for [`Blockers::Every`]: whether it
    /// is first).
    pub(crate) fn is_first(&self) -> bool {
        matches!(self.place, Place::First)
    }

    /// The recipe root (the node's parent) and the node's own name.
    fn root_and_name(&self) -> (&str, &str) {
        self.node.rsplit_once('/').unwrap_or_default()
    }

    /// The client the node belongs to.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed, [`Error::SessionExpired`] if the
    ///   node's session ended and was replaced.
    fn client(&self) -> Result<Arc<Client>> {
        self.client.upgrade().ok_or_else(|| self.session.ended())
    }

    /// Forgets the node without deleting it: it went with its session, or was deleted.
    pub(crate) fn disown(mut self) {
        self.armed = false;
    }
}
