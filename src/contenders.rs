//! Introspection: who holds and who waits ([`Contender`]), and the ids contenders carry.
//!
//! `contenders()` on [`Mutex`], [`RwLock`] and [`Semaphore`] lists the queue in order
//! (Curator's `getParticipantNodes`, kazoo's `contenders()`), without joining it: each
//! contender's node, fencing token, whether it holds now and how ([`Access`]), and its id.
//! Foreign contenders on the same path (Curator, kazoo) are listed too.
//!
//! **Ids.** Every node a recipe creates carries its contender's id as its data: by default
//! `<host name>/<process id>` (so an operator can tell who holds), or what
//! [`Mutex::id`] (and [`RwLock::id`], [`Semaphore::id`]) sets. Curator contenders show
//! what Curator stored in their nodes (its `InterProcessMutex` 5.4 stores nothing, so their
//! id is empty; a `LeaderLatch` stores its participant id).
//! A node written into by someone else shows what was written (a holder asked to let go
//! shows no id: see [`Contender::revocation_requested`]). Data that is not UTF-8 is shown
//! with replacement characters. A node the observer's session may not read (its ACL, e.g.
//! [`NodeAcl::CreatorOnly`](crate::NodeAcl::CreatorOnly) of another user) is listed all the
//! same, in its place, without an id.

use std::sync::{Arc, OnceLock};

use tracing::{debug, info_span, Instrument};

use crate::error::{Error, Result};
use crate::lock::Mutex;
use crate::path;
use crate::proclaim::split;
use crate::queue::{Listed, Queue, MAX_DATA};
use crate::revoke::{revoke, REVOKE};
use crate::rwlock::{is_writer, RwLock};
use crate::semaphore::{recorded, Semaphore};
use crate::session::Session;

/// A contender in a queue, as an observer sees it (`contenders()` on [`Mutex`], [`RwLock`]
/// and [`Semaphore`]: Curator's `getParticipantNodes`, kazoo's `contenders()`, with who
/// holds). Foreign contenders on the same path (Curator, kazoo) are listed too.
///
/// **Ids.** Every node a recipe creates carries its contender's id as its data: by default
/// `<host name>/<process id>` (so an operator can tell who holds), or what [`Mutex::id`]
/// (and [`RwLock::id`], [`Semaphore::id`]) sets. Curator contenders show what Curator
/// stored in their nodes (its `InterProcessMutex` 5.4 stores nothing, so their id is
/// empty). A node written into by someone else shows what was written, except Curator's
/// revoke marker (see [`revocation_requested`](Self::revocation_requested)). Data that is
/// not UTF-8 is shown with replacement characters.
///
/// **Unreadable nodes.** A contender whose node the observer's session may not read (its
/// ACL: [`NodeAcl::CreatorOnly`](crate::NodeAcl::CreatorOnly) of another user) is listed in
/// its place, with its token (read from the node's stat, which needs no permission), and
/// without an id: [`id`](Self::id) is `None`, and `revocation_requested` is `false` (not
/// known). The listing does not fail for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contender {
    /// Full path of its node.
    pub node: String,
    /// Its fencing token: the zxid that created its node (what its guard's
    /// `fencing_token()` says).
    pub token: u64,
    /// Whether it holds now (as far as the order of the queue tells).
    pub holds: bool,
    /// What it holds or waits for.
    pub access: Access,
    /// Its id: its node's data (empty if it carries none; up to a NUL: a leader's
    /// proclaimed data is not part of it). `None` if it is not known: the node cannot be read
    /// by this session (its ACL), or someone asked it to let go (its data was overwritten).
    pub id: Option<String>,
    /// Whether someone asked it to let go ([`revoke`](crate::revoke)): its node holds
    /// `__REVOKE__` (and `id` is `None`).
    pub revocation_requested: bool,
}

/// What a [`Contender`] holds or waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Access {
    /// A [`Mutex`]: alone.
    Exclusive,
    /// An [`RwLock`] for reading: with other readers.
    Read,
    /// An [`RwLock`] for writing: alone.
    Write,
    /// A [`Semaphore`] lease: with up to its maximum of others.
    Lease,
}

