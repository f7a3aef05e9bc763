//! The distributed counting semaphore: [`Semaphore`] and its [`Lease`].
//!
//! At most so many leases at a time across every process, session and task that acquires
//! on the same path; acquirers are served in order of arrival.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::{debug, info_span, Instrument};
use zookeeper_client::Client;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::hold::{Fenced, Hold, Holding, LossSignal, LOCK_WATCH};
use crate::loss::Loss;
use crate::path;
use crate::queue::{Blockers, Queue, Wait};
use crate::recipes::contenders::{list, validate_id, Access, Contender};
use crate::recipes::lock::Mutex;
use crate::session::{retry, Session};

/// What the leases node's data says before the maximum its users agreed on.
const RECORD: &str = "zk-recipes max leases ";

/// How many times a record is written while others change the leases node meanwhile.
const RECORD_ATTEMPTS: usize = 3;

/// The maximum a leases node's data records, if it is a record.
pub(crate) fn recorded(data: &[u8]) -> Option<u32> {
    std::str::from_utf8(data)
        .ok()?
        .strip_prefix(RECORD)?
        .parse()
        .ok()
}

/// A distributed counting semaphore: at most `max` leases at a time, across every process,
/// session and task that acquires on the same path.
///
/// The layout is Apache Curator's `InterProcessSemaphoreV2`, so Rust and Java services can
/// share one semaphore. A [`Mutex`](crate::Mutex) on `<path>/locks` (Curator's `InterProcessMutex`
/// there) lets one acquirer in at a time. That acquirer creates its lease, an
/// EPHEMERAL_SEQUENTIAL `<path>/leases/_c_<uuid>-lease-<seq>`, and holds it once
/// `<path>/leases` has at most `max` children, its own included, as Curator counts; until
/// then it alone watches the lease list. It lets the next acquirer in once it holds.
///
/// * **No herd.** Waiting acquirers wait in the mutex's queue, each watching only its
///   predecessor; one watch on the lease list at a time.
/// * **Fairness.** Leases are handed out in the order acquirers arrived at the mutex.
/// * **Tasks.** Every [`acquire`](Self::acquire) is an acquirer of its own: tasks sharing
///   one `Semaphore` count exactly as processes do.
/// * **Fencing, loss, leaving, session expiry** are those of [`Mutex`](crate::Mutex): a lease's token is
///   the zxid that created its node; [`Lease::lost`] resolves when the session expires or
///   is closed, the connection is suspended, or the lease node is deleted; a timed-out,
///   cancelled or dropped acquisition leaves neither a lease nor a mutex node behind; a
///   lease holder's expired session frees its lease.
/// * **One maximum.** Every participant must use the same `max`. This crate records its
///   maximum in the data of `<path>/leases` and compares on every acquisition: an acquirer
///   whose maximum differs from the one recorded while leases are held fails with
///   [`Error::MaxLeasesConflict`] (an acquirer that finds only a stale record, with no
///   lease held, records its own). Curator records nothing and reads nothing: a Curator
///   participant with another maximum is not detected, and takes leases by its own count.
///
/// The data of `<path>/leases` holds the maximum: do not keep data of your own in it.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::Semaphore;
///
/// let crawlers = Semaphore::new(&session, "/semaphores/crawlers", 3)?;
/// let lease = crawlers.acquire().await?; // one of at most 3
/// // ... crawl ...
/// lease.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    pub(crate) session: Session,
    pub(crate) gate: Mutex,
    pub(crate) leases: Queue,
    pub(crate) max: u32,
}

