//! [`Snapshots`]: a [`Cache`](super::Cache)'s snapshots, received as from a watch channel.

use tokio::sync::watch;

use super::snapshot::Snapshot;
use super::state::CacheState;
use super::Cache;
use crate::error::{Error, Result};

/// The snapshots of a [`Cache`], as a [`watch::Receiver`] gives values: it tells when the
/// nodes held changed since it last looked, and lends the latest [`Snapshot`]. Snapshots in
/// between are never made: a receiver that looks seldom costs nothing meanwhile.
///
/// Made by [`Cache::snapshots`]; it keeps the cache following the servers while it lives.
#[derive(Clone, Debug)]
pub struct Snapshots {
    cache: Cache,
    generation: watch::Receiver<u64>,
}

impl Snapshots {
    pub(super) fn new(cache: Cache, generation: watch::Receiver<u64>) -> Snapshots {
        Snapshots { cache, generation }
    }

    /// Waits until the nodes held changed since this receiver last looked
    /// ([`borrow_and_update`](Self::borrow_and_update)); at once if they did.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] once the cache stopped for good (its session was closed) and
    ///   nothing changed since this receiver last looked.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn changed(&mut self) -> Result<()> {
        let mut states = self.cache.states();
        tokio::select! {
            biased;
            changed = self.generation.changed() => changed.map_err(|_| Error::Closed),
            _ = states.wait_for(|state| matches!(state, CacheState::Closed { .. })) => {
                Err(Error::Closed)
            }
        }
    }

    /// Whether the nodes held changed since this receiver last looked.
    pub fn has_changed(&self) -> bool {
        self.generation.has_changed().unwrap_or(false)
    }

    /// The latest snapshot, marked seen.
    pub fn borrow_and_update(&mut self) -> Snapshot {
        self.generation.borrow_and_update();
        self.cache.snapshot()
    }
}
