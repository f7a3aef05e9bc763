//! `zk-recipes observe PATH` and `zk-recipes status PATH`: who holds and waits for a lock,
//! or leads and follows in an election ([`view`] says how it is printed).
//!
//! * `status` looks once and exits (0, or 69 if ZooKeeper cannot be read).
//! * `observe` prints a line now and another whenever the contenders change, until SIGINT
//!   or SIGTERM (then exits 0). It sets a child watch on PATH (or, while PATH does not
//!   exist, a watch for its creation) before each look, so no change between two looks is
//!   missed; a look that shows what the last line showed prints nothing. While the
//!   connection is down it waits for it, and after a session expiry it goes on with the
//!   new session.
//!
//! Neither joins anything: observing leaves no node and takes no place in a queue.

use std::io::{self, Write as _};

use tokio::sync::watch;
use tracing::{debug, info_span, Instrument};
use zk_recipes::{Error, LeaderElection, Participant, Result, Session, SessionEvent};
use zookeeper_client::OneshotWatcher;

use crate::args::{Connection, Observe};
use crate::session::OnSession;
use crate::signals::Signals;
use crate::status;
use crate::view;

/// The id an observer's election is made with; never written anywhere, as it never joins.
const OBSERVER: &str = "zk-recipes-observer";

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
        let (path, json) = (&self.args.path, self.args.json);
        let election = match LeaderElection::new(session, path, OBSERVER) {
            Ok(election) => election,
            Err(err) => return status::report(&err),
        };
        if self.follow {
            return match signals.or(follow(session, &election, json)).await {
                Err(_) | Ok(Ok(())) => 0,
                Ok(Err(err)) => status::report(&err),
            };
        }
        match signals.or(election.participants()).await {
            Err(signal) => status::of_signal(signal),
            Ok(Err(err)) => status::report(&err),
            Ok(Ok(participants)) => {
                print(&view::line(election.path(), &participants, json));
                0
            }
        }
    }
}

/// Prints a line for every change of the election's contenders. Returns when stdout is
/// closed.
async fn follow(session: &Session, election: &LeaderElection, json: bool) -> Result<()> {
    let mut events = session.events();
    let mut shown: Option<Vec<Participant>> = None;
    loop {
        events.borrow_and_update();
        let looked = async {
            let watcher = watch_path(session, election.path()).await?;
            Ok((watcher, election.participants().await?))
        };
        let (watcher, participants) = match looked.await {
            Ok(looked) => looked,
            Err(Error::ConnectionLoss | Error::SessionExpired) => {
                next_event(&mut events).await?;
                continue;
            }
            Err(err) => return Err(err),
        };
        if shown.as_ref() != Some(&participants) {
            if !print(&view::line(election.path(), &participants, json)) {
                return Ok(());
            }
            shown = Some(participants);
        }
        let event = watcher.changed().await;
        debug!(?event, "path changed");
    }
}

/// Sets a one-shot watch that fires when PATH's children change or PATH is created or
/// deleted.
async fn watch_path(session: &Session, path: &str) -> Result<OneshotWatcher> {
    let span = info_span!("zk.observe.watch", path);
    async {
        let client = session.client().ok_or(Error::SessionExpired)?;
        loop {
            match client.list_and_watch_children(path).await {
                Ok((_, watcher)) => return Ok(watcher),
                Err(zookeeper_client::Error::NoNode) => {}
                Err(err) => return Err(err.into()),
            }
            match client.check_and_watch_stat(path).await {
                Ok((None, watcher)) => return Ok(watcher),
                // Created meanwhile: watch its children instead.
                Ok((Some(_), _)) => continue,
                Err(err) => return Err(err.into()),
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

/// Prints `line` on stdout at once; `false` if stdout is closed.
fn print(line: &str) -> bool {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
}
