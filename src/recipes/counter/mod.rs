//! A shared counter: [`SharedCounter`], one 32-bit integer in one node, shared with Apache
//! Curator's `SharedCount`.
//!
//! A counter shared through one node, in Curator's layout, written only over the version
//! read (compare and set), with a watchable value that says when it may be stale. The
//! semantics are stated in full on [`SharedCounter`], the public face of this module.

mod keeper;

use std::sync::Arc;

use tokio::sync::watch;
use tracing::{debug, debug_span, Instrument};
use zookeeper_client::{Client, CreateMode, Error as Zk, Stat};

use crate::acl::NodeAcl;
use crate::error::{outcome_unknown, Error, Result};
use crate::path;
use crate::session::{retry, Session};

pub use keeper::{CounterState, CounterValue};

/// How many times an operation finds the node missing, creates it, and finds it gone again
/// (someone keeps deleting it) before it fails with `NoNode`.
const MISSING: usize = 3;

/// A counter's value and the data version of the node it was read from (Curator's
/// `VersionedValue<Integer>`); [`SharedCounter::try_set`] writes only if the version is
/// still the node's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Versioned {
    /// The counter's value.
    pub value: i32,
    /// The node's data version when the value was read or written.
    pub version: i32,
}

/// A 32-bit counter in one ZooKeeper node, shared with Curator's `SharedCount`.
///
/// * **Curator's layout.** The counter is the data of one persistent node: a 4-byte
///   big-endian two's-complement integer, as Curator's `SharedCount` writes it, so a Java
///   service's `SharedCount` and a Rust service's [`SharedCounter`] on the same path share
///   one counter. The node is created with the counter's seed value when first used and
///   found missing (its missing parents as container nodes), as `SharedCount.start()`
///   creates it; it is never deleted by the counter.
/// * **Compare and set by version.** Every value is read with the node's data version
///   ([`Versioned`]); [`try_set`](Self::try_set) writes only if that version is
///   still the node's (Curator's `trySetCount(VersionedValue, newCount)`), and
///   [`add`](Self::add) reads, adds and writes that way, reading again after each
///   conflict, so concurrent increments by any number of Rust and Java services sum
///   exactly. [`set`](Self::set) writes whatever the version (Curator's
///   `setCount`).
/// * **A watchable value.** [`watch`](Self::watch) keeps the current value in a
///   `tokio::sync::watch::Receiver` by a data watch on the node, and says in the value's
///   [`CounterState`] when it may be stale: from the moment the connection is down until
///   the node was read again (after a reconnection, or on the new session after an expiry).
/// * **Not a counter.** A node whose data is not exactly 4 bytes is no counter: reads and
///   [`add`](Self::add) fail with [`Error::NotACounter`] (nothing is written), and a watch
///   says [`CounterState::NotACounter`]. Curator would read the first 4 bytes of longer
///   data; this crate refuses to guess. [`set`](Self::set) and [`try_set`](Self::try_set)
///   do not read the node: they write over whatever it holds (as Curator's `setCount` and
///   `trySetCount` do).
/// * **A node made again.** ZooKeeper's conditional writes compare the data version only,
///   and a node deleted and made again starts again at version 0: a
///   [`try_set`](Self::try_set) with a value read from the old node, at the version the
///   new node has reached, writes over the new node as if nothing had changed. Curator's
///   `trySetCount` does the same. [`add`](Self::add) reads just before it writes, so only
///   a node replaced between its read and its write goes unnoticed.
/// * **Overflow.** Curator's counter is a Java `int` and wraps; [`add`](Self::add)
///   refuses a sum that does not fit an `i32` ([`Error::InvalidArgument`], nothing
///   written) instead of wrapping.
///
/// A [`Semaphore`](crate::Semaphore) cannot take its maximum from a shared counter:
/// Curator's `InterProcessSemaphoreV2` can be driven by a `SharedCountReader`, this crate's
/// semaphore takes a fixed maximum only (and records it at its path, refusing participants
/// with another one: [`Error::MaxLeasesConflict`]).
///
/// Every operation is one or a few requests on the session's connection; none waits for a
/// connection that is down when called ([`Error::Disconnected`] at once). A read cut off
/// in flight is sent again once the connection is back (three times at most); a write is
/// never sent again (see [`try_set`](Self::try_set)). Cloning is cheap.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::SharedCounter;
///
/// let visits = SharedCounter::new(&session, "/counters/visits", 0)?;
/// let added = visits.add(1).await?; // exact under any number of concurrent adders
/// println!("{} visits", added.value);
/// let read = visits.get().await?;
/// if let Some(set) = visits.try_set(read, read.value * 2).await? {
///     println!("doubled to {} (version {})", set.value, set.version);
/// }
/// let mut values = visits.watch().await?;
/// values.changed().await.ok();
/// println!("now {:?}", values.borrow().last);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SharedCounter {
    session: Session,
    path: Arc<str>,
    /// The value the node is created with.
    seed: i32,
    acl: NodeAcl,
}

/// What a conditional write came to.
enum Written {
    Set(Versioned),
    /// The version was not the node's (or the node is gone): nothing was written.
    Conflict,
}

