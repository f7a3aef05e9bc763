//! The task behind [`SharedCounter::watch`](super::SharedCounter::watch): it keeps a data
//! watch on the counter's node (an exists watch while the node is missing), reads the node
//! again each time the watch fires, and publishes what it read. When the connection goes
//! down it publishes at once that the value may be stale, and reads again once the
//! connection is back (on the new session after an expiry), whether or not the watch
//! fired: a change made meanwhile is never missed, and never silently.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, debug_span, Instrument};
use zookeeper_client::{Client, Error as Zk, OneshotWatcher};

use super::{decode, versioned, SharedCounter, Versioned, MISSING};
use crate::error::{Error, Result};
use crate::session::{connected_now, disconnected, reconnected};

/// The pause after a read that failed for another reason than the connection; it doubles
/// up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What a [`SharedCounter::watch`](super::SharedCounter::watch) receiver holds: the value
/// last read, and whether it matches the servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CounterValue {
    /// The value last read, with its version; `None` while the node is missing or holds no
    /// counter. While the state is [`MayBeStale`](CounterState::MayBeStale) or
    /// [`Closed`](CounterState::Closed), the last value read before.
    pub last: Option<Versioned>,
    /// Whether `last` matches the servers.
    pub state: CounterState,
}

impl CounterValue {
    /// The value, if it matches the servers (state [`Current`](CounterState::Current)).
    pub fn current(&self) -> Option<i32> {
        match self.state {
            CounterState::Current => self.last.map(|last| last.value),
            _ => None,
        }
    }
}

/// Whether a [`CounterValue`] matches the servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CounterState {
    /// Read since the last change, and watched: a later change is published once the
    /// servers notify it (ZooKeeper reads are sequentially consistent: a value trails the
    /// servers by one notification at most).
    Current,
    /// The connection is down, or a new session is being made: the value may be stale. It
    /// is read again once the connection is back.
    MayBeStale,
    /// The node does not exist (someone deleted it); watched for its creation. The next
    /// [`get`](super::SharedCounter::get) or [`add`](super::SharedCounter::add) creates it
    /// with the seed; a watch never writes.
    Missing,
    /// The node holds data of `len` bytes, not a counter; watched for a change.
    NotACounter {
        /// The length of the node's data.
        len: usize,
    },
    /// The session was closed: the value is no longer kept.
    Closed,
}

/// Reads the counter with a watch (creating it if missing) and starts the task that keeps
/// it; the receiver of what the task publishes.
///
/// # Notable errors
/// As [`SharedCounter::get`](super::SharedCounter::get).
pub(super) async fn start(counter: SharedCounter) -> Result<watch::Receiver<CounterValue>> {
    let span = debug_span!("zk.counter.watch", path = %counter.path);
    let client = counter.session.connected()?;
    let (value, watcher) = async {
        match counter.read(&client).await {
            // Published as such.
            Ok(_) | Err(Error::NotACounter { .. }) => {}
            Err(err) => return Err(err),
        }
        look(&client, &counter.path).await
    }
    .instrument(span.clone())
    .await?;
    let (published, receiver) = watch::channel(value);
    let session = counter.session.clone();
    session.spawn(keep(counter, published, client, watcher).instrument(span));
    Ok(receiver)
}

/// Reads the node with a data watch (an exists watch if it is missing): what to publish,
/// and the watch.
///
/// # Notable errors
/// As `get_data`; `NoNode` if it was made and deleted again between the looks, three times.
async fn look(client: &Client, path: &str) -> Result<(CounterValue, OneshotWatcher)> {
    for _ in 0..MISSING {
        match client.get_and_watch_data(path).await {
            Ok((data, stat, watcher)) => {
                let value = match decode(path, &data) {
                    Ok(value) => current(versioned(value, &stat)),
                    Err(_) => lacking(CounterState::NotACounter { len: data.len() }),
                };
                return Ok((value, watcher));
            }
            Err(Zk::NoNode) => match client.check_and_watch_stat(path).await {
                Ok((None, watcher)) => return Ok((lacking(CounterState::Missing), watcher)),
                // Made meanwhile: read it.
                Ok((Some(_), _)) => continue,
                Err(err) => return Err(Error::at(path, err)),
            },
            Err(err) => return Err(Error::at(path, err)),
        }
    }
    Err(Error::at(path, Zk::NoNode))
}

fn current(last: Versioned) -> CounterValue {
    CounterValue {
        last: Some(last),
        state: CounterState::Current,
    }
}

fn lacking(state: CounterState) -> CounterValue {
    CounterValue { last: None, state }
}

/// Publishes `state`, keeping the last value read.
fn mark(published: &watch::Sender<CounterValue>, state: CounterState) {
    published.send_if_modified(|value| {
        let changed = value.state != state;
        value.state = state;
        changed
    });
}

/// Reads again each time the watch fires or the connection goes down, until no receiver
/// is left or the session is closed.
async fn keep(
    counter: SharedCounter,
    published: watch::Sender<CounterValue>,
    mut client: Arc<Client>,
    mut watcher: OneshotWatcher,
) {
    loop {
        tokio::select! {
            biased;
            () = published.closed() => return,
            () = counter.session.closed() => return mark(&published, CounterState::Closed),
            event = watcher.changed() => {
                debug!(?event.event_type, ?event.session_state, "counter watch fired");
            }
            () = disconnected(&client) => debug!("connection down"),
        }
        let read = tokio::select! {
            biased;
            () = published.closed() => return,
            () = counter.session.closed() => None,
            read = read_again(&counter, &published) => read,
        };
        let Some(read) = read else {
            return mark(&published, CounterState::Closed);
        };
        (client, watcher) = read;
    }
}

/// Reads the node with a watch on the live session once it is connected, publishing that
/// the value may be stale while it is not; `None` once the session is closed.
async fn read_again(
    counter: &SharedCounter,
    published: &watch::Sender<CounterValue>,
) -> Option<(Arc<Client>, OneshotWatcher)> {
    let mut pause = FIRST_PAUSE;
    loop {
        let Ok(client) = counter.session.live().await else {
            return None;
        };
        if connected_now(&client).is_err() {
            mark(published, CounterState::MayBeStale);
            // Fails when the session ended: the live session is then another one.
            if reconnected(&client).await.is_err() {
                continue;
            }
        }
        match look(&client, &counter.path).await {
            Ok((value, watcher)) => {
                published.send_if_modified(|old| std::mem::replace(old, value) != value);
                return Some((client, watcher));
            }
            Err(Error::Closed) => return None,
            Err(Error::ConnectionLoss | Error::SessionExpired | Error::Disconnected) => {
                mark(published, CounterState::MayBeStale);
            }
            Err(err) => {
                debug!(%err, ?pause, "cannot read the counter; again after a pause");
                mark(published, CounterState::MayBeStale);
                drop(client);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}
