//! Leaving the queue: the node is deleted whatever was written into it, and nothing of
//! ours is given up while its session lives: a removal keeps trying until the node is gone
//! or its session is, whoever dropped the node and wherever (run by the task that awaits
//! it, and by a task on the session's runtime once no one does). An exclusive contender
//! that leaves while first signals its successor as it goes.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tracing::{debug, debug_span, warn, Instrument};
use uuid::Uuid;
use zookeeper_client::{Acls, Client, CreateMode, MultiWriteError, SessionState};

use super::decide::find_own;
use crate::error::{outcome_unknown, Error, Result};
use crate::metrics::PendingRemoval;
use crate::path;
use crate::session::{gone_after, reconnected, Session};

/// How a node left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Left {
    /// We deleted it.
    Deleted,
    /// It was gone already: deleted by someone, or ended with its session.
    AlreadyGone,
    /// It went with its session: the session ended, or the connection stayed down for
    /// longer than the servers keep a session they do not hear from (see [`gone_after`]).
    WithSession,
}

/// The pause after a removal whose outcome was unknown; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Deletes `node`, whatever its version; with `signal`, in one transaction after creating
/// and deleting its left-first signal, so that its successor hears it
/// ([`handoff`](super::handoff)). A signal that cannot be written (someone made its path,
/// or an ACL refuses it) is left out, and the node is deleted all the same. The first
/// request is sent on the first poll, before anything else is awaited.
async fn remove(
    client: &Client,
    node: &str,
    signal: bool,
) -> std::result::Result<(), zookeeper_client::Error> {
    if !signal {
        return client.delete(node, None).await;
    }
    match remove_signalling(client, node).await {
        // The signal's two operations come first.
        Err(MultiWriteError::OperationFailed {
            index: 0..=1,
            source,
        }) => {
            debug!(%node, %source, "cannot signal the successor; leaving that out");
            client.delete(node, None).await
        }
        done => done.map_err(zookeeper_client::Error::from),
    }
}

/// Deletes `node` if `client`'s session owns it, at the version it was seen with; a node
/// at that path that another session made (ours went first) is left alone and reads as
/// gone (`NoNode`). Only another session's delete and create between the look and the
/// delete, one round trip, could still slip in: the servers check a node's version, never
/// its owner.
async fn remove_owned(
    client: &Client,
    node: &str,
) -> std::result::Result<(), zookeeper_client::Error> {
    loop {
        let stat = client.check_stat(node).await?;
        let Some(stat) = stat.filter(|stat| stat.ephemeral_owner == client.session_id().0) else {
            debug!(%node, "the node is not our session's: not ours to delete");
            return Err(zookeeper_client::Error::NoNode);
        };
        match client.delete(node, Some(stat.version)).await {
            // Written into since the look (a hint): look again.
            Err(zookeeper_client::Error::BadVersion) => continue,
            done => return done,
        }
    }
}

/// Deletes `node` in one transaction after creating and deleting its left-first signal.
async fn remove_signalling(
    client: &Client,
    node: &str,
) -> std::result::Result<(), MultiWriteError> {
    // It exists for no one to see: its ACL never matters.
    let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let mut transaction = client.new_multi_writer();
    // Its path is needed only while the operations are written: not kept, not allocated.
    super::handoff::with_signal(node, |signal| {
        transaction.add_create(signal, &[], &options)?;
        transaction.add_delete(signal, None)
    })?;
    transaction.add_delete(node, None)?;
    transaction.commit().await.map(drop)
}

/// What a removal deletes.
#[derive(Debug)]
pub(crate) enum Removal {
    /// A node of ours, and whether to signal its successor (see [`remove`]).
    Node(Arc<str>, bool),
    /// A node named by its path alone (a group member's), which another session may make
    /// again once ours is gone: deleted only while its session owns it (see
    /// [`remove_owned`]).
    Owned(Arc<str>),
    /// The node named with this uuid under the root, if a create made it.
    ByUuid { root: Arc<str>, uuid: Uuid },
}

/// Starts removing a node of ours (from any thread, inside a runtime or not). While the
/// connection is up, its first delete is sent before this returns, so that it comes before
/// anything the caller sends next on the session (a contender that enters again after
/// dropping its guard never finds its old node ahead). It keeps trying, with back-off,
/// until the node is gone or its session is (then the servers delete it); closing the
/// session ends it at once. The returned [`Removing`] says how the node left as soon as
/// that is known; the task that awaits it runs the removal, and dropping it before the
/// removal is done leaves the rest to a task on the session's runtime.
pub(crate) fn spawn_removal(session: &Session, client: Weak<Client>, removal: Removal) -> Removing {
    let later = Later {
        session: session.clone(),
        client,
        removal,
        pending: PendingRemoval::start(),
    };
    let mut removing = Removing {
        removal: Some(Box::pin(later.run(true))),
        left: None,
        session: session.clone(),
    };
    // Polled once here, only to send the first delete now; the task that awaits it polls
    // it again with its waker.
    removing.step(&mut Context::from_waker(Waker::noop()));
    removing
}