impl SharedCounter {
    /// The counter at `path`, created with `seed` when first used and found missing
    /// (Curator's `SharedCount(client, path, seedValue)`), with the session's
    /// [`NodeAcl`]. No request is sent.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed or too long.
    pub fn new(session: &Session, path: &str, seed: i32) -> Result<SharedCounter> {
        Ok(SharedCounter {
            session: session.clone(),
            path: Arc::from(path::validate_root(path)?),
            seed,
            acl: session.node_acl(),
        })
    }

    /// The ACL of the node (and of the parents it makes), instead of the session's
    /// [`node_acl`](crate::SessionBuilder::node_acl).
    pub fn node_acl(self, acl: NodeAcl) -> SharedCounter {
        SharedCounter { acl, ..self }
    }

    /// The counter's node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The counter's value now, with the node's version: one read (and a create with the
    /// seed, if the node is missing).
    ///
    /// # Notable errors
    /// * [`Error::NotACounter`] if the node's data is not 4 bytes.
    /// * [`Error::Disconnected`] (or [`Error::Renewing`], [`Error::Closed`]) at once if
    ///   there is no connection now; [`Error::ConnectionLoss`] if it broke three times with
    ///   the read in flight.
    /// * [`Error::NoAuth`] if the node's ACL (or, to create it, its parent's) denies it.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call may have created the node with the seed, nothing else.
    pub async fn get(&self) -> Result<Versioned> {
        let client = self.session.connected()?;
        self.read(&client)
            .instrument(debug_span!("zk.counter.get", path = %self.path))
            .await
    }

    /// Sets the counter to `value` if the node's version is still `read.version` (Curator's
    /// `trySetCount(VersionedValue, newCount)`; `read.value` is not compared): the value
    /// written, with its new version, or `None` if the version moved (or the node is gone)
    /// and nothing was written. One request.
    ///
    /// # Notable errors
    /// * [`Error::ConnectionLoss`] if the connection broke with the write in flight:
    ///   whether it was written is unknown (it is not sent again: a second send could not
    ///   tell its own write from another's).
    /// * [`Error::Disconnected`] (or [`Error::Renewing`], [`Error::Closed`]) at once if
    ///   there is no connection now.
    /// * [`Error::NoAuth`] if the node's ACL denies writing.
    ///
    /// # Cancel safety
    /// Not cancel safe in effect: once sent, a dropped call may or may not have written.
    pub async fn try_set(&self, read: Versioned, value: i32) -> Result<Option<Versioned>> {
        let client = self.session.connected()?;
        let written = self
            .write_if(&client, read.version, value)
            .instrument(debug_span!("zk.counter.try_set", path = %self.path, value))
            .await?;
        Ok(match written {
            Written::Set(set) => Some(set),
            Written::Conflict => None,
        })
    }

    /// Sets the counter to `value`, whatever it was (Curator's `setCount`); creates the node
    /// with `value` if it is missing. Returns the value with its new version.
    ///
    /// # Notable errors
    /// As [`try_set`](Self::try_set), and [`Error::ZooKeeper`] with `NoNode` if the node was
    /// deleted each time it was made, three times.
    ///
    /// # Cancel safety
    /// Not cancel safe in effect: once sent, a dropped call may or may not have written.
    pub async fn set(&self, value: i32) -> Result<Versioned> {
        let client = self.session.connected()?;
        async {
            for _ in 0..MISSING {
                let sent = client
                    .set_data(&self.path, &value.to_be_bytes(), None)
                    .await;
                match sent {
                    Ok(stat) => return Ok(versioned(value, &stat)),
                    Err(Zk::NoNode) => {
                        if let Some(made) = self.create(&client, value).await? {
                            return Ok(made);
                        }
                    }
                    Err(err) => return Err(self.failed(err)),
                }
            }
            Err(Error::at(&self.path, Zk::NoNode))
        }
        .instrument(debug_span!("zk.counter.set", path = %self.path, value))
        .await
    }

