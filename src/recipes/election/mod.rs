//! Leader election: [`LeaderElection`], [`Candidate`], [`Leadership`].
//!
//! One leader (master) among the candidates on a path, the rest followers; leadership
//! passes in order of arrival, and a leader is told as soon as it can no longer trust its
//! leadership.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info_span, warn, Instrument};

mod candidate;
mod leader;
mod leadership;

pub use candidate::Candidate;
pub use leadership::Leadership;

use leader::LeaderView;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::path;
use crate::queue::{Blockers, Queue, Ticket, Wait};
use crate::recipes::contenders::{split, validate_id};
use crate::recipes::view;
use crate::revoke::REVOKE;
use crate::session::Session;

/// A candidate's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// First in the queue, with a trusted session: the master.
    Leader,
    /// Waiting in the queue (or out of it).
    Follower,
}

/// A member of the election, as observers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Participant {
    /// The id the candidate joined with (its node's data, up to a NUL if it proclaimed), as
    /// [`Contender::id`](crate::Contender::id) says it. `None` if it is not known: this
    /// session may not read the node (its ACL: the candidate is listed all the same, in its
    /// place), or someone asked it to let go (its data was overwritten).
    pub id: Option<String>,
    /// Full path of its node.
    pub node: String,
    /// What it proclaimed as leader ([`Leadership::proclaim`]), if it did in this term.
    pub proclaimed: Option<Vec<u8>>,
}

/// Leader election: one leader (master) among the candidates on a path, the rest followers.
///
/// A candidate joins the contender queue under the election path with an
/// EPHEMERAL_SEQUENTIAL node named `_c_<uuid>-latch-<seq>` holding its id, as Apache
/// Curator's `LeaderLatch` does, so Rust and Java candidates can share one election. The
/// first in the queue leads; every other candidate watches only its predecessor, so when a
/// leader goes exactly one follower wakes and leadership passes in queue order.
///
/// * **Taking over.** A follower leads only once its own node is known to exist: one whose
///   node was deleted by someone joins the queue again, at its end, and never leads on
///   the old node.
/// * **Stepping down.** A leader becomes [`Role::Follower`] as soon as its leadership can no
///   longer be trusted: the session expires or is closed, the connection is suspended (see
///   [`SessionBuilder::tolerate_suspension`](crate::SessionBuilder::tolerate_suspension)),
///   or its node is deleted. It never learns of the loss later than the servers could let
///   the next candidate lead. After a suspension that the session survived, it leads again
///   with the same term once it has seen its node still there (its node was first all
///   along, so nobody else led meanwhile).
/// * **Terms.** [`Leadership::term`] is the zxid that created the leader's node: it grows
///   with every new leader, a fencing token for what the leader writes.
/// * **Session expiry.** A candidate re-joins the queue on the new session by default
///   ([`LeaderElection::rejoin_after_expiry`]).
/// * **Leaving.** [`Candidate::resign`] and dropping the candidate delete its node.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::LeaderElection;
///
/// let election = LeaderElection::new(&session, "/election/orders", "node-a")?;
/// election
///     .run(|leadership| async move {
///         println!("leading in term {}", leadership.term());
///         leadership.lost().await; // lead until the leadership is lost
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct LeaderElection {
    session: Session,
    queue: Queue,
    id: Arc<str>,
    rejoin: bool,
    backoff: Duration,
}

/// The first pause [`LeaderElection::run`] makes after a term that ended quickly.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

impl LeaderElection {
    /// An election on `path` in which this process takes part as `id`.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed or too long.
    /// * [`Error::InvalidArgument`] if `id` is empty, holds a NUL (it would end the id in
    ///   proclaimed data), is `__REVOKE__`, or is larger than ZooKeeper accepts in a node
    ///   (960 KiB here).
    ///
    /// Nothing is sent to ZooKeeper.
    pub fn new(session: &Session, path: &str, id: impl Into<String>) -> Result<LeaderElection> {
        let id = id.into();
        validate_id(&id)?;
        Ok(LeaderElection {
            session: session.clone(),
            queue: Queue::new(path, "latch-", Blockers::EVERY, session.node_acl())?
                .with_id(Arc::from(id.as_bytes())),
            id: id.into(),
            rejoin: true,
            backoff: Duration::from_secs(10),
        })
    }

    /// Whether a candidate whose session expired joins again on the new session
    /// (default `true`). With `false` its campaign ends with [`Error::SessionExpired`].
    pub fn rejoin_after_expiry(self, rejoin: bool) -> LeaderElection {
        LeaderElection {
            queue: self.queue.rejoin(rejoin),
            rejoin,
            ..self
        }
    }

