//! A lock per key under one root: [`KeyedMutex`].
//!
//! `KeyedMutex::new(&session, "/locks/jobs")` hands out the [`Mutex`] of each key, at
//! `/locks/jobs/<key>`: a lock per job, order or tenant, taken by many tasks at once.
//! Every key's lock is exactly a [`Mutex`] on that path (the same nodes, the same
//! guarantees, shared with Curator's `InterProcessMutex` on the same path); holders of
//! different keys never wait for each other, and nothing is kept per key in the process
//! (the value is as small as a [`Mutex`], whatever the number of keys). Its contenders
//! carry the id [`KeyedMutex::id`] sets (default `<host name>/<process id>`), shown by each
//! key's [`Mutex::contenders`] and by `zk-recipes status --kind keyed ROOT`.
//!
//! Several keys at once, all or nothing: [`KeyedMutex::lock_all`] (and
//! [`try_lock_all`](KeyedMutex::try_lock_all), [`try_lock_all_for`](KeyedMutex::try_lock_all_for))
//! take the keys' locks in the order of their paths, so that two callers that want
//! overlapping sets never deadlock, and hand out one [`MultiGuard`]; see
//! [`MultiLock`](crate::MultiLock).

use std::sync::Arc;
use std::time::Duration;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::path;
use crate::recipes::contenders::validate_id;
use crate::recipes::lock::{Mutex, MutexGuard};
use crate::recipes::multi::{MultiGuard, MultiLock};
use crate::session::Session;

/// A distributed mutex per key under one root: the lock of key `k` is the [`Mutex`] on
/// `<root>/<k>`.
///
/// A key is one path component: not empty, no `/`, not `.` or `..`, no character
/// ZooKeeper rejects. A key's path (and the root, and its missing parents) is created as
/// container nodes when first locked; ZooKeeper deletes an empty container some time after
/// its last contender left, so an idle key leaves nothing behind.
///
/// Cloning is cheap; a new `KeyedMutex` or [`Mutex`] per acquisition costs no request.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::KeyedMutex;
///
/// let jobs = KeyedMutex::new(&session, "/locks/jobs")?;
/// let guard = jobs.lock("job-42").await?; // the Mutex on /locks/jobs/job-42
/// // ... work on job 42, passing guard.fencing_token() to the resource ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct KeyedMutex {
    session: Session,
    root: Arc<str>,
    acl: NodeAcl,
    /// The id its contenders carry, if set ([`id`](Self::id)); checked.
    id: Option<Arc<str>>,
}

impl KeyedMutex {
    /// The locks under `root`, whose nodes get the session's [`NodeAcl`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `root` is malformed or too long; nothing is sent to
    ///   ZooKeeper.
    pub fn new(session: &Session, root: &str) -> Result<KeyedMutex> {
        Ok(KeyedMutex {
            session: session.clone(),
            root: Arc::from(path::validate_root(root)?),
            acl: session.node_acl(),
            id: None,
        })
    }

    /// The id every key's contenders carry (their nodes' data), instead of
    /// `<host name>/<process id>`; shown by each key's [`Mutex::contenders`]. See
    /// [`Mutex::id`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if `id` is empty, holds a NUL, is `__REVOKE__`, or is
    ///   larger than a node holds (960 KiB here). Nothing is sent.
    pub fn id(self, id: &str) -> Result<KeyedMutex> {
        validate_id(id)?;
        Ok(KeyedMutex {
            id: Some(Arc::from(id)),
            ..self
        })
    }

    /// The ACL of the nodes its locks create, instead of the session's
    /// [`node_acl`](crate::SessionBuilder::node_acl); see [`Mutex::node_acl`].
    pub fn node_acl(self, acl: NodeAcl) -> KeyedMutex {
        KeyedMutex { acl, ..self }
    }

    /// The root the keys' locks are under.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The [`Mutex`] of `key`, on `<root>/<key>`; no request is sent.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `key` is not one valid path component, or the path is
    ///   too long.
    pub fn mutex(&self, key: &str) -> Result<Mutex> {
        let path = key_path(&self.root, key)?;
        let mutex = Mutex::new(&self.session, &path)?.node_acl(self.acl);
        match &self.id {
            Some(id) => mutex.id(id),
            None => Ok(mutex),
        }
    }

