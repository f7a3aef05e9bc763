//! The servers' answer to a fenced multi, read back: [`Written`], what each of the
//! caller's operations did, or the loss or the failed operation that a refusal means.

use zookeeper_client::Error as Zk;
use zookeeper_client::{MultiWriteError, MultiWriteResult};

use super::parents::Slot;
use crate::error::{Error, Result};
use crate::hold::Core;

/// The servers' answer to a multi: what each operation did, or the first that failed.
pub(super) type Answer = std::result::Result<Vec<MultiWriteResult>, MultiWriteError>;

/// What one operation of a committed [`Fenced`](super::Fenced) transaction did, in the
/// order added.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Written {
    /// A node was created, at this path (with its sequence number, if sequential).
    Created {
        /// Full path of the created node.
        path: String,
    },
    /// A node's data was set; its new data version.
    DataSet {
        /// The node's data version after the write.
        version: i32,
    },
    /// A node was deleted.
    Deleted,
    /// A node's version was as expected.
    Checked,
}

impl From<MultiWriteResult> for Written {
    fn from(result: MultiWriteResult) -> Written {
        match result {
            MultiWriteResult::Create { path, .. } => Written::Created { path },
            MultiWriteResult::SetData { stat } => Written::DataSet {
                version: stat.version,
            },
            MultiWriteResult::Delete => Written::Deleted,
            _ => Written::Checked,
        }
    }
}

/// The answer to a multi as if it had checked the first holder's node only: the checks
/// of the other holders' nodes (`also`'s) taken out (a failed one is that hold's loss),
/// the index of a failed operation counted without them.
///
/// # Notable errors
/// * [`Error::Lost`] naming the node of a hold whose check failed for want of its node.
pub(super) fn unfold(also: &[Core], committed: Answer) -> Result<Answer> {
    let others = also.len();
    Ok(match committed {
        Ok(mut results) if others > 0 => {
            results.drain(1..=others.min(results.len().saturating_sub(1)));
            Ok(results)
        }
        Err(MultiWriteError::OperationFailed { index, source })
            if (1..=others).contains(&index) =>
        {
            let also = &also[index - 1];
            return Err(match source {
                Zk::NoNode => also.lost_error(),
                source => Error::at(also.node(), source),
            });
        }
        Err(MultiWriteError::OperationFailed { index, source }) if index > others => {
            Err(MultiWriteError::OperationFailed {
                index: index - others,
                source,
            })
        }
        other => other,
    })
}

/// What the servers' answer means: the loss of `hold` if the check of its node failed
/// (or the session is gone), the caller's failed operation (`own_write`: the index of the
/// first that sets the data of the holder's own node, if any), or what each did.
pub(super) fn outcome(
    hold: &Core,
    own_write: Option<usize>,
    committed: Answer,
    slots: &[Slot<'_>],
) -> Result<Vec<Written>> {
    match committed {
        Ok(results) => Ok(results
            .into_iter()
            .zip(slots)
            .filter(|(_, slot)| matches!(slot, Slot::Op(..)))
            .map(|(result, _)| Written::from(result))
            .collect()),
        // The holder's node is gone. Any other refusal of the check (an ACL that no
        // longer lets us read it) is no proof that the hold is over.
        Err(MultiWriteError::OperationFailed {
            index: 0,
            source: Zk::NoNode,
        }) => Err(hold.lost_error()),
        // The version read of the holder's node moved: the write into it failed.
        Err(MultiWriteError::OperationFailed {
            index: 0,
            source: Zk::BadVersion,
        }) => Err(Error::FencedOpFailed {
            index: own_write.unwrap_or_default(),
            path: hold.node().to_string(),
            reason: Zk::BadVersion,
        }),
        Err(MultiWriteError::OperationFailed { index: 0, source }) => {
            Err(Error::at(hold.node(), source))
        }
        Err(MultiWriteError::OperationFailed { index, source }) => {
            let (index, path) = match slots.get(index) {
                Some(Slot::Parent { op, path }) => (*op, *path),
                Some(Slot::Op(index, op)) => (*index, op.path()),
                Some(Slot::Check) | None => (index - 1, ""),
            };
            Err(Error::FencedOpFailed {
                index,
                path: path.to_owned(),
                reason: source,
            })
        }
        Err(MultiWriteError::RequestFailed {
            source: Zk::SessionExpired | Zk::ClientClosed,
        }) => Err(hold.lost_error()),
        Err(MultiWriteError::RequestFailed { source }) => Err(Error::at(hold.node(), source)),
    }
}
