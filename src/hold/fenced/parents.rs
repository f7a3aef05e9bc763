//! The missing parents of a [`Fenced`](super::Fenced) transaction's creates with parents
//! ([`create_with_parents`](super::Fenced::create_with_parents)): looked up on the servers,
//! then created inside the transaction itself, each just before the first operation that
//! needs it, so that they are written only as the rest is: while the hold is intact.

use zookeeper_client::{Client, Error as Zk};

use super::op::{Op, OP_OVERHEAD};
use crate::error::{Error, Result};
use crate::path;

/// What one operation of the multi sent is, in order.
#[derive(Clone, Copy, Debug)]
pub(super) enum Slot<'a> {
    /// The check of the holder's node, always first.
    Check,
    /// A missing parent of operation `op`, created just before it.
    Parent { op: usize, path: &'a str },
    /// The caller's operation `index`.
    Op(usize, &'a Op),
}

/// The parents a transaction creates: each with the index of the first operation that
/// needs it, in the order they are created (by operation, outermost first).
#[derive(Debug, Default)]
pub(super) struct Parents(Vec<(usize, String)>);

impl Parents {
    /// The multi's operations for `ops`, each missing parent just before its operation.
    pub(super) fn slots<'a>(&'a self, ops: &'a [Op]) -> Vec<Slot<'a>> {
        let mut slots = Vec::with_capacity(1 + self.0.len() + ops.len());
        slots.push(Slot::Check);
        let mut parents = self.0.iter().peekable();
        for (index, op) in ops.iter().enumerate() {
            while let Some((_, path)) = parents.next_if(|(first, _)| *first == index) {
                slots.push(Slot::Parent { op: index, path });
            }
            slots.push(Slot::Op(index, op));
        }
        slots
    }

    /// The bytes their creates take in a request, at most.
    pub(super) fn size(&self) -> usize {
        self.0
            .iter()
            .map(|(_, path)| path.len() + OP_OVERHEAD)
            .sum()
    }

    /// Whether a multi that failed at `slot` with `reason` failed for want of a parent, or
    /// because a parent looked up moved meanwhile (made, or removed, by others): the
    /// parents are looked up again, and it is sent again. Nothing of it was written.
    pub(super) fn moved(slot: Option<&Slot<'_>>, reason: &Zk) -> bool {
        match (slot, reason) {
            (Some(Slot::Op(_, Op::Create { parents, .. })), Zk::NoNode) => *parents,
            (Some(Slot::Parent { .. }), Zk::NodeExists | Zk::NoNode) => true,
            _ => false,
        }
    }
}

/// The parents missing now for the creates with parents among `ops`: every ancestor of
/// their paths that does not exist, but those an earlier operation of the transaction
/// creates. The looks are sent back to back (an exists request needs no permission).
///
/// # Notable errors
/// As `exists`: [`Error::ConnectionLoss`] if the connection broke meanwhile.
pub(super) async fn missing(client: &Client, ops: &[Op]) -> Result<Parents> {
    let mut wanted: Vec<(usize, &str)> = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        let Op::Create {
            path,
            parents: true,
            ..
        } = op
        else {
            continue;
        };
        for ancestor in path::ancestors(path) {
            let created_before = ops[..index].iter().any(|op| op.creates(ancestor));
            let wanted_before = wanted.iter().any(|(_, path)| *path == ancestor);
            if !created_before && !wanted_before {
                wanted.push((index, ancestor));
            }
        }
    }
    let sent: Vec<_> = wanted
        .iter()
        .map(|(_, path)| client.check_stat(path))
        .collect();
    let mut missing = Vec::new();
    for ((index, path), looked) in wanted.into_iter().zip(sent) {
        if looked.await.map_err(|err| Error::at(path, err))?.is_none() {
            missing.push((index, path.to_owned()));
        }
    }
    Ok(Parents(missing))
}
