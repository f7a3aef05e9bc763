//! One operation of a [`Fenced`](super::Fenced) transaction, as the caller added it: the
//! path it names, whether it creates a given node, the room it takes in a request, and how
//! it joins the multi.

use zookeeper_client::{CreateMode, MultiWriter};

use crate::acl::NodeAcl;

/// The bytes a multi spends on one operation besides its path and data, at most: its
/// header (type, done flag, error: 9 bytes), the lengths of path and data (8), a version or
/// create flags (4) and a create's ACL list (at most two entries of ours: under 64). The
/// request's own header fits in what [`MAX_DATA`](crate::queue::MAX_DATA) leaves below
/// the servers' limit.
pub(super) const OP_OVERHEAD: usize = 96;

/// One operation of a [`Fenced`](super::Fenced) transaction.
#[derive(Debug)]
pub(super) enum Op {
    Create {
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
        /// Whether its missing parents are created with it.
        parents: bool,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: Option<i32>,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    Check {
        path: String,
        version: i32,
    },
}
impl Op {
    /// Whether it creates the node `path` itself (not a sequential node named after it).
    pub(super) fn creates(&self, path: &str) -> bool {
        let sequential = |mode: &CreateMode| {
            matches!(
                mode,
                CreateMode::PersistentSequential | CreateMode::EphemeralSequential
            )
        };
        matches!(self, Op::Create { path: made, mode, .. } if made == path && !sequential(mode))
    }

    pub(super) fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::SetData { path, .. }
            | Op::Delete { path, .. }
            | Op::Check { path, .. } => path,
        }
    }

    /// The bytes it takes in a request, at most.
    pub(super) fn size(&self) -> usize {
        let data = match self {
            Op::Create { data, .. } | Op::SetData { data, .. } => data.len(),
            Op::Delete { .. } | Op::Check { .. } => 0,
        };
        self.path().len() + data + OP_OVERHEAD
    }

    pub(super) fn add_to(
        &self,
        writer: &mut MultiWriter<'_>,
        acl: NodeAcl,
    ) -> std::result::Result<(), zookeeper_client::Error> {
        match self {
            Op::Create {
                path, data, mode, ..
            } => writer.add_create(path, data, &mode.with_acls(acl.acls())),
            Op::SetData {
                path,
                data,
                version,
            } => writer.add_set_data(path, data, *version),
            Op::Delete { path, version } => writer.add_delete(path, *version),
            Op::Check { path, version } => writer.add_check_version(path, *version),
        }
    }
}
