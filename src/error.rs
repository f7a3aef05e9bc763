//! The one error type of the crate.
//!
//! Each variant says what the caller can do about it: fix the input
//! ([`Error::InvalidPath`], [`Error::InvalidArgument`], [`Error::InvalidConnectString`]),
//! fix the credentials or the TLS settings ([`Error::AuthFailed`], [`Error::Tls`],
//! [`Error::InvalidAcl`]), fix the ensemble's or the participants' configuration
//! ([`Error::NoAuth`], [`Error::EphemeralParent`], [`Error::MaxLeasesConflict`],
//! [`Error::PartitionsConflict`]),
//! try again later ([`Error::Unreachable`], [`Error::Disconnected`], [`Error::Renewing`]:
//! nothing was sent; [`Error::ConnectionLoss`], [`Error::SessionExpired`]: what was sent
//! may have taken effect, and was cleaned up), or stop ([`Error::Closed`],
//! [`Error::Lost`]). Each variant has one meaning, the one its docs give.
//!
//! Inside the crate a few variants also steer the next step, and mean the same there:
//! [`Error::SessionExpired`] while entering a queue or waiting in it means that the node
//! went with the session, so the contender enters again on the new session (unless told
//! not to: then it is returned); [`Error::ZooKeeper`] with `NoNode` from a read means that
//! the node read is gone. What reaches the caller is never a step the crate could still
//! take itself.

/// Errors returned by zk-recipes.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The znode path cannot be used: it is malformed (nothing was sent to ZooKeeper), or
    /// it lies under a chroot that does not exist (found when a recipe first made its
    /// path: what was sent created nothing).
    #[error("invalid znode path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// An argument other than a path is unusable (for example an empty participant id, a
    /// semaphore of zero leases, an unreadable TLS certificate); nothing was sent to
    /// ZooKeeper. Fix the argument.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The connect string cannot be parsed.
    #[error("invalid connect string {hosts:?}: {reason}")]
    InvalidConnectString {
        /// The connect string as given.
        hosts: String,
        /// What is wrong with it.
        reason: String,
    },

    /// No ZooKeeper server could be reached (or no session established) in time.
    #[error("no ZooKeeper server of {hosts:?} reachable: {reason}")]
    Unreachable {
        /// The connect string.
        hosts: String,
        /// What the client reported.
        reason: String,
    },

    /// The servers refused the session's credentials while it was established (SASL). No
    /// session was made; retrying with the same credentials fails the same way.
    #[error("ZooKeeper servers {hosts:?} refused the credentials: {reason}")]
    AuthFailed {
        /// The connect string.
        hosts: String,
        /// What was refused.
        reason: String,
    },

    /// Every server was reached, and every one refused the connection at the TLS level for a
    /// reason that retrying does not fix: its certificate is not trusted by the given CA, it
    /// requires a client certificate (or refused the one given), or one side speaks TLS and
    /// the other does not. No session was made. Returned as soon as that is known, within the
    /// connection timeout.
    #[error("TLS to ZooKeeper servers {hosts:?} refused: {reason}")]
    Tls {
        /// The connect string.
        hosts: String,
        /// What each server did.
        reason: String,
    },

    /// The server refused the operation for lack of permission (ACL). With digest
    /// authentication this is also how a wrong password shows: ZooKeeper accepts any digest
    /// identity at connect, and only the nodes' ACLs tell it apart.
    #[error("not authorized to use {path:?} (ACL denies it)")]
    NoAuth {
        /// The node the operation was refused on.
        path: String,
    },

    /// The servers refused the ACL of a node this crate creates: a creator-only
    /// [`NodeAcl`](crate::NodeAcl) needs a session with an identity
    /// ([`SessionBuilder::digest_auth`](crate::SessionBuilder::digest_auth)). Nothing was
    /// created; give the session credentials or choose another ACL.
    #[error(
        "ZooKeeper refused the node ACL for {path:?}: a creator-only ACL needs an \
         authenticated session (SessionBuilder::digest_auth)"
    )]
    InvalidAcl {
        /// The node whose create was refused.
        path: String,
    },

    /// The recipe's root path lies under an ephemeral node, which cannot have children.
    #[error("{path:?} lies under an ephemeral node, which cannot have children")]
    EphemeralParent {
        /// The recipe's root path.
        path: String,
    },

    /// The connection is down (the session may still be alive): nothing was sent.
    /// Operations that never wait ([`Mutex::try_lock`](crate::Mutex::try_lock), observers)
    /// return it at once instead of waiting for the connection. Retry once
    /// [`Session::events`](crate::Session::events) says it is back.
    #[error("not connected to ZooKeeper; nothing was sent")]
    Disconnected,

    /// The connection broke while a request was in flight, and stayed broken through the
    /// retries: whether the request took effect is unknown. A recipe cleans up after
    /// itself (a node that may have been made is deleted in the background), so retrying
    /// is safe. Releases never return it: they wait for the connection, at most until the
    /// session would have expired.
    #[error("connection to ZooKeeper lost; the outcome of the operation is unknown")]
    ConnectionLoss,

    /// The ZooKeeper session the operation ran on expired, and what it held went with it.
    /// [`Session`](crate::Session) makes a new one; retry.
    #[error("ZooKeeper session expired")]
    SessionExpired,

    /// There is no ZooKeeper session at the moment: the last one expired and
    /// [`Session`](crate::Session) is making a new one; nothing was sent. Only operations
    /// that never wait return it; retry once
    /// [`Session::events`](crate::Session::events) says it is connected.
    #[error("a new ZooKeeper session is being made; nothing was sent")]
    Renewing,

    /// What was held (a lock, a lease or a leadership) was already lost when it was given
    /// up: the session had expired or was suspended, or the node had been deleted. What was
    /// done under it may have overlapped with another holder. Nothing of anyone else's was
    /// touched; the node, if it was still there, was deleted all the same. Also what a
    /// write for a hold that is over gets ([`Fenced::commit`](crate::Fenced::commit), a
    /// [`Membership::set_data`](crate::Membership::set_data) of a membership that ended):
    /// nothing was written.
    #[error("{node:?} was already lost")]
    Lost {
        /// The node that held.
        node: String,
    },

    /// The servers refused an operation of a [`Fenced`](crate::Fenced) transaction while
    /// the hold was intact: nothing of the transaction was written. `index` counts the
    /// caller's operations from 0, in the order added.
    #[error("fenced operation {index} on {path:?} failed: {reason}; nothing was written")]
    FencedOpFailed {
        /// Which operation, counted from 0 in the order added.
        index: usize,
        /// The path it was on.
        path: String,
        /// Why the servers refused it (`NoNode`, `NodeExists`, `BadVersion`, `NotEmpty`,
        /// `NoAuth`, …).
        #[source]
        reason: zookeeper_client::Error,
    },

    /// Participants of one [`Semaphore`](crate::Semaphore) disagree about its maximum: leases
    /// are held under the maximum recorded at the semaphore, not this one. Nothing was
    /// acquired; give every participant the same maximum.
    #[error("semaphore {path:?} is in use with at most {recorded} leases, not {ours}")]
    MaxLeasesConflict {
        /// The semaphore's path.
        path: String,
        /// The maximum this participant was made with.
        ours: u32,
        /// The maximum recorded by the participants that hold leases.
        recorded: u32,
    },

    /// Members of one [`Partitioner`](crate::Partitioner) disagree about its partitions:
    /// another member works them under another set of partition names (or another version
    /// of the assignment). Nothing was joined (a node made for the join is deleted before
    /// this returns); give every member the same partitions.
    #[error("partitioner {path:?} is in use by member {member:?} with {theirs}, not {ours}")]
    PartitionsConflict {
        /// The partitioner's path.
        path: String,
        /// The id of the member that works the other set.
        member: String,
        /// What this member was made with: `v1 <count> partitions <fingerprint>`.
        ours: String,
        /// What that member's node records (`no partitioner record` if it records none).
        theirs: String,
    },

    /// The node of a [`SharedCounter`](crate::SharedCounter) holds data that is not a
    /// counter (a counter is exactly 4 bytes, a big-endian `i32`, as Curator's
    /// `SharedCount` writes it): nothing was written. Whoever wrote it uses the path for
    /// something else; choose another path, or set the counter with
    /// [`SharedCounter::set`](crate::SharedCounter::set).
    #[error("{path:?} holds {len} bytes, not a 4-byte counter")]
    NotACounter {
        /// The counter's node.
        path: String,
        /// The length of the data found.
        len: usize,
    },

    /// A [`Group`](crate::Group) member id is in use: its node exists and belongs to
    /// another live session (or is not ephemeral). Nothing was created and nothing of the
    /// other member's was touched; join again once it has left.
    #[error("member node {node:?} belongs to another session")]
    IdTaken {
        /// The member's node.
        node: String,
    },

    /// The [`Session`](crate::Session) ended for good: it was closed, a new session after
    /// expiry was refused for good, or the runtime that ran it shut down;
    /// [`Session::close_reason`](crate::Session::close_reason) says which.
    #[error("session closed")]
    Closed,

    /// Any other failure reported by ZooKeeper or the client.
    #[error("ZooKeeper error: {0}")]
    ZooKeeper(#[source] zookeeper_client::Error),
}

