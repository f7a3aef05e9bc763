//! [`Loss`]: why something held can no longer be trusted. Below the session, which decides
//! the cause of a loss of the whole session once (see [`Liveness`](crate::session::Liveness)),
//! and the hold core, which reports it.

/// Why a held lock or leadership can no longer be trusted.
///
/// Holds on one session that one event ends report the same `Loss`: the session decides
/// the cause once, as the first of these it sees, and every hold made before reads it
/// (a hold made after it, once the session is trusted again, is not ended by it):
///
/// | event | `Loss` |
/// |---|---|
/// | the clock passed the time until which the servers certainly keep the session (a pause or starvation of the process, or servers out of reach, longer than the session timeout) | [`Lapsed`](Loss::Lapsed) |
/// | the connection went down (and stayed down past [`SessionBuilder::tolerate_suspension`](crate::SessionBuilder::tolerate_suspension), if set) | [`Suspended`](Loss::Suspended) |
/// | the servers expired the session | [`SessionExpired`](Loss::SessionExpired) |
/// | [`Session::close`](crate::Session::close), or the session ended for good | [`Closed`](Loss::Closed) |
///
/// So a process stopped past its session timeout reports [`Lapsed`](Loss::Lapsed) on every
/// hold when it wakes if its clock is looked at first, or [`Suspended`](Loss::Suspended) /
/// [`SessionExpired`](Loss::SessionExpired) on every hold if the connection's state
/// is seen first; never a mix. What ends one hold only, its node deleted by someone
/// ([`NodeDeleted`](Loss::NodeDeleted)), its node that can no longer be watched
/// ([`Unwatched`](Loss::Unwatched)), or its release ([`Closed`](Loss::Closed)), is its own.
///
/// Each variant names one cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Loss {
    /// The ZooKeeper session expired (or the client gave up on it).
    SessionExpired,
    /// The connection was suspended: the session may be alive, but another contender may
    /// be let in before this one hears of it.
    Suspended,
    /// The node was deleted by someone else.
    NodeDeleted,
    /// The session was closed.
    Closed,
    /// The servers have not confirmed the session for as long as they keep one that they
    /// do not hear from (its session timeout, counted from the sending of the last request
    /// of ours they answered): they may have expired it and let another contender in. The
    /// process was paused or starved past that time, or could not reach the servers.
    Lapsed,
    /// The hold's node can no longer be watched while the connection is up (the servers
    /// refused the watch, for example after its ACL changed to deny reading it), so its
    /// deletion by someone else would go unheard.
    Unwatched,
}
