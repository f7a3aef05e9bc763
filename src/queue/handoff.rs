//! What a waiter hears while it waits on its blocker: the watches it sets (the blocker's,
//! its own node's, the blocker's signal's), and the one place where what it heard is
//! recorded. The rule that decides from it is in the queue's module doc ("Waiting and
//! hand-off").

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;
use std::task::{Context, Poll, Waker};

use tracing::debug;
use zookeeper_client::{Client, EventType, OneshotWatcher, StateWatcher, WatchedEvent};

use super::decide;
use crate::error::{Error, Result};
use crate::session::{retry, terminal};

/// The suffix of a node's left-first signal.
const SIGNAL: &str = ".left-first";

/// The path of the signal that the node at `node` left while first.
pub(super) fn signal(node: &str) -> String {
    // One allocation of the exact size (`format!` would grow its string into place).
    [node, SIGNAL].concat()
}

/// Runs `with` on the path of the signal that the node at `node` left while first, written
/// into a buffer the thread keeps (no allocation, once the thread has made one).
pub(super) fn with_signal<T>(node: &str, mut with: impl FnMut(&str) -> T) -> T {
    thread_local! {
        static PATH: RefCell<String> = const { RefCell::new(String::new()) };
    }
    let reused = PATH.try_with(|path| {
        let mut path = path.try_borrow_mut().ok()?;
        path.clear();
        path.push_str(node);
        path.push_str(SIGNAL);
        Some(with(&path))
    });
    match reused {
        Ok(Some(done)) => done,
        // The thread's buffer is in use, or gone (the thread is ending): a path of its own.
        _ => with(&signal(node)),
    }
}

/// A watch that has been set, waiting for its notification.
pub(crate) type Armed = Pin<Box<dyn Future<Output = WatchedEvent> + Send + Sync>>;

/// Keeps `watcher` waiting for its notification (boxed: a waiter keeps one per watch).
pub(crate) fn armed(watcher: OneshotWatcher) -> Armed {
    Box::pin(watcher.changed())
}

/// What a waiter watches, and what it heard of it.
pub(super) struct HandOff {
    /// A data watch on the blocker, while it is there.
    blocker: Option<Armed>,
    /// The connection's state as of arming: any change means the watches were set again.
    states: Option<StateWatcher>,
    /// An exists watch on our own node, set while it existed; gone once it fired.
    own: Option<Armed>,
    /// An exists watch on the blocker's left-first signal; `None` if it could not be set,
    /// the blocker never signals, or it fired.
    signal: Option<Armed>,
    /// Whether the signal was heard created.
    signalled: bool,
    /// Whether the connection changed since arming.
    reconnected: bool,
}

/// What one look at the hand-off's watches ends on ([`HandOff::poll_heard`]).
enum Sent {
    /// Our own node was deleted.
    OwnDeleted,
    /// The blocker is not watched: it was not there when its watch was set.
    BlockerGone,
    /// The blocker's notification (its watch is spent).
    Blocker(WatchedEvent),
}

/// What ends a waiter's hearing, in the order the servers sent it.
pub(super) enum Heard {
    /// Our own node was deleted.
    OwnDeleted,
    /// The blocker is gone (deleted, or not there when its watch was set), and what was
    /// heard before says that we are first with our own node there: we hold without a
    /// request.
    Taken,
    /// The blocker is gone, and what was heard does not say that we hold: ask.
    BlockerGone,
}

impl std::fmt::Debug for HandOff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandOff")
            .field("own", &self.own.is_some())
            .field("signalled", &self.signalled)
            .field("reconnected", &self.reconnected)
            .finish_non_exhaustive()
    }
}