impl Error {
    /// Maps a client error, naming `path` where the error is about a node.
    pub(crate) fn at(path: &str, err: zookeeper_client::Error) -> Error {
        use zookeeper_client::Error as Zk;
        match err {
            Zk::NoAuth => Error::NoAuth { path: path.into() },
            Zk::InvalidAcl => Error::InvalidAcl { path: path.into() },
            Zk::NoChildrenForEphemerals => Error::EphemeralParent { path: path.into() },
            other => Error::from(other),
        }
    }

    /// Names the recipe root in errors about it.
    pub(crate) fn at_root(self, root: &str) -> Error {
        match self {
            Error::ZooKeeper(err) => Error::at(root, err),
            other => other,
        }
    }
}

/// Whether a client error means the connection broke with the request in flight, so that
/// it may or may not have taken effect. Besides `ConnectionLoss`, zookeeper-client fails
/// in-flight requests with the I/O or timeout error that broke the connection.
pub(crate) fn outcome_unknown(err: &zookeeper_client::Error) -> bool {
    use zookeeper_client::Error as Zk;
    matches!(err, Zk::ConnectionLoss | Zk::Timeout | Zk::Custom(_))
}

impl From<zookeeper_client::Error> for Error {
    fn from(err: zookeeper_client::Error) -> Error {
        use zookeeper_client::Error as Zk;
        match err {
            err if outcome_unknown(&err) => Error::ConnectionLoss,
            Zk::SessionExpired => Error::SessionExpired,
            Zk::ClientClosed => Error::Closed,
            other => Error::ZooKeeper(other),
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