    /// The longest pause [`run`](Self::run) makes before it joins again after a term that
    /// ended quickly (default 10 s), so that a leader whose work fails at once (its
    /// database is down) does not hammer the ensemble with terms. The pause starts at
    /// 100 ms and doubles, up to this, while terms keep ending within the pause before
    /// them; a term that lasts longer than that starts it again at 100 ms. Zero: no pause.
    pub fn backoff(mut self, max: Duration) -> LeaderElection {
        self.backoff = max;
        self
    }

    /// The ACL of the nodes this election creates (its candidates' nodes, and the election
    /// path and its parents where it makes them), instead of the session's
    /// [`node_acl`](crate::SessionBuilder::node_acl). With
    /// [`NodeAcl::CreatorAllWorldRead`], observers without credentials can still call
    /// [`participants`](Self::participants) and [`leader`](Self::leader).
    ///
    /// A creator-only ACL on a session without credentials makes [`join`](Self::join) fail
    /// with [`Error::InvalidAcl`] (the servers refuse it); nothing is created.
    pub fn node_acl(mut self, acl: NodeAcl) -> LeaderElection {
        self.queue = self.queue.with_acl(acl);
        self
    }

    /// The election path.
    pub fn path(&self) -> &str {
        self.queue.root()
    }

    /// The session the election runs on.
    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    /// Enters the queue and returns at once, as a [`Candidate`] that follows or leads in
    /// the background.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the ACL of the path (or a parent) denies creating nodes
    ///   (also how a wrong digest password shows); nothing is created. (A candidate that
    ///   would wait on a node it may not read is refused later, by
    ///   [`Candidate::leadership`].)
    /// * [`Error::InvalidAcl`] if the servers refuse the [`NodeAcl`] (creator-only
    ///   without credentials).
    /// * [`Error::EphemeralParent`] if the path lies under an ephemeral node.
    /// * [`Error::ConnectionLoss`] as [`Mutex::lock`](crate::Mutex::lock).
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe: a node created for a dropped `join()` is deleted in the background.
    pub async fn join(&self) -> Result<Candidate> {
        let span = info_span!("zk.election.join", path = %self.path(), id = %self.id, acl = ?self.queue.acl());
        async {
            let contender = self.enter().await?;
            debug!(node = %contender.node(), "joined");
            Ok(Candidate::start(self.clone(), contender))
        }
        .instrument(span)
        .await
    }

    /// Enters the queue on the live session (waiting for one).
    async fn enter(&self) -> Result<Ticket> {
        let entered = self.queue.enter(&self.session, Wait::Forever);
        entered.await?.ok_or(Error::Closed)
    }