impl Semaphore {
    /// A semaphore on `path` with at most `max` leases at a time (`path`, `<path>/locks`
    /// and `<path>/leases` are created, with missing parents, as container nodes on first
    /// use).
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed or too long.
    /// * [`Error::InvalidArgument`] if `max` is 0.
    ///
    /// Nothing is sent to ZooKeeper.
    pub fn new(session: &Session, path: &str, max: u32) -> Result<Semaphore> {
        let path = path::validate_root(path)?;
        if max == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore needs a maximum of at least 1 lease".into(),
            ));
        }
        Ok(Semaphore {
            session: session.clone(),
            gate: Mutex::new(session, &path::join(path, "locks"))?,
            leases: Queue::new(
                &path::join(path, "leases"),
                "lease-",
                Blockers::Crowd(max),
                session.node_acl(),
            )?,
            max,
        })
    }

    /// The ACL of the nodes this semaphore creates (its leases, its internal mutex's nodes,
    /// and the paths it makes), instead of the session's
    /// [`node_acl`](crate::SessionBuilder::node_acl); as [`Mutex::node_acl`](crate::Mutex::node_acl).
    pub fn node_acl(self, acl: NodeAcl) -> Semaphore {
        Semaphore {
            gate: self.gate.node_acl(acl),
            leases: self.leases.with_acl(acl),
            ..self
        }
    }

    /// The semaphore's path.
    pub fn path(&self) -> &str {
        self.leases
            .root()
            .rsplit_once('/')
            .map_or("", |(path, _)| path)
    }

    /// The most leases held at a time.
    pub fn max_leases(&self) -> u32 {
        self.max
    }

    /// Waits as long as it takes to hold a lease.
    ///
    /// # Notable errors
    /// * [`Error::MaxLeasesConflict`] if leases are held under another maximum.
    /// * [`Error::NoAuth`] if the ACL of the path (or a parent) denies creating nodes.
    /// * [`Error::InvalidAcl`] if the servers refuse the [`NodeAcl`] (creator-only
    ///   without credentials).
    /// * [`Error::EphemeralParent`] if the path lies under an ephemeral node.
    /// * [`Error::ConnectionLoss`] as [`Mutex::lock`](crate::Mutex::lock).
    /// * [`Error::Closed`] if the session was closed (also while waiting).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future deletes its lease and its mutex node in the
    /// background, even if the reply to a create was lost.
    pub async fn acquire(&self) -> Result<Lease> {
        self.acquire_within(Wait::Forever)
            .await?
            .ok_or(Error::Closed)
    }

    /// Takes a lease if one is free and no other acquirer is under way; never waits,
    /// neither on holders nor on the connection. `None`, with its nodes deleted, if not.
    ///
    /// # Notable errors
    /// As [`acquire`](Self::acquire), and at once those of
    /// [`Mutex::try_lock`](crate::Mutex::try_lock): [`Error::Disconnected`],
    /// [`Error::ConnectionLoss`], [`Error::Renewing`], [`Error::SessionExpired`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<Lease>> {
        self.acquire_within(Wait::Never).await
    }

    /// Waits at most `timeout` to hold a lease; `None` if it did not, with its nodes
    /// deleted. The bound covers waiting for a session, the connection, other acquirers
    /// and holders.
    ///
    /// # Notable errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire_for(&self, timeout: Duration) -> Result<Option<Lease>> {
        self.acquire_within(Wait::at_most(timeout)).await
    }

    /// Passes the gate (the mutex), takes a lease, and lets the next acquirer in.
    async fn acquire_within(&self, wait: Wait) -> Result<Option<Lease>> {
        let span = info_span!(
            "zk.semaphore.acquire",
            path = %self.path(),
            max = self.max,
            acl = ?self.leases.acl()
        );
        async {
            let Some(gate) = self.gate.acquire(wait).await? else {
                return Ok(None);
            };
            // A close ends a lease that waits for the connection, as it ends the gate's.
            let leased = tokio::select! {
                biased;
                () = self.session.closed() => Err(Error::Closed),
                leased = self.lease(wait) => leased,
            };
            match leased {
                // Not awaited: the gate's node goes in the background (one round trip less);
                // the next acquirer passes once it is gone.
                Ok(Some(_)) => drop(gate),
                // Awaited: a failed acquisition leaves nothing behind when it returns.
                Ok(None) | Err(_) => {
                    if let Err(err) = gate.release().await {
                        debug!(%err, "the gate is left in the background");
                    }
                }
            }
            Ok(leased?.map(|holding| Lease { holding }))
        }
        .instrument(span)
        .await
    }

    /// Inside the gate: checks the maximum, waits for few enough leases, records it.
    async fn lease(&self, wait: Wait) -> Result<Option<Holding>> {
        // The entry permit of the leases' root is held over the check, as an entry holds it
        // over its create and listing: a burst of acquirers reads the record a bounded
        // number at a time. Given back before the lease enters.
        let Some((permit, client)) = self.session.ready(self.leases.root_hash(), wait).await?
        else {
            return Ok(None);
        };
        // The deadline never cuts a read the servers are answering.
        let unrecorded = tokio::select! {
            biased;
            checked = self.check(&client, 0) => checked.map(Some)?,
            () = wait.cut_off(&client) => None,
        };
        drop((permit, client));
        let Some(unrecorded) = unrecorded else {
            return Ok(None);
        };
        let Some(ticket) = self.leases.acquire(&self.session, &mut None, wait).await? else {
            return Ok(None);
        };
        let holding = Holding::start(ticket, LOCK_WATCH, None);
        if let (Some(version), Ok(client)) = (unrecorded, self.session.connected()) {
            if let Err(err) = self.record(&client, version).await {
                let _ = holding.release().await;
                return Err(err);
            }
        }
        Ok(Some(holding))
    }

    /// Compares the maximum recorded at the leases node with ours, counting `ours` of its
    /// leases as our own: `None` if ours is recorded (or the data is someone else's), the
    /// version to record ours at if none is or only a stale one (no other lease held).
    ///
    /// # Notable errors
    /// * [`Error::MaxLeasesConflict`] if another maximum is recorded while others hold.
    async fn check(&self, client: &Client, ours: i32) -> Result<Option<i32>> {
        let leases = self.leases.root();
        let (data, stat) = match retry(client, || client.get_data(leases)).await {
            Ok(read) => read,
            Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => return Ok(Some(0)),
            Err(Error::ZooKeeper(err)) => return Err(Error::at(leases, err)),
            Err(err) => return Err(err),
        };
        match recorded(&data) {
            Some(max) if max == self.max => Ok(None),
            Some(max) if stat.num_children > ours => Err(Error::MaxLeasesConflict {
                path: self.path().to_owned(),
                ours: self.max,
                recorded: max,
            }),
            Some(_) => Ok(Some(stat.version)),
            None if data.is_empty() => Ok(Some(stat.version)),
            None => Ok(None),
        }
    }

    /// Records our maximum at the leases node, holding one lease, if the node is still at
    /// `version`; else checks again. A record that cannot be written is left to the next
    /// acquirer.
    ///
    /// # Notable errors
    /// * [`Error::MaxLeasesConflict`] as [`check`](Self::check).
    async fn record(&self, client: &Arc<Client>, mut version: i32) -> Result<()> {
        let leases = self.leases.root();
        let record = format!("{RECORD}{}", self.max);
        for _ in 0..RECORD_ATTEMPTS {
            let written = retry(client, || {
                client.set_data(leases, record.as_bytes(), Some(version))
            });
            match written.await {
                Ok(_) => return Ok(()),
                Err(Error::ZooKeeper(zookeeper_client::Error::BadVersion)) => {
                    match self.check(client, 1).await? {
                        Some(now) => version = now,
                        None => return Ok(()),
                    }
                }
                Err(err) => {
                    debug!(%err, "cannot record the maximum; left to the next acquirer");
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The leases, in order, then the acquirers waiting to pass in, in order; works
    /// without acquiring. The first `max` leases hold; a lease beyond them is the acquirer
    /// passing in, waiting for the count (its place among the acquirers is not listed
    /// again). An acquirer's token and id are those of its node at `<path>/locks`.
    ///
    /// # Notable errors
    /// As [`Mutex::contenders`](crate::Mutex::contenders).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn contenders(&self) -> Result<Vec<Contender>> {
        let max = usize::try_from(self.max).unwrap_or(usize::MAX);
        let lease = |_: &str| Access::Lease;
        let mut leases = list(&self.session, &self.leases, lease, |i, _, _| i < max).await?;
        let acquirers = list(&self.session, &self.gate.queue, lease, |_, _, _| false).await?;
        let passing = usize::from(leases.len() > max);
        leases.extend(acquirers.into_iter().skip(passing));
        Ok(leases)
    }

    /// The maximum recorded at `<path>/leases` by the participants that hold leases (see
    /// [`Semaphore`]), if any: what an observer that does not know the maximum can make a
    /// semaphore with to see who holds. Curator records none.
    ///
    /// # Notable errors
    /// As [`Mutex::contenders`](crate::Mutex::contenders).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn recorded_max(&self) -> Result<Option<u32>> {
        let client = self.session.connected()?;
        let leases = self.leases.root();
        match client.get_data(leases).await {
            Ok((data, _)) => Ok(recorded(&data)),
            Err(zookeeper_client::Error::NoNode) => Ok(None),
            Err(err) => Err(Error::at(leases, err)),
        }
    }

    /// The id this semaphore's leases and acquirers carry; as [`Mutex::id`](crate::Mutex::id).
    ///
    /// # Notable errors
    /// As [`Mutex::id`](crate::Mutex::id).
    pub fn id(self, id: &str) -> Result<Semaphore> {
        let checked = validate_id(id)?;
        Ok(Semaphore {
            gate: self.gate.id(id)?,
            leases: self.leases.with_id(checked),
            ..self
        })
    }
}

/// A lease of a [`Semaphore`]; returned to it when dropped (in the background). Its methods
/// mean what [`MutexGuard`](crate::MutexGuard)'s do.
#[derive(Debug)]
#[must_use = "the lease is returned when it is dropped"]
pub struct Lease {
    holding: Holding,
}

impl Lease {
    /// The fencing token: the zxid that created the lease's node. It is greater for every node
    /// created later, so a resource that remembers the largest token it has accepted can refuse a
    /// stale holder.
    pub fn fencing_token(&self) -> u64 {
        self.holding.core().token()
    }

    /// Full path of the lease's znode.
    pub fn node(&self) -> &str {
        self.holding.core().node()
    }

    /// Whether the lease can no longer be trusted (see [`lost`](Self::lost)). Deletion of the node
    /// by someone else is noticed once it is watched (a lock's or a lease's from 10 ms after it was
    /// acquired, or once `lost()` has been awaited; a leadership's at once); expiry, suspension and
    /// closing from the start; a session the servers have not confirmed in time
    /// ([`Loss::Lapsed`](crate::Loss::Lapsed)) at the first look, read from the clock, even right
    /// after the process wakes from a pause.
    pub fn is_lost(&self) -> bool {
        self.holding.core().is_lost()
    }

    /// Resolves once the lease can no longer be trusted: the session expired or was closed, the
    /// connection was suspended, the node was deleted, or the servers have not confirmed the
    /// session for a session timeout ([`Loss::Lapsed`](crate::Loss::Lapsed): they may have expired
    /// it); says which.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> Loss {
        self.holding.core().lost().await
    }

    /// The loss of this hold as an owned, cloneable value: hand it to a task that watches
    /// the hold while another works under it; see [`LossSignal`](crate::LossSignal).
    pub fn loss_signal(&self) -> LossSignal {
        self.holding.core().loss_signal()
    }

    /// Releases the lease and returns once its node is gone: deleted, or gone with its session.
    /// While the connection is down it waits for it to come back, at most until the servers would
    /// have expired the session (1.5 session timeouts); it never fails for a connection that is
    /// down.
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if the lease was lost before the release (what was
    ///   done under it may have overlapped with another holder); the node, if still there, is
    ///   deleted all the same; if the session is gone this returns at once.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the servers refuse the delete: the node stays
    ///   until the session ends.
    ///
    /// # Cancel safety
    /// Cancel safe: an unfinished release goes on in the background until the node is gone or its
    /// session is.
    pub async fn release(self) -> Result<()> {
        // Boxed: a caller that awaits an acquisition then the release in one future
        // reserves room for the larger of the two while it waits.
        Box::pin(self.holding.release()).await
    }

    /// A transaction that commits only while this hold is intact; see [`Fenced`](crate::Fenced).
    pub fn fenced(&self) -> Fenced {
        self.holding.core().fenced()
    }

    /// Resolves once someone asked the holder to let go; see [`revoke`](crate::revoke). A request
    /// to the node belongs to the node: once any handle of it saw the marker (a re-entered guard, a
    /// clone, a leader's earlier term on the same node), this resolves, even after the holder's own
    /// write replaced the marker (such a write, a proclamation or a fenced one, reads the node
    /// first: it never replaces a marker unseen).
    ///
    /// # Notable errors
    /// * [`Error::Lost`](crate::Error::Lost) if the hold ends first.
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the node's ACL no longer lets the session read
    ///   it.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn revocation_requested(&self) -> Result<()> {
        self.holding.core().revocation_requested().await
    }
}

#[async_trait]
impl Hold for Lease {
    fn fencing_token(&self) -> u64 {
        Lease::fencing_token(self)
    }

    fn node(&self) -> &str {
        Lease::node(self)
    }

    fn is_lost(&self) -> bool {
        Lease::is_lost(self)
    }

    async fn lost(&self) -> Loss {
        Lease::lost(self).await
    }

    fn loss_signal(&self) -> LossSignal {
        Lease::loss_signal(self)
    }

    async fn release(self: Box<Self>) -> Result<()> {
        Lease::release(*self).await
    }

    fn fenced(&self) -> Fenced {
        Lease::fenced(self)
    }

    async fn revocation_requested(&self) -> Result<()> {
        Lease::revocation_requested(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_its_own_record() {
        assert_eq!(recorded(format!("{RECORD}3").as_bytes()), Some(3));
        assert_eq!(recorded(b""), None);
        assert_eq!(recorded(b"zk-recipes first left 7"), None);
        assert_eq!(recorded(format!("{RECORD}-1").as_bytes()), None);
    }
}
