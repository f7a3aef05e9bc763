//! `zk-recipes observe PATH` and `zk-recipes status PATH`: who holds and waits for a lock,
//! a read/write lock or a semaphore, or leads and follows in an election; the keys of a
//! `KeyedMutex` root with their holders; a group's members; or, when PATH is none of these
//! (or `--kind` does not say), its children as they are ([`look`] says how what PATH is
//! gets told, [`view`] how it is printed).
//!
//! * `status` looks once and exits: 0, [`NO_SUCH_PATH`](status::NO_SUCH_PATH) (66) if
//!   PATH does not exist (it prints `PATH: no such path`), 69 if ZooKeeper cannot be read.
//! * `observe` prints a line now and another whenever what it shows changes, until SIGINT,
//!   SIGTERM, SIGHUP or SIGQUIT, or until its stdout is closed (then exits 0). Before each
//!   look it sets a child watch on PATH (or, while PATH does not exist, a watch for its
//!   creation), on a semaphore's `PATH/leases` and `PATH/locks` too (also where they are
//!   only a KeyedMutex's keys of those names), on every key of a `--kind keyed` root, and
//!   a data watch on every member of a `--kind group`, and on a partitioner's members (their
//!   list and data) and partition locks (their list and queues), so no change between two looks is
//!   missed; a look that shows what the last line showed prints nothing. While the
//!   connection is down it waits for it, and after a session expiry it goes on with the
//!   new session.
//!
//! Neither joins anything: observing leaves no node and takes no place in a queue. The
//! contenders are listed, in order and with who holds, by the library's `contenders()` of
//! the recipe PATH is for.

use futures::future::select_all;
use tokio::sync::watch;
use tracing::{debug, info_span, Instrument};
use zk_recipes::zookeeper::{self, OneshotWatcher};
use zk_recipes::{Error, Result, Session, SessionEvent};

use crate::args::{Connection, Kind, Observe};
use crate::look::{look, partitioner_layout, SEMAPHORE_PARTS};
use crate::output::{self, until_closed};
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;
use crate::view::{self, Seen};

/// `observe` (`follow`) or `status`.
pub struct Look<'a> {
    pub args: &'a Observe,
    /// Whether to go on printing on every change.
    pub follow: bool,
}

impl OnSession for Look<'_> {
    fn connection(&self) -> &Connection {
        &self.args.connection
    }

    async fn run(&self, session: &Session, signals: &mut Signals) -> u8 {
        let (path, kind, json) = (self.args.path.as_str(), self.args.kind, self.args.json);
        if self.follow {
            let following = follow(session, path, kind, json);
            return match signals.or(until_closed(following)).await {
                Err(_) | Ok(Ok(())) => 0,
                Ok(Err(err)) => status::report(&err),
            };
        }
        let looked = async {
            let children = list(session, path).await?;
            look(session, path, kind, children.as_deref()).await
        };
        match signals.or(looked).await {
            Err(signal) => status::of_signal(signal),
            Ok(Err(err)) => status::report(&err),
            Ok(Ok(seen)) => {
                output::print(&view::line(path, &seen, json));
                match seen {
                    Seen::Missing => status::NO_SUCH_PATH,
                    _ => 0,
                }
            }
        }
    }
}

/// Prints a line for every change of what PATH holds. Returns when stdout is closed.
async fn follow(session: &Session, path: &str, kind: Option<Kind>, json: bool) -> Result<()> {
    let mut events = session.events();
    let mut shown: Option<Seen> = None;
    loop {
        events.borrow_and_update();
        let looked = async {
            let (watcher, children) = watch_path(session, path).await?;
            let mut watchers = parts(session, path, kind, children.as_deref()).await?;
            watchers.push(watcher);
            let seen = look(session, path, kind, children.as_deref()).await?;
            Ok((watchers, seen))
        };
        let (watchers, seen) = match looked.await {
            Ok(looked) => looked,
            Err(
                Error::Disconnected
                | Error::ConnectionLoss
                | Error::SessionExpired
                | Error::Renewing,
            ) => {
                next_event(&mut events).await?;
                continue;
            }
            Err(err) => return Err(err),
        };
        if shown.as_ref() != Some(&seen) {
            if !output::print(&view::line(path, &seen, json)) {
                return Ok(());
            }
            shown = Some(seen);
        }
        let (event, _, _) = select_all(watchers.into_iter().map(|w| Box::pin(w.changed()))).await;
        debug!(?event, "path changed");
    }
}