impl HandOff {
    /// Watches the blocker at `blocker`, our own node at `node` (unless `own` already
    /// watches it) and, if `signals`, the blocker's left-first signal: sent back to back,
    /// answered in one round trip, the blocker's first. The connection's state is taken
    /// before anything is sent. Own and signal watches that cannot be set only cost a
    /// request once the blocker left (nothing heard then says that we hold).
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] (naming the blocker) if the session may not read the blocker:
    ///   the servers would never tell it that the blocker went.
    /// * [`Error::ConnectionLoss`], [`Error::SessionExpired`], [`Error::Closed`] as
    ///   [`retry`], for the blocker's watch.
    ///
    /// # Cancel safety
    /// Cancel safe: watches set are removed when dropped.
    pub(super) async fn arm(
        client: &Client,
        node: &str,
        own: Option<Armed>,
        blocker: &str,
        signals: bool,
    ) -> Result<Box<HandOff>> {
        let states = client.state_watcher();
        let watch_blocker = watch_blocker(client, blocker);
        let watch_own = async {
            match own {
                Some(own) => Ok(Some(own)),
                None => watch_absent(client, node, false).await,
            }
        };
        let watch_signal = async {
            match signals {
                // Someone made it already: it proves nothing.
                true => watch_absent(client, &signal(blocker), true).await,
                false => Ok(None),
            }
        };
        let (watched, others) = tokio::join!(watch_blocker, async {
            tokio::try_join!(watch_own, watch_signal)
        });
        let blocker_watch = watched?;
        debug!(
            node,
            blocker,
            there = blocker_watch.is_some(),
            "watching the blocker"
        );
        Ok(Box::new(match others {
            Ok((own, signal)) => HandOff {
                blocker: blocker_watch,
                states: Some(states),
                own,
                signal,
                signalled: false,
                reconnected: false,
            },
            Err(_) => HandOff {
                blocker: blocker_watch,
                states: None,
                own: None,
                signal: None,
                signalled: false,
                reconnected: true,
            },
        }))
    }

    /// Waits until the blocker at `blocker` is gone or our own node is deleted, hearing
    /// everything about our own node, the signal and the connection in the order the
    /// servers sent it, and records what it says. A write into the blocker is someone's
    /// write, not a departure: it is watched again. Once the blocker is gone, what was
    /// heard before decides whether we hold without a request (the rule:
    /// [`decide::taken`]).
    ///
    /// zookeeper-client hands one session's notifications to their watchers in the order
    /// the servers sent them, so when the blocker's notification is ready, every earlier
    /// one is ready too: [`poll_heard`](Self::poll_heard) takes them first.
    ///
    /// Its future keeps no more than a few references while it waits (the watches are
    /// the hand-off's own): a waiting acquisition stores it, so it needs no box.
    ///
    /// # Notable errors
    /// * [`Error::SessionExpired`] or [`Error::Closed`] if the session ended; as
    ///   [`retry`] when the blocker is watched again.
    ///
    /// # Cancel safety
    /// Cancel safe: what was heard stays recorded, the watches set.
    pub(super) async fn hear(&mut self, client: &Weak<Client>, blocker: &str) -> Result<Heard> {
        loop {
            let event = match std::future::poll_fn(|cx| self.poll_heard(cx)).await {
                Sent::Blocker(event) => event,
                Sent::OwnDeleted => return Ok(Heard::OwnDeleted),
                Sent::BlockerGone => break,
            };
            self.blocker = None;
            match event.event_type {
                EventType::NodeDeleted => break,
                EventType::Session => return Err(terminal(event.session_state)),
                other => debug!(%blocker, ?other, "blocker changed but may be there"),
            }
            // A client that is gone was replaced after its session expired (a closed
            // session ends the wait before this is reached).
            let client = client.upgrade().ok_or(Error::SessionExpired)?;
            // Boxed: a write into the blocker is rare, and takes room only while it is
            // watched again (`lock()`: 648 bytes, 1,040 unboxed).
            self.blocker = Box::pin(watch_blocker(&client, blocker)).await?;
        }
        let taken = decide::taken(!self.reconnected, self.own.is_some(), self.signalled);
        debug!(?self, taken, "blocker gone; what was heard");
        Ok(match taken {
            true => Heard::Taken,
            false => Heard::BlockerGone,
        })
    }

    /// One look at what the servers sent, in the order they sent it: a blocker that is
    /// not watched is gone; else our own node's notification (its deletion ends the
    /// hearing; a write only spends its watch), then the signal's, then the connection's
    /// state, then the blocker's notification. What it hears stays recorded.
    fn poll_heard(&mut self, cx: &mut Context<'_>) -> Poll<Sent> {
        let Some(watch) = self.blocker.as_mut() else {
            return Poll::Ready(Sent::BlockerGone);
        };
        if let Some(event) = fired(&mut self.own, cx) {
            match event.event_type {
                EventType::NodeDeleted => return Poll::Ready(Sent::OwnDeleted),
                // A write: the watch is spent, and our node no longer known to exist.
                other => debug!(?other, "our node changed"),
            }
        }
        if let Some(event) = fired(&mut self.signal, cx) {
            self.signalled = event.event_type == EventType::NodeCreated;
        }
        if !self.reconnected {
            self.reconnected = self.states.as_mut().is_some_and(changed);
        }
        watch.as_mut().poll(cx).map(Sent::Blocker)
    }

    /// The watch on our own node, if it is still set.
    pub(super) fn into_own(self) -> Option<Armed> {
        self.own
    }
}

/// The event of `watch` if it fired, which also unsets it; `None` (and woken by `cx` once
/// it fires) if it did not, or is not set.
fn fired(watch: &mut Option<Armed>, cx: &mut Context<'_>) -> Option<WatchedEvent> {
    let event = match watch.as_mut()?.as_mut().poll(cx) {
        Poll::Ready(event) => event,
        Poll::Pending => return None,
    };
    *watch = None;
    Some(event)
}

/// Whether the connection's state changed since `states` last looked. It registers no
/// waker: a change matters only once a notification is heard, and zookeeper-client
/// publishes it before it sends the watches again or hears anything on the next connection.
fn changed(states: &mut StateWatcher) -> bool {
    let changed = std::pin::pin!(states.changed());
    changed
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_ready()
}

/// Sets a data watch on the blocker at `path`: `None` if it is gone. A data watch, not an
/// exists watch, because servers that filter notifications by ACL (ZooKeeper 3.8 among
/// them) never notify a session about a node it may not read: an exists watch on such a
/// blocker (a `CreatorOnly` node of another identity) would wait forever, where reading it
/// is refused at once.
///
/// # Notable errors
/// * [`Error::NoAuth`] (naming the blocker) if the session may not read the blocker.
/// * As [`retry`].
async fn watch_blocker(client: &Client, path: &str) -> Result<Option<Armed>> {
    let read = retry(client, || async {
        match client.get_and_watch_data(path).await {
            Ok((_, _, watcher)) => Ok(Some(armed(watcher))),
            Err(zookeeper_client::Error::NoNode) => Ok(None),
            Err(err) => Err(err),
        }
    });
    read.await.map_err(|err| match err {
        Error::ZooKeeper(err) => Error::at(path, err),
        other => other,
    })
}

/// Sets an exists watch on `path`: `None` unless it exists (`absent`: unless it does not),
/// the watch then being dropped.
async fn watch_absent(client: &Client, path: &str, absent: bool) -> Result<Option<Armed>> {
    let (stat, watcher) = retry(client, || client.check_and_watch_stat(path)).await?;
    Ok((stat.is_none() == absent).then(|| armed(watcher)))
}