    /// The locks of `keys` taken together, all or nothing, in the order of their paths
    /// (a key given twice is locked once); see [`MultiLock`]. No request is sent.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if a key is not valid (see [`mutex`](Self::mutex)).
    /// * [`Error::InvalidArgument`] if `keys` is empty.
    pub fn multi(&self, keys: impl IntoIterator<Item = impl AsRef<str>>) -> Result<MultiLock> {
        let mutexes = keys
            .into_iter()
            .map(|key| self.mutex(key.as_ref()))
            .collect::<Result<Vec<Mutex>>>()?;
        MultiLock::new(mutexes)
    }

    /// Waits as long as it takes to hold the locks of every one of `keys`, taken in the
    /// order of their paths; see [`MultiLock::lock`]. A key given twice is locked once;
    /// [`MultiGuard::guard`] with `<root>/<key>` finds one key's guard.
    ///
    /// ```no_run
    /// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let accounts = zk_recipes::KeyedMutex::new(&session, "/locks/accounts")?;
    /// let both = accounts.lock_all(&["bob", "alice"]).await?; // alice's lock first
    /// // ... move money, committing with both.fenced() ...
    /// both.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] or [`Error::InvalidArgument`] at once, as
    ///   [`multi`](Self::multi); nothing is sent.
    /// * As [`MultiLock::lock`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`MultiLock::lock`]: every lock taken is given back.
    pub async fn lock_all(&self, keys: &[&str]) -> Result<MultiGuard> {
        self.multi(keys)?.lock().await
    }

    /// Takes the locks of every one of `keys` if no other contender is ahead on any of
    /// them; never waits; see [`MultiLock::try_lock`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] or [`Error::InvalidArgument`] at once, as
    ///   [`multi`](Self::multi); nothing is sent.
    /// * As [`MultiLock::try_lock`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`MultiLock::lock`].
    pub async fn try_lock_all(&self, keys: &[&str]) -> Result<Option<MultiGuard>> {
        self.multi(keys)?.try_lock().await
    }

    /// Waits at most `timeout`, in all, to hold the locks of every one of `keys`; `None`,
    /// with every lock taken given back, if it did not; see [`MultiLock::try_lock_for`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] or [`Error::InvalidArgument`] at once, as
    ///   [`multi`](Self::multi); nothing is sent.
    /// * As [`MultiLock::lock`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`MultiLock::lock`].
    pub async fn try_lock_all_for(
        &self,
        keys: &[&str],
        timeout: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.multi(keys)?.try_lock_for(timeout).await
    }

    /// Waits as long as it takes to hold the lock of `key`; see [`Mutex::lock`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] at once if `key` is not valid (see [`mutex`](Self::mutex));
    ///   nothing is sent.
    /// * As [`Mutex::lock`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Mutex::lock`].
    pub async fn lock(&self, key: &str) -> Result<MutexGuard> {
        self.mutex(key)?.lock().await
    }

    /// Takes the lock of `key` if no other contender is ahead; never waits; see
    /// [`Mutex::try_lock`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] at once if `key` is not valid; nothing is sent.
    /// * As [`Mutex::try_lock`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Mutex::lock`].
    pub async fn try_lock(&self, key: &str) -> Result<Option<MutexGuard>> {
        self.mutex(key)?.try_lock().await
    }

    /// Waits at most `timeout` to hold the lock of `key`; see [`Mutex::try_lock_for`].
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] at once if `key` is not valid; nothing is sent.
    /// * As [`Mutex::try_lock_for`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Mutex::lock`].
    pub async fn try_lock_for(&self, key: &str, timeout: Duration) -> Result<Option<MutexGuard>> {
        self.mutex(key)?.try_lock_for(timeout).await
    }
}

/// `<root>/<key>`, if `key` is one valid component.
fn key_path(root: &str, key: &str) -> Result<String> {
    if key.is_empty() {
        return Err(Error::InvalidPath {
            path: path::join(root, key),
            reason: "the key is empty",
        });
    }
    path::child(root, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(key: &str) -> &'static str {
        match key_path("/locks/jobs", key) {
            Err(Error::InvalidPath { reason, .. }) => reason,
            other => panic!("{key:?} was accepted: {other:?}"),
        }
    }

    #[test]
    fn a_key_is_one_valid_component() {
        assert_eq!(
            key_path("/locks/jobs", "k42").ok().as_deref(),
            Some("/locks/jobs/k42")
        );
        assert_eq!(reason(""), "the key is empty");
        assert!(reason("a/b").contains("one path component"));
        assert!(reason("..").contains("relative"));
        assert!(reason(".").contains("relative"));
        assert!(reason("nul\0").contains("NUL"));
        assert!(reason(&"k".repeat(path::MAX_LEN)).contains("longer"));
    }
}