/// The watches a look at PATH needs besides PATH's own: on a semaphore's `leases` and
/// `locks` (wherever PATH has children of those names and `--kind` does not say otherwise),
/// on each key of a KeyedMutex root, and on each member of a group (its data).
async fn parts(
    session: &Session,
    path: &str,
    kind: Option<Kind>,
    children: Option<&[String]>,
) -> Result<Vec<OneshotWatcher>> {
    let children = children.unwrap_or_default();
    let named = |names: &[&str]| {
        let mut named: Vec<String> = children.to_vec();
        named.retain(|child| names.contains(&child.as_str()));
        named
    };
    let partitioner = match kind {
        None => partitioner_layout(children),
        _ => kind == Some(Kind::Partitioner),
    };
    if partitioner {
        return partitioner_parts(session, path).await;
    }
    let (watched, data) = match kind {
        None => (named(&SEMAPHORE_PARTS), false),
        Some(Kind::Semaphore) => (SEMAPHORE_PARTS.map(String::from).to_vec(), false),
        Some(Kind::Keyed) => (children.to_vec(), false),
        Some(Kind::Group) => (children.to_vec(), true),
        Some(Kind::Lock | Kind::Rwlock | Kind::Election | Kind::Partitioner) => (Vec::new(), false),
    };
    let mut watchers = Vec::with_capacity(watched.len());
    for child in watched {
        let child = format!("{path}/{child}");
        watchers.push(match data {
            true => watch_data(session, &child).await?,
            false => watch_path(session, &child).await?.0,
        });
    }
    Ok(watchers)
}

/// The watches a look at a partitioner's PATH needs: on its members (who they are, and
/// each one's data, which says what it holds) and on its partitions' locks (the list, and
/// each lock's queue).
async fn partitioner_parts(session: &Session, path: &str) -> Result<Vec<OneshotWatcher>> {
    let mut watchers = Vec::new();
    let members = format!("{path}/members");
    let (watcher, ids) = watch_path(session, &members).await?;
    watchers.push(watcher);
    for id in ids.unwrap_or_default() {
        watchers.push(watch_data(session, &format!("{members}/{id}")).await?);
    }
    let partitions = format!("{path}/partitions");
    let (watcher, names) = watch_path(session, &partitions).await?;
    watchers.push(watcher);
    for name in names.unwrap_or_default() {
        watchers.push(
            watch_path(session, &format!("{partitions}/{name}"))
                .await?
                .0,
        );
    }
    Ok(watchers)
}

/// PATH's children (`None` if it does not exist).
async fn list(session: &Session, path: &str) -> Result<Option<Vec<String>>> {
    let client = session.client().ok_or(Error::Renewing)?;
    match client.list_children(path).await {
        Ok(children) => Ok(Some(children)),
        Err(zookeeper::Error::NoNode) => Ok(None),
        Err(err) => Err(refused(path, err)),
    }
}

/// The library's error for a read of `path` that failed with `err`: [`Error::NoAuth`] if
/// the path's ACL refused it (with its hint, see `status::report`).
fn refused(path: &str, err: zookeeper::Error) -> Error {
    match err {
        zookeeper::Error::NoAuth => Error::NoAuth { path: path.into() },
        err => err.into(),
    }
}

/// Sets a one-shot watch that fires when PATH's children change or PATH is created or
/// deleted; returns it with the children (`None` while PATH does not exist).
async fn watch_path(
    session: &Session,
    path: &str,
) -> Result<(OneshotWatcher, Option<Vec<String>>)> {
    let span = info_span!("zk.observe.watch", path);
    async {
        let client = session.client().ok_or(Error::Renewing)?;
        loop {
            match client.list_and_watch_children(path).await {
                Ok((children, watcher)) => return Ok((watcher, Some(children))),
                Err(zookeeper::Error::NoNode) => {}
                Err(err) => return Err(refused(path, err)),
            }
            match client.check_and_watch_stat(path).await {
                Ok((None, watcher)) => return Ok((watcher, None)),
                // Created meanwhile: watch its children instead.
                Ok((Some(_), _)) => continue,
                Err(err) => return Err(refused(path, err)),
            }
        }
    }
    .instrument(span)
    .await
}

/// Sets a one-shot watch that fires when `node`'s data is set, or it is created or
/// deleted (a group member's).
async fn watch_data(session: &Session, node: &str) -> Result<OneshotWatcher> {
    let span = info_span!("zk.observe.watch_data", node);
    async {
        let client = session.client().ok_or(Error::Renewing)?;
        match client.check_and_watch_stat(node).await {
            Ok((_, watcher)) => Ok(watcher),
            Err(err) => Err(refused(node, err)),
        }
    }
    .instrument(span)
    .await
}

/// Waits for the session's next change (the connection back, a new session).
async fn next_event(events: &mut watch::Receiver<SessionEvent>) -> Result<()> {
    events.changed().await.map_err(|_| Error::Closed)?;
    match *events.borrow() {
        SessionEvent::Closed => Err(Error::Closed),
        _ => Ok(()),
    }
}