    /// Adds `delta` to the counter (a negative one subtracts) and returns the value it
    /// wrote, with its version: reads the counter, writes the sum if the version read is
    /// still the node's, and on a conflict reads and tries again, until its write goes in.
    ///
    /// Each conflict means another writer's write went in meanwhile, so the adders as a
    /// whole always progress; one adder among many busy ones may try many times. Bound it
    /// with [`tokio::time::timeout`], or write your own loop with [`get`](Self::get) and
    /// [`try_set`](Self::try_set). Two requests per try.
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if the sum does not fit an `i32`: nothing is written.
    /// * [`Error::NotACounter`] if the node's data is not 4 bytes: nothing is written.
    /// * As [`get`](Self::get) and [`try_set`](Self::try_set): [`Error::ConnectionLoss`]
    ///   if the connection broke with a write in flight (whether it was added is unknown).
    ///
    /// # Cancel safety
    /// Not cancel safe in effect: a dropped call may have added once (never more).
    pub async fn add(&self, delta: i32) -> Result<Versioned> {
        let client = self.session.connected()?;
        async {
            let mut read = self.read(&client).await?;
            loop {
                let value = read.value.checked_add(delta).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{} + {delta} does not fit the 32-bit counter {}",
                        read.value, self.path
                    ))
                })?;
                match self.write_if(&client, read.version, value).await? {
                    Written::Set(set) => return Ok(set),
                    Written::Conflict => {
                        debug!(version = read.version, "the counter moved; again");
                        read = self.read(&client).await?;
                    }
                }
            }
        }
        .instrument(debug_span!("zk.counter.add", path = %self.path, delta))
        .await
    }

    /// The counter's value as it changes, kept by a data watch on the node in a task of
    /// its own; see [`CounterValue`]. Reads the node (creating it with the seed if it is
    /// missing) before it returns, so the first value is current. The task ends, and its
    /// watch with it, once every receiver is dropped or the session is closed.
    ///
    /// # Notable errors
    /// As [`get`](Self::get), but for [`Error::NotACounter`]: a node that holds no counter
    /// is watched all the same, and its value says so ([`CounterState::NotACounter`]).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call may have created the node with the seed, nothing else.
    pub async fn watch(&self) -> Result<watch::Receiver<CounterValue>> {
        keeper::start(self.clone()).await
    }

    /// Reads the counter, creating the node with the seed if it is missing.
    async fn read(&self, client: &Client) -> Result<Versioned> {
        for _ in 0..MISSING {
            match retry(client, || client.get_data(&self.path)).await {
                Ok((data, stat)) => return Ok(versioned(self.decode(&data)?, &stat)),
                Err(Error::ZooKeeper(Zk::NoNode)) => {
                    if let Some(made) = self.create(client, self.seed).await? {
                        return Ok(made);
                    }
                }
                Err(err) => return Err(err.at_root(&self.path)),
            }
        }
        Err(Error::at(&self.path, Zk::NoNode))
    }

    /// Creates the node with `value` (and its missing parents, as containers); `None` if
    /// someone else made it first.
    async fn create(&self, client: &Client, value: i32) -> Result<Option<Versioned>> {
        let options = CreateMode::Persistent.with_acls(self.acl.acls());
        let data = value.to_be_bytes();
        for _ in 0..MISSING {
            match retry(client, || client.create(&self.path, &data, &options)).await {
                Ok((stat, _)) => {
                    debug!(path = %self.path, value, "created the counter");
                    return Ok(Some(versioned(value, &stat)));
                }
                Err(Error::ZooKeeper(Zk::NodeExists)) => return Ok(None),
                Err(Error::ZooKeeper(Zk::NoNode)) => self.make_parents(client).await?,
                Err(err) => return Err(err.at_root(&self.path)),
            }
        }
        Err(Error::at(&self.path, Zk::NoNode))
    }

    /// Makes the node's missing parents, as container nodes (as Curator does).
    async fn make_parents(&self, client: &Client) -> Result<()> {
        let Some((parent, _)) = self.path.rsplit_once('/').filter(|(p, _)| !p.is_empty()) else {
            return Ok(());
        };
        let options = CreateMode::Container.with_acls(self.acl.acls());
        retry(client, || client.mkdir(parent, &options))
            .await
            .map_err(|err| err.at_root(parent))
    }

    /// Writes `value` if the node's version is `version`; never sent twice.
    async fn write_if(&self, client: &Client, version: i32, value: i32) -> Result<Written> {
        let sent = client.set_data(&self.path, &value.to_be_bytes(), Some(version));
        match sent.await {
            Ok(stat) => Ok(Written::Set(versioned(value, &stat))),
            Err(Zk::BadVersion | Zk::NoNode) => Ok(Written::Conflict),
            Err(err) => Err(self.failed(err)),
        }
    }

    /// The error for a write the servers refused or whose outcome is unknown.
    fn failed(&self, err: Zk) -> Error {
        match outcome_unknown(&err) {
            true => Error::ConnectionLoss,
            false => Error::at(&self.path, err),
        }
    }

    /// The counter in the node's `data`.
    fn decode(&self, data: &[u8]) -> Result<i32> {
        decode(&self.path, data)
    }
}

/// The counter in `data` of the node `path`: exactly 4 bytes, big-endian.
///
/// # Notable errors
/// * [`Error::NotACounter`] for data of any other length.
fn decode(path: &str, data: &[u8]) -> Result<i32> {
    <[u8; 4]>::try_from(data)
        .map(i32::from_be_bytes)
        .map_err(|_| Error::NotACounter {
            path: path.to_owned(),
            len: data.len(),
        })
}

fn versioned(value: i32, stat: &Stat) -> Versioned {
    Versioned {
        value,
        version: stat.version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bytes_big_endian_or_not_a_counter() {
        assert_eq!(decode("/c", &[0, 0, 1, 2]).ok(), Some(258));
        assert_eq!(decode("/c", &(-7i32).to_be_bytes()).ok(), Some(-7));
        for data in [&b""[..], &b"abc"[..], &b"12345"[..]] {
            match decode("/c", data) {
                Err(Error::NotACounter { path, len }) => {
                    assert_eq!((path.as_str(), len), ("/c", data.len()))
                }
                other => panic!("{data:?} read as {other:?}"),
            }
        }
    }
}
