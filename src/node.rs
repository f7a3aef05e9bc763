//! [`CachedNode`]: a node as a [`Cache`](crate::Cache) read it (its path, data and stat).
//!
//! It lives below the recipes and the hold core because both speak of it: a cache holds
//! them, and a fenced transaction checks that one is unchanged
//! ([`Fenced::unchanged`](crate::Fenced::unchanged)).

use std::fmt;
use std::sync::Arc;

use zookeeper_client::Stat;

/// A node as read from the servers: its path, its data and its stat, at one version.
///
/// Cheap to clone (one reference count), and immutable: a newer read is another
/// `CachedNode`. What a decision was made from can therefore be kept and checked later:
/// [`Fenced::unchanged`](crate::Fenced::unchanged) commits a fenced transaction only if the
/// node's data version is still [`version`](Self::version); without a hold, add the same
/// check to a multi of your own (`add_check_version(node.path(), node.version())`).
///
/// A check of the data version cannot tell a node from one deleted and made again with as
/// many writes: compare [`czxid`](Self::czxid) in what the cache shows next if that matters.
#[derive(Clone)]
pub struct CachedNode {
    inner: Arc<Inner>,
}

struct Inner {
    path: Arc<str>,
    /// `None`: the session may not read the data (the node's ACL).
    data: Option<Box<[u8]>>,
    stat: Stat,
}

impl CachedNode {
    /// A node read at `path`, with its data (`None` if the session may not read it).
    pub(crate) fn new(path: Arc<str>, data: Option<Vec<u8>>, stat: Stat) -> CachedNode {
        CachedNode {
            inner: Arc::new(Inner {
                path,
                data: data.map(Vec::into_boxed_slice),
                stat,
            }),
        }
    }

    /// The node's full path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The path, shared.
    pub(crate) fn shared_path(&self) -> &Arc<str> {
        &self.inner.path
    }

    /// The node's data; `None` if the session may not read it (its ACL), though it may see
    /// that the node exists.
    pub fn data(&self) -> Option<&[u8]> {
        self.inner.data.as_deref()
    }

    /// The node's stat as read with its data. Its children's counts (`num_children`,
    /// `cversion`, `pzxid`) are as of that read, which a child made or deleted later does
    /// not repeat: ask the cache for the children themselves.
    pub fn stat(&self) -> &Stat {
        &self.inner.stat
    }

    /// The data version (the number of writes to the node's data since it was made): what
    /// a conditional write checks.
    pub fn version(&self) -> i32 {
        self.inner.stat.version
    }

    /// The zxid of the write that last changed the data (or made the node).
    pub fn mzxid(&self) -> i64 {
        self.inner.stat.mzxid
    }

    /// The zxid of the write that made the node: it tells a node from another made at the
    /// same path later.
    pub fn czxid(&self) -> i64 {
        self.inner.stat.czxid
    }

    /// Whether `other` is this very state of the node (same node, same write), by stat.
    pub(crate) fn same_write(&self, other: &Stat) -> bool {
        self.czxid() == other.czxid && self.mzxid() == other.mzxid
    }
}

impl PartialEq for CachedNode {
    fn eq(&self, other: &CachedNode) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.path() == other.path()
                && self.data() == other.data()
                && self.stat() == other.stat())
    }
}

impl Eq for CachedNode {}

impl fmt::Debug for CachedNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedNode")
            .field("path", &self.path())
            .field("data_length", &self.data().map(<[u8]>::len))
            .field("version", &self.version())
            .field("czxid", &self.czxid())
            .field("mzxid", &self.mzxid())
            .finish()
    }
}
