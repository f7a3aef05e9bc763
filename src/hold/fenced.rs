//! Fenced writes: [`Fenced`], a transaction that commits only while a hold is intact.
//!
//! The semantics are stated on [`Fenced`], the public face of this module, and on
//! [`Written`]. Its parts: `op` (one operation the caller added), `parents` (what creates
//! with parents need), `answer` (the servers' answer read back: [`Written`], or the loss or
//! failed operation a refusal means).

mod answer;
mod op;
mod parents;

use tracing::{debug, debug_span, info_span, Instrument};
use zookeeper_client::Error as Zk;
use zookeeper_client::{CreateMode, MultiWriteError};

use super::Core;
use crate::error::{Error, Result};
use crate::node::CachedNode;
use crate::path;
use crate::queue::MAX_DATA;
use answer::Answer;
pub use answer::Written;
use op::{Op, OP_OVERHEAD};
use parents::{Parents, Slot};

/// How many times a transaction is sent while what it rests on keeps changing between a
/// read and the write: the holder's own node, that it writes into (others write into it
/// too: a request to let go, a hint), or the parents of its creates with parents (others
/// make or remove them).
const ATTEMPTS: u32 = 3;

/// A transaction fenced by a hold: the operations added, committed in one multi behind a
/// check that the holder's node exists.
///
/// Every hold (a [`MutexGuard`](crate::MutexGuard), an [`RwLock`](crate::RwLock) guard, a
/// [`Lease`](crate::Lease), a [`Leadership`](crate::Leadership)) offers `fenced()`: a
/// builder of writes (`create`, `set_data`, `delete`, `check`, as zookeeper-client's
/// `MultiWriter` has them, and [`create_with_parents`](Fenced::create_with_parents))
/// committed in **one** ZooKeeper multi whose first operation checks that the holder's own
/// node still exists. So they are written all together while the hold is intact, or not
/// at all:
///
/// * **A stale holder writes nothing.** A holder whose session expired (even one paused
///   past its session timeout, that has not heard of it yet), whose node was deleted, or
///   whose session was closed gets [`Error::Lost`] and nothing is written: its node is
///   gone, so the servers refuse the multi, whatever the holder believes. A hold that
///   already reads as lost ([`is_lost`](crate::MutexGuard::is_lost), including a session the
///   servers have not confirmed in time) is refused before anything is sent.
/// * **The node is the hold's identity, checked on the server.** The holder's node is named
///   with a uuid of its own (`_c_<uuid>-…`): no other hold ever makes a node at that path,
///   so its existence proves that the very node the hold made is still there. (A
///   [`Membership`](crate::Membership)'s node, named by its id, could be made again by
///   another session: memberships offer no fenced writes.)
/// * **A hold made of several checks every node.** The transaction of a
///   [`MultiGuard`](crate::MultiGuard) checks the existence of each of its nodes, in the
///   same multi: it commits only while every one of them is intact, and fails with
///   [`Error::Lost`] naming a node that is gone.
/// * **Hints do not fence.** The check is of the node's existence (any version): a write
///   into the holder's node by someone else (Curator's revoker, an operator's hint) never
///   makes fenced writes fail.
/// * **A request to let go is never written over unseen.** A transaction that sets the
///   data of the holder's own node reads the node first (a request to let go found there
///   stays heard by `revocation_requested()`) and checks, instead of its existence, the
///   version read; if others wrote into the node meanwhile, it is read and sent again,
///   three times at most.
/// * **The caller's own failures are told apart.** An operation of the caller's that the
///   servers refuse (a missing node, a version that does not match) fails the whole multi
///   with [`Error::FencedOpFailed`], which names the operation's index, its path and why.
/// * **Checked before sending.** Paths must be absolute, well-formed znode paths (as
///   recipe paths: [`Error::InvalidPath`]), and the whole transaction must fit the servers'
///   request limit (`jute.maxbuffer`, 1 MiB by default, less room for the request's own
///   bytes: [`Error::InvalidArgument`]); nothing is sent otherwise.
///
/// State kept in ZooKeeper under a lock or leadership, and written only through
/// `fenced()`, can therefore never be overwritten by a holder that lost its hold.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::{Mutex, Written};
///
/// let guard = Mutex::new(&session, "/locks/orders")?.lock().await?;
/// let written = guard
///     .fenced()
///     .set_data("/state/orders/cursor", b"42", None)
///     .delete("/state/orders/claim-17", None)
///     .commit()
///     .await?;
/// assert_eq!(written[1], Written::Deleted);
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "nothing is written until `commit` is awaited"]
pub struct Fenced {
    /// The hold that fences it.
    hold: Core,
    /// The other holds that fence it, for a hold made of several
    /// ([`MultiGuard`](crate::MultiGuard)): their nodes' existence is checked right after
    /// the first's.
    also: Vec<Core>,
    ops: Vec<Op>,
}

