//! [`Change`]: what changed of one node in a [`Cache`](super::Cache).

use crate::node::CachedNode;

/// A change of one node, as [`Cache::changes`](super::Cache::changes) reports it: from one
/// state the cache held to the next, in the order the servers made them, never one twice.
///
/// A node deleted and made again (another [`czxid`](CachedNode::czxid)) is a
/// [`Deleted`](Change::Deleted) then a [`Created`](Change::Created). States the cache never
/// read are not reported: two writes between two reads are one [`Updated`](Change::Updated),
/// a node made and deleted between two reads is nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The node appeared: made, or first seen (made while the cache was cut off).
    Created(CachedNode),
    /// The node's data was written (a later [`mzxid`](CachedNode::mzxid)): its new state.
    Updated(CachedNode),
    /// The node is gone: its last state the cache held.
    Deleted(CachedNode),
}

impl Change {
    /// The node the change is about: its new state, or its last for a deletion.
    pub fn node(&self) -> &CachedNode {
        match self {
            Change::Created(node) | Change::Updated(node) | Change::Deleted(node) => node,
        }
    }

    /// The node's full path.
    pub fn path(&self) -> &str {
        self.node().path()
    }
}
