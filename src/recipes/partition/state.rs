//! [`WorkerState`]: what a worker knows, as its dealer publishes it.

use std::collections::{BTreeMap, BTreeSet};

/// What a [`Worker`](crate::Worker) knows now: the members it counts, what the assignment
/// gives it, and what it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerState {
    /// The live members with this partitioner's record, by id, sorted, as this member's view
    /// of the group shows them (it trails the servers).
    pub members: Vec<String>,
    /// The partitions the assignment gives this member, by that view.
    pub assigned: BTreeSet<String>,
    /// The partitions this member holds (handed out by
    /// [`next_partition`](crate::Worker::next_partition), or about to be, and not yet
    /// released), with their fencing tokens.
    pub owned: BTreeMap<String, u64>,
}