/// The default id: `<host name>/<process id>`.
pub(crate) fn default_id() -> Arc<[u8]> {
    static ID: OnceLock<Arc<[u8]>> = OnceLock::new();
    ID.get_or_init(|| {
        format!("{}/{}", host_name(), std::process::id())
            .into_bytes()
            .into()
    })
    .clone()
}

/// This host's name (`localhost` if it has none that can be read).
fn host_name() -> String {
    let mut name = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `name.len()` bytes into the buffer it is given.
    let read = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    match (read, std::str::from_utf8(&name[..end])) {
        (0, Ok(host)) if !host.is_empty() => host.to_owned(),
        _ => "localhost".to_owned(),
    }
}

/// Checks `id` as [`LeaderElection::new`](crate::LeaderElection::new) and [`Mutex::id`]
/// check a contender's id, without a session: a program can refuse a bad id before it
/// connects. Nothing is sent.
///
/// # Notable errors
/// * [`Error::InvalidArgument`] if `id` is empty, holds a NUL, is `__REVOKE__` (Curator's
///   revoke marker), or is larger than a node holds (960 KiB here).
pub fn check_contender_id(id: &str) -> Result<()> {
    validate_id(id).map(|_| ())
}

/// Checks a contender's id: not empty, no NUL (it ends the id in a leader's proclaimed
/// data), not Curator's revoke marker, and small enough for a node.
///
/// # Notable errors
/// * [`Error::InvalidArgument`] saying which.
pub(crate) fn validate_id(id: &str) -> Result<Arc<[u8]>> {
    let why = if id.is_empty() {
        "is empty".to_owned()
    } else if id.contains('\0') {
        "contains a NUL character".to_owned()
    } else if id.as_bytes() == REVOKE {
        "is Curator's revoke marker".to_owned()
    } else if id.len() > MAX_DATA {
        format!("is {} bytes; a node holds at most {MAX_DATA}", id.len())
    } else {
        return Ok(id.as_bytes().into());
    };
    Err(Error::InvalidArgument(format!("contender id {why}")))
}

/// Lists `queue` under `what` (a span name), telling who holds: `holds(index, name, ahead)`
/// where `ahead` says whether an exclusive contender is ahead.
async fn list(
    session: &Session,
    queue: &Queue,
    access: fn(&str) -> Access,
    holds: impl Fn(usize, Access, bool) -> bool,
) -> Result<Vec<Contender>> {
    let span = info_span!("zk.contenders", path = %queue.root());
    let listed = queue.listed(session).instrument(span).await?;
    let mut exclusive_ahead = false;
    let mut contenders = Vec::with_capacity(listed.len());
    for (index, Listed { name, data, token }) in listed.into_iter().enumerate() {
        let access = access(&name);
        let revocation_requested = data.as_deref() == Some(REVOKE);
        contenders.push(Contender {
            node: path::join(queue.root(), &name),
            token,
            holds: holds(index, access, exclusive_ahead),
            access,
            id: data
                .filter(|_| !revocation_requested)
                .map(|data| String::from_utf8_lossy(split(&data).0).into_owned()),
            revocation_requested,
        });
        exclusive_ahead |= access != Access::Read;
    }
    Ok(contenders)
}

/// Asks every contender of `contenders` that holds to let go; the nodes asked. A holder
/// whose node the session may neither read nor write (its ACL) is not asked.
async fn revoke_holding(session: &Session, contenders: Vec<Contender>) -> Result<Vec<String>> {
    let mut asked = Vec::new();
    for holder in contenders.into_iter().filter(|c| c.holds) {
        match revoke(session, &holder.node).await {
            Ok(true) => asked.push(holder.node),
            Ok(false) => {}
            Err(Error::NoAuth { .. }) if holder.id.is_none() && !holder.revocation_requested => {
                debug!(
                    node = holder.node,
                    "may not touch the holder's node: not asked"
                );
            }
            Err(err) => return Err(err),
        }
    }
    Ok(asked)
}