/// A removal under way: awaiting it runs it in the awaiting task (no task of its own, no
/// hand-over between tasks when the servers answer), and says how the node left as soon as
/// that is known. Dropped before the removal is done, it leaves the rest to a task on the
/// session's runtime, so that the removal keeps trying whoever stops waiting for it.
pub(crate) struct Removing {
    /// The removal, until it is done.
    removal: Option<Pin<Box<dyn Future<Output = Outcome> + Send + Sync>>>,
    /// How the node left, once known and until it is returned.
    left: Option<Result<Left>>,
    session: Session,
}

impl Removing {
    /// Polls the removal, if it is not done, on the session's runtime (its timers are that
    /// runtime's, whichever task or thread polls). A removal that hands back the rest
    /// ([`Outcome::Later`]) says that the node went with its session, and a task runs the
    /// rest.
    fn step(&mut self, cx: &mut Context<'_>) {
        let Some(removal) = self.removal.as_mut() else {
            return;
        };
        let outcome = {
            let _runtime = self.session.enter();
            match removal.as_mut().poll(cx) {
                Poll::Ready(outcome) => outcome,
                Poll::Pending => return,
            }
        };
        self.removal = None;
        self.left = Some(match outcome {
            Outcome::Left(left) => left,
            Outcome::Later(later) => {
                drop(self.session.spawn(later.finish()));
                Ok(Left::WithSession)
            }
        });
    }
}

impl Future for Removing {
    type Output = Result<Left>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Left>> {
        self.step(cx);
        self.left.take().map_or(Poll::Pending, Poll::Ready)
    }
}

impl Drop for Removing {
    fn drop(&mut self) {
        if let Some(removal) = self.removal.take() {
            drop(self.session.spawn(async move {
                if let Outcome::Later(later) = removal.await {
                    later.finish().await;
                }
            }));
        }
    }
}

/// How a run of a removal ended.
enum Outcome {
    /// How the node left, or why it could not be deleted.
    Left(Result<Left>),
    /// The caller waited for as long as the servers keep a session they do not hear from
    /// with the connection down: to the caller the node went with its session; the rest is
    /// for a task.
    Later(Later),
}

/// A removal to run: its node, on its session.
struct Later {
    session: Session,
    client: Weak<Client>,
    removal: Removal,
    /// Counts it as pending until it is done, across a hand-back.
    pending: PendingRemoval,
}

