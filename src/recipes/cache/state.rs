//! [`CacheState`]: whether a [`Cache`](super::Cache) is known to match the servers.

use std::time::Instant;

/// Whether a [`Cache`](super::Cache) matches the servers, as
/// [`Cache::state`](super::Cache::state) and [`Cache::states`](super::Cache::states) tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheState {
    /// Connected, its watch set, and resynchronised since the connection was last made: the
    /// cache holds what the servers held when it last read, and trails them only by the
    /// notifications on their way (ZooKeeper reads are sequentially consistent, not
    /// linearizable).
    Synced,
    /// The cache may be stale: the connection is down, the session expired, or the cache is
    /// reading the servers again after one of those. Reads still answer, from what it held
    /// `since` then (the last moment it was known to match the servers); changes made
    /// meanwhile are reported once it is synced again.
    Stale {
        /// When the cache learned it may be stale: the last moment it was known in sync.
        since: Instant,
    },
    /// The cache stopped following the servers for good: its session was closed (or its
    /// runtime shut down). What it holds stays readable, as it was `since` then.
    Closed {
        /// The last moment it was known to match the servers.
        since: Instant,
    },
}

impl CacheState {
    /// Whether the cache matches the servers now (within one notification's delay).
    pub fn is_synced(&self) -> bool {
        matches!(self, CacheState::Synced)
    }
}