impl Mutex {
    /// Every contender for this lock, first (the holder) first; works without locking. A
    /// contender whose node this session may not read is listed without an id (see
    /// [`Contender`]).
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the lock path cannot be read (not for a contender's node).
    /// * [`Error::Disconnected`] at once if the connection is down: it does not wait.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn contenders(&self) -> Result<Vec<Contender>> {
        list(
            &self.session,
            &self.queue,
            |_| Access::Exclusive,
            |i, _, _| i == 0,
        )
        .await
    }

    /// The id this mutex's contenders carry (their nodes' data), instead of
    /// `<host name>/<process id>`; shown by [`contenders`](Self::contenders).
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if `id` is empty, holds a NUL, is `__REVOKE__`, or is
    ///   larger than a node holds (960 KiB here). Nothing is sent.
    pub fn id(self, id: &str) -> Result<Mutex> {
        let id = validate_id(id)?;
        Ok(Mutex {
            queue: self.queue.with_id(id),
            ..self
        })
    }

    /// Asks whoever holds this lock now to let go ([`revoke`](crate::revoke)); the nodes
    /// asked (none: nobody holds it). A holder whose node this session may neither read nor
    /// write (its ACL) is not asked; nodes it cannot read do not keep the others from being
    /// asked.
    ///
    /// # Notable errors
    /// As [`contenders`](Self::contenders) and [`revoke`](crate::revoke).
    ///
    /// # Cancel safety
    /// Cancel safe; a holder may or may not have been asked.
    pub async fn revoke_holders(&self) -> Result<Vec<String>> {
        revoke_holding(&self.session, self.contenders().await?).await
    }
}

impl RwLock {
    /// Every contender for this lock, in queue order: readers hold while no writer is
    /// ahead of them, a writer holds when first. Works without locking.
    ///
    /// # Notable errors
    /// As [`Mutex::contenders`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn contenders(&self) -> Result<Vec<Contender>> {
        let access = |name: &str| match is_writer(name) {
            true => Access::Write,
            false => Access::Read,
        };
        let holds = |index, access, writer_ahead: bool| match access {
            Access::Read => !writer_ahead,
            _ => index == 0,
        };
        list(&self.session, &self.readers, access, holds).await
    }

    /// The id this lock's contenders carry; as [`Mutex::id`].
    ///
    /// # Notable errors
    /// As [`Mutex::id`].
    pub fn id(self, id: &str) -> Result<RwLock> {
        let id = validate_id(id)?;
        Ok(RwLock {
            readers: self.readers.with_id(id.clone()),
            writers: self.writers.with_id(id),
            ..self
        })
    }

    /// Asks whoever holds this lock now (the writer, or every reader) to let go; as
    /// [`Mutex::revoke_holders`].
    ///
    /// # Notable errors
    /// As [`Mutex::revoke_holders`].
    ///
    /// # Cancel safety
    /// Cancel safe; a holder may or may not have been asked.
    pub async fn revoke_holders(&self) -> Result<Vec<String>> {
        revoke_holding(&self.session, self.contenders().await?).await
    }
}

impl Semaphore {
    /// The leases, in order, then the acquirers waiting to pass in, in order; works
    /// without acquiring. The first `max` leases hold; a lease beyond them is the acquirer
    /// passing in, waiting for the count (its place among the acquirers is not listed
    /// again). An acquirer's token and id are those of its node at `<path>/locks`.
    ///
    /// # Notable errors
    /// As [`Mutex::contenders`].
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
    /// As [`Mutex::contenders`].
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

    /// The id this semaphore's leases and acquirers carry; as [`Mutex::id`].
    ///
    /// # Notable errors
    /// As [`Mutex::id`].
    pub fn id(self, id: &str) -> Result<Semaphore> {
        let checked = validate_id(id)?;
        Ok(Semaphore {
            gate: self.gate.id(id)?,
            leases: self.leases.with_id(checked),
            ..self
        })
    }
}