impl Later {
    /// Deletes the node until it is gone or its session is; `awaited` (a caller waits for
    /// the outcome), only until the connection has been down for as long as the servers
    /// keep a session: then the rest is handed back ([`Outcome::Later`]).
    async fn run(self, awaited: bool) -> Outcome {
        let Later {
            session,
            client,
            removal,
            pending,
        } = self;
        let span = debug_span!("zk.queue.remove", ?removal);
        async move {
            let removed = tokio::select! {
                biased;
                () = session.closed() => Removed::Left(Ok(Left::WithSession)),
                removed = remove_until_gone(client.clone(), removal, awaited) => removed,
            };
            // It may run in the caller, maybe a `Drop` while its thread unwinds: an event
            // then, if the subscriber panics, would abort the process.
            let panicking = std::thread::panicking();
            match removed {
                Removed::Left(left) => {
                    match &left {
                        _ if panicking => {}
                        Ok(left) => debug!(?left, "removed"),
                        Err(err) => warn!(%err, "cannot delete; it goes when the session ends"),
                    }
                    Outcome::Left(left)
                }
                Removed::Overdue(removal) => {
                    if !panicking {
                        debug!("disconnected for longer than the session lives; deleting later");
                    }
                    Outcome::Later(Later {
                        session,
                        client,
                        removal,
                        pending,
                    })
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Runs the rest, with no one waiting for it.
    async fn finish(self) {
        // Unawaited, a run never hands back.
        drop(self.run(false).await);
    }
}

/// How [`remove_until_gone`] ended.
enum Removed {
    /// How the node left, or why it could not be deleted.
    Left(Result<Left>),
    /// It was awaited, and the connection stayed down for as long as the servers keep a
    /// session: what is left to remove.
    Overdue(Removal),
}

/// Deletes the node `removal` names until it is gone or its session is; `awaited`, until
/// the connection has stayed down for as long as the servers keep a session (see
/// [`connected`]).
async fn remove_until_gone(client: Weak<Client>, removal: Removal, awaited: bool) -> Removed {
    let Some(client) = client.upgrade() else {
        // The session was closed or replaced.
        return Removed::Left(Ok(Left::WithSession));
    };
    let (node, signal, owned) = match removal {
        Removal::Node(node, signal) => (node, signal, false),
        Removal::Owned(node) => (node, false, true),
        Removal::ByUuid { root, uuid } => {
            match find_by_uuid(&client, &root, &uuid, awaited).await {
                Found::Node(node) => (Arc::from(node), false, false),
                Found::Left(left) => return Removed::Left(Ok(left)),
                Found::Overdue => return Removed::Overdue(Removal::ByUuid { root, uuid }),
            }
        }
    };
    let mut pause = FIRST_PAUSE;
    // The first delete goes out at once if it can, before anything that waits.
    let mut connected_now = client.state() == SessionState::SyncConnected;
    loop {
        if !std::mem::take(&mut connected_now) {
            match connected(&client, awaited).await {
                Connection::Up => {}
                Connection::Ended => return Removed::Left(Ok(Left::WithSession)),
                Connection::Overdue => {
                    return Removed::Overdue(match owned {
                        true => Removal::Owned(node),
                        false => Removal::Node(node, signal),
                    })
                }
            }
        }
        let removed = match owned {
            true => remove_owned(&client, &node).await,
            false => remove(&client, &node, signal).await,
        };
        match removed {
            Ok(()) => return Removed::Left(Ok(Left::Deleted)),
            Err(zookeeper_client::Error::NoNode) => return Removed::Left(Ok(Left::AlreadyGone)),
            Err(err) if outcome_unknown(&err) => {
                debug!(%err, ?pause, "outcome of the delete unknown; sending it again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(err) => {
                return Removed::Left(match Error::at(&node, err) {
                    Error::SessionExpired | Error::Closed => Ok(Left::WithSession),
                    err => Err(err),
                })
            }
        }
    }
}

/// What a wait for the connection found.
enum Connection {
    Up,
    /// The session ended.
    Ended,
    /// The connection stayed down for as long as the servers keep a session they do not
    /// hear from ([`gone_after`]), and a caller waits: it is told that the node went with
    /// its session.
    Overdue,
}

/// Waits until `client` is connected or its session ended; with a caller that `awaited`
/// the removal, at most for as long as the servers keep a session they do not hear from.
async fn connected(client: &Client, awaited: bool) -> Connection {
    let reconnecting = reconnected(client);
    let back = match awaited {
        true => {
            let gone_after = gone_after(client.session_timeout());
            tokio::select! {
                back = reconnecting => back,
                () = tokio::time::sleep(gone_after) => {
                    debug!(?gone_after, "disconnected for longer than the session lives");
                    return Connection::Overdue;
                }
            }
        }
        false => reconnecting.await,
    };
    match back {
        Ok(_) => Connection::Up,
        Err(_) => Connection::Ended,
    }
}

/// What [`find_by_uuid`] found.
enum Found {
    /// The node a create made.
    Node(String),
    /// None: it made none, or the node is gone (or goes with the session).
    Left(Left),
    /// As [`Connection::Overdue`].
    Overdue,
}

/// The node named with `uuid` under `root`, if a create made it; listed once connected,
/// again after each listing whose outcome is unknown. [`Left::WithSession`] if the session
/// ended first, or the root cannot be listed (then the node, if any, goes with the session).
async fn find_by_uuid(client: &Client, root: &str, uuid: &Uuid, awaited: bool) -> Found {
    let mut pause = FIRST_PAUSE;
    loop {
        match connected(client, awaited).await {
            Connection::Up => {}
            Connection::Ended => return Found::Left(Left::WithSession),
            Connection::Overdue => return Found::Overdue,
        }
        // The sync makes the listing show a create that the lost reply was about.
        let listed = match client.sync(root).await {
            Ok(()) => client.list_children(root).await,
            Err(err) => Err(err),
        };
        match listed {
            Ok(children) => {
                return match find_own(&children, uuid) {
                    Some(name) => Found::Node(path::join(root, name)),
                    None => Found::Left(Left::AlreadyGone),
                }
            }
            Err(zookeeper_client::Error::NoNode) => return Found::Left(Left::AlreadyGone),
            Err(err) if outcome_unknown(&err) => {
                debug!(%err, ?pause, "cannot list the root yet; again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(err) => {
                warn!(%err, %root, "cannot look for a node whose create reply was lost");
                return Found::Left(Left::WithSession);
            }
        }
    }
}