    /// The current leader, if anyone is in the queue; works without joining.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read.
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down
    ///   (or a new session is being made): it does not wait.
    /// * [`Error::ConnectionLoss`] if the connection broke while it read.
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants().await?.into_iter().next())
    }

    /// Everyone in the queue, leader first; works without joining. Foreign candidates on
    /// the same path (Curator's `LeaderLatch`) are listed with their ids too.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read.
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down
    ///   (or a new session is being made): it does not wait.
    /// * [`Error::ConnectionLoss`] if the connection broke while it read.
    /// * [`Error::Closed`] if the session was closed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        let span = info_span!("zk.election.participants", path = %self.path());
        let listed = self.queue.listed(&self.session).instrument(span).await?;
        Ok(listed
            .into_iter()
            .map(|l| participant(path::join(self.path(), &l.name), l.data.as_deref()))
            .collect())
    }

    /// Leads whenever this process is elected: joins, waits for leadership, runs
    /// `lead(leadership)`, and gives leadership up when `lead` returns or leadership is
    /// lost (then `lead`'s future is dropped); joins again and repeats, after a pause if the
    /// term was short (see [`backoff`](Self::backoff)). Returns only on error; drop the
    /// future to stop: the node is deleted in the background, as a dropped
    /// [`Candidate`]'s is.
    ///
    /// To shut down, drop it and then await [`Session::close`]: the close returns once the
    /// servers have ended the session, so the node is gone and the next candidate leads
    /// before the process exits.
    ///
    /// `lead` is called once per term, so it captures shared state by cloning it into each
    /// term's future (an `Arc`, a channel, a [`Group`](crate::Group): all are cheap to
    /// clone). A term's work stops when the leadership is lost: select on
    /// [`Leadership::lost`], or hand [`Leadership::loss_signal`] to the tasks it spawns.
    ///
    /// ```no_run
    /// # async fn demo(
    /// #     session: zk_recipes::Session,
    /// #     election: zk_recipes::LeaderElection,
    /// #     shutdown: impl std::future::Future<Output = ()>,
    /// # ) {
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::time::Duration;
    ///
    /// let terms = Arc::new(AtomicU64::new(0));
    /// let Ok(group) = zk_recipes::Group::new(&session, "/services/orders/members") else {
    ///     return;
    /// };
    /// let lead = |leadership: zk_recipes::Leadership| {
    ///     // Clones for this term's future: the closure keeps its own for the next term.
    ///     let (terms, group) = (terms.clone(), group.clone());
    ///     async move {
    ///         terms.fetch_add(1, Ordering::Relaxed);
    ///         tokio::select! {
    ///             _ = leadership.lost() => {}
    ///             _ = async {
    ///                 let members = group.members().await;
    ///                 eprintln!("term {}: members {members:?}", leadership.term());
    ///                 std::future::pending::<()>().await
    ///             } => {}
    ///         }
    ///     }
    /// };
    /// tokio::select! {
    ///     ended = election.run(lead) => eprintln!("election ended: {ended:?}"),
    ///     () = shutdown => {} // the `run()` future is dropped: its node is deleted
    /// }
    /// let _ = tokio::time::timeout(Duration::from_secs(5), session.close()).await;
    /// # }
    /// ```
    ///
    /// # Notable errors
    /// As [`join`](Self::join) and [`Candidate::leadership`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it resigns.
    pub async fn run<F, Fut>(&self, mut lead: F) -> Result<()>
    where
        F: FnMut(Leadership) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut pause = Duration::ZERO;
        loop {
            let candidate = self.join().await?;
            let leadership = candidate.leadership().await?;
            let (term, started) = (leadership.term(), tokio::time::Instant::now());
            tokio::select! {
                () = lead(leadership.clone()) => debug!(term, "leader finished its work"),
                loss = leadership.lost() => warn!(term, ?loss, "leadership lost while leading"),
            }
            match candidate.resign().await {
                Ok(()) | Err(Error::Lost { .. }) => {}
                Err(err) => return Err(err),
            }
            pause = match started.elapsed() > pause.max(FIRST_BACKOFF) {
                true => Duration::ZERO,
                false => (pause * 2).clamp(FIRST_BACKOFF, self.backoff.max(FIRST_BACKOFF)),
            }
            .min(self.backoff);
            if !pause.is_zero() {
                debug!(?pause, "the term was short; pausing before joining again");
                tokio::time::sleep(pause).await;
            }
        }
    }

    /// The current leader as it changes (`None` while no one is in the queue): a receiver
    /// that starts with the leader now and is updated from one children watch on the
    /// election path and one data watch on the leader's node. Works without joining. It is
    /// the first in the queue, as [`leader`](Self::leader) says: a candidate whose session
    /// was just cut off stays first until the servers expire it. It carries what the leader
    /// proclaimed ([`Participant::proclaimed`](crate::Participant::proclaimed)) and follows each later
    /// [`proclaim`](crate::Leadership::proclaim): the leader's node is read again when the
    /// first in the queue changes or its data watch fires. A leader whose node this session
    /// may not read (its ACL) is shown with an empty id and nothing proclaimed. How stale it
    /// can be, and what a suspended connection does to it: as for
    /// [`Group::watch_members`](crate::Group::watch_members). The view stops when every
    /// receiver is dropped or the session is closed.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the path cannot be read.
    /// * [`Error::Disconnected`](crate::Error::Disconnected) (or [`Error::Renewing`](crate::Error::Renewing)) at once if the connection is down
    ///   now.
    ///
    /// # Cancel safety
    /// Cancel safe: a view started for a dropped call stops once its first listing is
    /// answered.
    pub async fn watch_leader(&self) -> Result<watch::Receiver<Option<Participant>>> {
        let span = info_span!("zk.election.watch_leader", path = %self.path());
        let root = self.path().into();
        view::start(self.session(), root, LeaderView::default(), span).await
    }
}

/// The participant whose node is `node`, from its node's data (`None`: this session may
/// not read it).
pub(crate) fn participant(node: String, data: Option<&[u8]>) -> Participant {
    // A request to let go replaced what the candidate wrote: its id is not known.
    let data = data.filter(|data| *data != REVOKE);
    let (id, proclaimed) = data.map_or((None, None), |data| {
        let (id, proclaimed) = split(data);
        (Some(String::from_utf8_lossy(id).into_owned()), proclaimed)
    });
    Participant {
        id,
        node,
        proclaimed: proclaimed.map(<[u8]>::to_vec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_and_proclaimed_data_are_told_apart() {
        let plain = participant("/e/n".into(), Some(b"node-a"));
        assert_eq!(
            (plain.id.as_deref(), plain.proclaimed),
            (Some("node-a"), None)
        );
        let proclaimed = participant("/e/n".into(), Some(b"node-a\0host:80\0x"));
        assert_eq!(proclaimed.id.as_deref(), Some("node-a"));
        assert_eq!(proclaimed.proclaimed.as_deref(), Some(&b"host:80\0x"[..]));
        // Empty data is an empty id; unreadable or overwritten by a request, no id.
        assert_eq!(
            participant("/e/n".into(), Some(b"")).id.as_deref(),
            Some("")
        );
        assert_eq!(participant("/e/n".into(), None).id, None);
        assert_eq!(participant("/e/n".into(), Some(REVOKE)).id, None);
    }
}