impl Fenced {
    /// An empty transaction fenced by `hold`.
    pub(super) fn new(hold: Core) -> Fenced {
        Fenced::of_all(hold, Vec::new())
    }

    /// An empty transaction fenced by `hold` and every one of `also`: it commits only while
    /// all of them are intact.
    pub(crate) fn of_all(hold: Core, also: Vec<Core>) -> Fenced {
        Fenced {
            hold,
            also,
            ops: Vec::new(),
        }
    }

    /// Creates `path` with `data`, as `mode` (persistent, sequential, ephemeral on the
    /// holder's session, …), with the session's [`NodeAcl`](crate::NodeAcl). Fails the
    /// transaction if `path` exists or its parent does not.
    pub fn create(mut self, path: &str, data: &[u8], mode: CreateMode) -> Fenced {
        self.ops.push(Op::Create {
            path: path.into(),
            data: data.into(),
            mode,
            parents: false,
        });
        self
    }

    /// Creates `path` as [`create`](Self::create) does, and each missing parent with it,
    /// in the same transaction: persistent, empty, with the session's
    /// [`NodeAcl`](crate::NodeAcl). Fails the transaction if `path` exists.
    ///
    /// * **Fenced too.** The parents are created by the transaction itself, just before
    ///   the operation (outermost first; a parent that an earlier operation creates is left
    ///   to it): they are written only while the hold is intact, together with everything
    ///   else, or not at all. A stale holder's transaction leaves no parent behind.
    /// * **What it costs.** While the parents exist, nothing: the transaction is sent as
    ///   is. When one is missing, the servers refuse that first send (nothing is written),
    ///   the parents are looked up (the looks sent back to back: one round trip), and the
    ///   transaction is sent again with their creates. A parent that others make or remove
    ///   meanwhile (`NodeExists`, `NoNode` on it) is looked up again, and the transaction
    ///   sent again: three sends at most, then [`Error::FencedOpFailed`] with this
    ///   operation's index and the parent's path.
    /// * **Persistent parents, not containers**, as Curator's `creatingParentsIfNeeded`
    ///   makes them: state kept under a hold is meant to stay, and a container goes once
    ///   its last child does, to be missing for the next write. To make a path outside any
    ///   transaction, see [`Session::ensure_path`](crate::Session::ensure_path).
    ///
    /// The parents made are not among what [`commit`](Self::commit) returns: its
    /// [`Written::Created`] for this operation names `path` (with its sequence number).
    pub fn create_with_parents(mut self, path: &str, data: &[u8], mode: CreateMode) -> Fenced {
        self.ops.push(Op::Create {
            path: path.into(),
            data: data.into(),
            mode,
            parents: true,
        });
        self
    }

    /// Sets the data of `path`, if its data version is `version` (any with `None`).
    pub fn set_data(mut self, path: &str, data: &[u8], version: Option<i32>) -> Fenced {
        self.ops.push(Op::SetData {
            path: path.into(),
            data: data.into(),
            version,
        });
        self
    }

    /// Deletes `path`, if its data version is `version` (any with `None`); fails the
    /// transaction if it has children or does not exist.
    pub fn delete(mut self, path: &str, version: Option<i32>) -> Fenced {
        self.ops.push(Op::Delete {
            path: path.into(),
            version,
        });
        self
    }

    /// Checks that `path`'s data version is `version` (`-1`: that it exists).
    pub fn check(mut self, path: &str, version: i32) -> Fenced {
        self.ops.push(Op::Check {
            path: path.into(),
            version,
        });
        self
    }

    /// Checks that `node`, as a [`Cache`](crate::Cache) read it, is unchanged: that its
    /// data version is still the one read ([`check`](Self::check) with
    /// [`CachedNode::version`]). A decision made from the cache then commits only if what
    /// it read is still so, and only while the hold is intact. A node written since, or
    /// deleted, fails the transaction with [`Error::FencedOpFailed`] (`BadVersion`,
    /// `NoNode`) naming this operation: nothing is written.
    pub fn unchanged(self, node: &CachedNode) -> Fenced {
        self.check(node.path(), node.version())
    }

