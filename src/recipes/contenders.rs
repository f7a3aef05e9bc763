//! Introspection: who holds and who waits ([`Contender`]), and the ids contenders carry.
//!
//! `contenders()` on [`Mutex`](crate::Mutex), [`RwLock`](crate::RwLock) and [`Semaphore`](crate::Semaphore) lists the queue in order
//! (Curator's `getParticipantNodes`, kazoo's `contenders()`), without joining it: each
//! contender's node, fencing token, whether it holds now and how ([`Access`]), and its id.
//! Foreign contenders on the same path (Curator, kazoo) are listed too.
//!
//! **Ids.** Every node a recipe creates carries its contender's id as its data: by default
//! `<host name>/<process id>` (so an operator can tell who holds), or what
//! [`Mutex::id`](crate::Mutex::id) (and [`RwLock::id`](crate::RwLock::id), [`Semaphore::id`](crate::Semaphore::id)) sets. Curator contenders show
//! what Curator stored in their nodes (its `InterProcessMutex` 5.4 stores nothing, so their
//! id is empty; a `LeaderLatch` stores its participant id).
//! A node written into by someone else shows what was written (a holder asked to let go
//! shows no id: see [`Contender::revocation_requested`]). Data that is not UTF-8 is shown
//! with replacement characters. A node the observer's session may not read (its ACL, e.g.
//! [`NodeAcl::CreatorOnly`](crate::NodeAcl::CreatorOnly) of another user) is listed all the
//! same, in its place, without an id.

use std::sync::Arc;

use tracing::{debug, info_span, Instrument};

use crate::error::{Error, Result};
use crate::path;
use crate::queue::{is_contender_name, Listed, Queue, MAX_DATA};
use crate::revoke::{revoke, REVOKE};
use crate::session::Session;

/// A contender in a queue, as an observer sees it (`contenders()` on [`Mutex`](crate::Mutex), [`RwLock`](crate::RwLock)
/// and [`Semaphore`](crate::Semaphore): Curator's `getParticipantNodes`, kazoo's `contenders()`, with who
/// holds). Foreign contenders on the same path (Curator, kazoo) are listed too.
///
/// **Ids.** Every node a recipe creates carries its contender's id as its data: by default
/// `<host name>/<process id>` (so an operator can tell who holds), or what [`Mutex::id`](crate::Mutex::id)
/// (and [`RwLock::id`](crate::RwLock::id), [`Semaphore::id`](crate::Semaphore::id)) sets. Curator contenders show what Curator
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

impl Contender {
    /// Whether a node named `name` (the last part of its path) is named as the queue
    /// recipes name their contenders: Curator's protected prefix `_c_<uuid>-` (ours too)
    /// then `lock-`, `latch-`, `__READ__`, `__WRIT__` or `lease-`, or kazoo's 32 hex digits
    /// then `__lock__` or `__rlock__`; then a sequence number. Anything else (a lock's key,
    /// a semaphore's `leases`, a group member, even one named `order-1234567890`) is not.
    /// [`revoke`](crate::revoke) writes only into nodes named so; a tool that looks at a
    /// path can tell a recipe's queue by it without guessing from other names.
    ///
    /// ```
    /// use zk_recipes::Contender;
    ///
    /// assert!(Contender::is_node_name(
    ///     "_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-latch-0000000007"
    /// ));
    /// assert!(Contender::is_node_name("0f8e2c1a3b4d4e5f8a9b0c1d2e3f4a5b__rlock__0000000002"));
    /// assert!(!Contender::is_node_name("order-1234567890"));
    /// assert!(!Contender::is_node_name("locks"));
    /// ```
    pub fn is_node_name(name: &str) -> bool {
        is_contender_name(name)
    }
}

/// What a [`Contender`] holds or waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Access {
    /// A [`Mutex`](crate::Mutex): alone.
    Exclusive,
    /// An [`RwLock`](crate::RwLock) for reading: with other readers.
    Read,
    /// An [`RwLock`](crate::RwLock) for writing: alone.
    Write,
    /// A [`Semaphore`](crate::Semaphore) lease: with up to its maximum of others.
    Lease,
}

/// Checks `id` as [`LeaderElection::new`](crate::LeaderElection::new) and [`Mutex::id`](crate::Mutex::id)
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
pub(crate) async fn list(
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
pub(crate) async fn revoke_holding(
    session: &Session,
    contenders: Vec<Contender>,
) -> Result<Vec<String>> {
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

/// A contender node's data as its id and, if it proclaimed, what it proclaimed.
pub(crate) fn split(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == 0) {
        Some(end) => (&data[..end], Some(&data[end + 1..])),
        None => (data, None),
    }
}
