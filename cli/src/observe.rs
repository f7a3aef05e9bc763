//! `zk-recipes observe PATH` and `zk-recipes status PATH`: who holds and waits for a lock,
//! a read/write lock or a semaphore, or leads and follows in an election ([`view`] says
//! how each is told and printed).
//!
//! * `status` looks once and exits (0, or 69 if ZooKeeper cannot be read).
//! * `observe` prints a line now and another whenever the contenders change, until SIGINT,
//!   SIGTERM, SIGHUP or SIGQUIT, or until its stdout is closed (then exits 0). It sets a child watch on PATH (or, while PATH does not
//!   exist, a watch for its creation) before each look, and on a semaphore's
//!   `PATH/leases` and `PATH/locks` too, so no change between two looks is missed; a look
//!   that shows what the last line showed prints nothing. While the connection is down it
//!   waits for it, and after a session expiry it goes on with the new session.
//!
//! Neither joins anything: observing leaves no node and takes no place in a queue. The
//! contenders are listed, in order and with who holds, by the library's `contenders()` of
//! the recipe PATH is for ([`look`]).

use tokio::sync::watch;
use tracing::{debug, info_span, Instrument};
use zk_recipes::{Error, Mutex, Result, RwLock, Semaphore, Session, SessionEvent};
use zookeeper_client::{OneshotWatcher, WatchedEvent};

use crate::args::{Connection, Observe};
use crate::output::{self, until_closed};
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;
use crate::view::{self, recipe, Recipe, Seen};

/// What PATH holds now; `children`, PATH's children listed before, tell a semaphore. The
/// recipe is told by its nodes' names: `…-latch-<seq>` an election (`LeaderElection`,
/// Curator's `LeaderLatch`), `…__READ__<seq>`/`…__WRIT__<seq>` or kazoo's `…__rlock__<seq>`
/// a read/write lock, anything else a lock; a path with `leases` or `locks` children and
/// no contender of its own is a semaphore's.
async fn look(session: &Session, path: &str, children: &[String]) -> Result<Seen> {
    let mutex = Mutex::new(session, path)?;
    let contenders = mutex.contenders().await?;
    if contenders.is_empty() && semaphore(children) {
        let max = Semaphore::new(session, path, 1)?.recorded_max().await?;
        let semaphore = Semaphore::new(session, path, max.unwrap_or(u32::MAX))?;
        let contenders = semaphore.contenders().await?;
        return Ok(Seen::Semaphore { max, contenders });
    }
    match recipe(&contenders) {
        Recipe::RwLock => {
            let contenders = RwLock::new(session, path)?.contenders().await?;
            Ok(Seen::Queue(Recipe::RwLock, contenders))
        }
        recipe => Ok(Seen::Queue(recipe, contenders)),
    }
}

/// Whether PATH's children are a semaphore's.
fn semaphore(children: &[String]) -> bool {
    children
        .iter()
        .any(|name| name == "leases" || name == "locks")
}

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
        let (path, json) = (self.args.path.as_str(), self.args.json);
        if self.follow {
            return match signals.or(until_closed(follow(session, path, json))).await {
                Err(_) | Ok(Ok(())) => 0,
                Ok(Err(err)) => status::report(&err),
            };
        }
        let looked = async {
            let children = list(session, path).await?;
            look(session, path, &children).await
        };
        match signals.or(looked).await {
            Err(signal) => status::of_signal(signal),
            Ok(Err(err)) => status::report(&err),
            Ok(Ok(seen)) => {
                output::print(&view::line(path, &seen, json));
                0
            }
        }
    }
}

/// Prints a line for every change of what PATH holds. Returns when stdout is closed.
async fn follow(session: &Session, path: &str, json: bool) -> Result<()> {
    let mut events = session.events();
    let mut shown: Option<Seen> = None;
    loop {
        events.borrow_and_update();
        let looked = async {
            let (watcher, children) = watch_path(session, path).await?;
            let parts = match semaphore(&children) {
                true => Some((
                    watch_path(session, &format!("{path}/leases")).await?.0,
                    watch_path(session, &format!("{path}/locks")).await?.0,
                )),
                false => None,
            };
            Ok((watcher, parts, look(session, path, &children).await?))
        };
        let (watcher, parts, seen) = match looked.await {
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
        let event = changed(watcher, parts).await;
        debug!(?event, "path changed");
    }
}

/// The first event of PATH's watch and, for a semaphore, of its two queues' watches.
async fn changed(
    path: OneshotWatcher,
    parts: Option<(OneshotWatcher, OneshotWatcher)>,
) -> WatchedEvent {
    let Some((leases, locks)) = parts else {
        return path.changed().await;
    };
    tokio::select! {
        event = path.changed() => event,
        event = leases.changed() => event,
        event = locks.changed() => event,
    }
}

/// PATH's children (none if it does not exist).
async fn list(session: &Session, path: &str) -> Result<Vec<String>> {
    let client = session.client().ok_or(Error::Renewing)?;
    match client.list_children(path).await {
        Ok(children) => Ok(children),
        Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
        Err(err) => Err(refused(path, err)),
    }
}

/// The library's error for a read of `path` that failed with `err`: [`Error::NoAuth`] if
/// the path's ACL refused it (with its hint, see `status::report`).
fn refused(path: &str, err: zookeeper_client::Error) -> Error {
    match err {
        zookeeper_client::Error::NoAuth => Error::NoAuth { path: path.into() },
        err => err.into(),
    }
}

/// Sets a one-shot watch that fires when PATH's children change or PATH is created or
/// deleted; returns it with the children (none while PATH does not exist).
async fn watch_path(session: &Session, path: &str) -> Result<(OneshotWatcher, Vec<String>)> {
    let span = info_span!("zk.observe.watch", path);
    async {
        let client = session.client().ok_or(Error::Renewing)?;
        loop {
            match client.list_and_watch_children(path).await {
                Ok((children, watcher)) => return Ok((watcher, children)),
                Err(zookeeper_client::Error::NoNode) => {}
                Err(err) => return Err(refused(path, err)),
            }
            match client.check_and_watch_stat(path).await {
                Ok((None, watcher)) => return Ok((watcher, Vec::new())),
                // Created meanwhile: watch its children instead.
                Ok((Some(_), _)) => continue,
                Err(err) => return Err(refused(path, err)),
            }
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