    /// Writes every operation added, in one request, only if the hold is intact: all of them,
    /// or none. Returns what each did, in the order added (the check of the holder's node
    /// is not among them). An empty transaction still checks the hold.
    ///
    /// # Notable errors
    /// * [`Error::Lost`] if the hold is over (its node is gone, its session expired or
    ///   was closed) or already reads as lost: nothing was written.
    /// * [`Error::FencedOpFailed`] if the servers refused an operation of the caller's
    ///   (index, path and reason), or the create of a parent of a
    ///   [`create_with_parents`](Self::create_with_parents) (its index, the parent's path):
    ///   nothing was written. Also (reason `BadVersion`) if others kept writing into the
    ///   holder's node while the transaction wrote into it, three times.
    /// * [`Error::InvalidPath`] or [`Error::InvalidArgument`] for a malformed path or a
    ///   transaction too large for the servers: nothing was sent (or, if only the creates
    ///   of missing parents make it too large, nothing was written).
    /// * [`Error::NoAuth`] if the servers refuse to let the session read the holder's node
    ///   (someone changed its ACL): nothing was written; the hold itself is not lost.
    /// * [`Error::Disconnected`] at once if the connection is down: nothing was sent.
    /// * [`Error::ConnectionLoss`] if the connection broke with the request in flight:
    ///   whether it was written is unknown.
    ///
    /// # Cancel safety
    /// Not cancel safe in effect: once sent, a dropped commit may or may not be written (all
    /// or nothing, and only while the hold was intact).
    pub async fn commit(self) -> Result<Vec<Written>> {
        let span = info_span!("zk.fenced.commit", node = %self.hold.node(), ops = self.ops.len());
        async {
            self.validate()?;
            let mut parents = Parents::default();
            let mut attempt = 1;
            loop {
                self.check_size(&parents)?;
                let committed = answer::unfold(&self.also, self.send(&parents).await?)?;
                let slots = parents.slots(&self.ops);
                let again = attempt < ATTEMPTS;
                attempt += 1;
                match &committed {
                    // The holder's node changed between its read and the write over it.
                    Err(MultiWriteError::OperationFailed {
                        index: 0,
                        source: Zk::BadVersion,
                    }) if again => continue,
                    Err(MultiWriteError::OperationFailed { index, source })
                        if again && Parents::moved(slots.get(*index), source) => {}
                    _ => {
                        let own_write = self.own_node_write();
                        return answer::outcome(&self.hold, own_write, committed, &slots);
                    }
                }
                // Looked up again even if none was missing before: others may have made
                // them meanwhile.
                parents = parents::missing(&*self.hold.connected()?, &self.ops)
                    .instrument(debug_span!("zk.fenced.parents"))
                    .await?;
                debug!(
                    ?parents,
                    "sending again with the creates of the parents missing"
                );
            }
        }
        .instrument(span)
        .await
    }

    /// Sends the multi once: the check of the holder's node, then the operations, each
    /// behind the creates of its missing `parents`. One that writes into the holder's node
    /// itself is sent behind a read of it, and checks the version read: a request to let go
    /// in it is latched before it is written over, never withdrawn unseen.
    async fn send(&self, parents: &Parents) -> Result<Answer> {
        let client = self.hold.connected()?;
        for also in &self.also {
            also.client()?;
        }
        let version = match self.own_node_write() {
            Some(_) => self.hold.read_own_node().await?,
            None => -1,
        };
        let acl = self.hold.acl();
        let parent = CreateMode::Persistent.with_acls(acl.acls());
        let mut writer = client.new_multi_writer();
        writer.add_check_version(self.hold.node(), version)?;
        for also in &self.also {
            writer.add_check_version(also.node(), -1)?;
        }
        for slot in parents.slots(&self.ops) {
            let added = match slot {
                Slot::Check => continue,
                Slot::Parent { op, path } => writer
                    .add_create(path, &[], &parent)
                    .map_err(|err| (op, path, err)),
                Slot::Op(index, op) => op
                    .add_to(&mut writer, acl)
                    .map_err(|err| (index, op.path(), err)),
            };
            added.map_err(|(index, path, err)| invalid(index, path, &err.to_string()))?;
        }
        Ok(writer.commit().await)
    }

    /// The index of the first operation that sets the data of the holder's own node.
    fn own_node_write(&self) -> Option<usize> {
        self.ops
            .iter()
            .position(|op| matches!(op, Op::SetData { path, .. } if **path == *self.hold.node()))
    }

    /// Checks every operation's path before anything is sent.
    fn validate(&self) -> Result<()> {
        for op in &self.ops {
            if let Err(Error::InvalidPath { reason, .. }) = path::validate_root(op.path()) {
                return Err(Error::InvalidPath {
                    path: op.path().to_owned(),
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Checks that the transaction, with the creates of `parents`, fits in a request.
    fn check_size(&self, parents: &Parents) -> Result<()> {
        let size = self
            .ops
            .iter()
            .fold(self.checks_size(), |size, op| {
                size.saturating_add(op.size())
            })
            .saturating_add(parents.size());
        if size > MAX_DATA {
            return Err(Error::InvalidArgument(format!(
                "a fenced transaction of {} operations takes about {size} bytes; a request \
                 carries at most {MAX_DATA}",
                self.ops.len()
            )));
        }
        Ok(())
    }

    /// The bytes the checks of the holders' nodes take in a request, at most.
    fn checks_size(&self) -> usize {
        std::iter::once(&self.hold)
            .chain(&self.also)
            .map(|hold| hold.node().len() + OP_OVERHEAD)
            .sum()
    }
}

/// The error for operation `index` (or a parent of it) on `path`, refused before sending.
fn invalid(index: usize, path: &str, why: &str) -> Error {
    Error::InvalidArgument(format!("fenced operation {index} on {path:?}: {why}"))
}
