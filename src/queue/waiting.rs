//! Waiting to be first: watch the blocker, and when it is gone confirm our own node and
//! learn, in one request, whether anyone can still be ahead. Waiting for a crowded root to
//! thin out: list it with a child watch until few enough are left.

use tracing::{debug, warn};
use zookeeper_client::{Client, EventType, MultiReadResult};

use super::handoff::{armed, Armed, HandOff};
use super::leaving::covers;
use super::order::{sequence, Ahead};
use super::{Contender, Place, Wait};
use crate::error::{Error, Result};
use crate::session::{reconnected, retry, terminal};

/// How a wait to be first ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// First (for [`Blockers::Crowd`](super::Blockers::Crowd): among few enough), with the
    /// own node known to exist.
    First,
    /// The deadline passed first; the contender keeps its place.
    Late,
    /// The contender's node is gone, deleted by someone. It is disowned; enter again to
    /// contend.
    Evicted,
    /// The contender's session expired, and its node with it. It is disowned; enter again
    /// (on the new session) to contend.
    Expired,
}

/// How waiting on a blocker ended.
enum Gone {
    /// It left, and what was heard says that we are first, with our node there.
    Heard,
    /// Our own node was heard to be gone.
    Evicted,
    /// It left; look whether we are first. With the zxid that created it, if it was still
    /// there when watched.
    Left(Option<i64>),
}

/// What one look after the blocker left says.
enum Look {
    First,
    Unknown,
    Evicted,
}

impl Contender {
    /// Waits until this contender is first, `wait`'s deadline passes, or its node is gone.
    ///
    /// # Notable errors
    /// * [`Error::Closed`] if the session was closed.
    /// * [`Error::ConnectionLoss`] if a request's outcome stayed unknown (see
    ///   [`retry`](crate::session::retry)).
    ///
    /// # Cancel safety
    /// Cancel safe: the contender keeps its place and its blocker.
    pub(crate) async fn wait_first(&mut self, wait: Wait) -> Result<Turn> {
        // Closing the session drops its client, which ends the watches with a session
        // event: no wait of its own is needed for it (it would cost every waiter room).
        // The turn first: a contender that is first holds even with its deadline passed.
        let waited = tokio::select! {
            biased;
            turn = self.wait_until_first() => turn,
            () = wait.passed() => Ok(Turn::Late),
        };
        match waited {
            Ok(turn) => Ok(turn),
            Err(err) => self.failed(err),
        }
    }

    /// For a contender that held until its connection was suspended: once connected again,
    /// whether its node is still there. If it is, it is still first (no one can have come
    /// ahead of it).
    ///
    /// # Notable errors
    /// As [`wait_first`](Self::wait_first).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn still_first(&mut self) -> Result<Turn> {
        let session = self.session.clone();
        let exists = async {
            let client = self.client()?;
            reconnected(&client).await?;
            retry(&client, || client.check_stat(&self.node)).await
        };
        let exists = tokio::select! {
            biased;
            () = session.closed() => Err(Error::Closed),
            exists = exists => exists,
        };
        match exists {
            Ok(Some(_)) if self.is_first() => Ok(Turn::First),
            Ok(_) => Ok(self.evicted()),
            Err(err) => self.failed(err),
        }
    }

    /// Runs `work` (requests on the contender's client) unless the session is closed first:
    /// then [`Error::Closed`] at once, and the client `work` kept is let go, so that a
    /// request waiting for a connection never keeps a closed session open.
    ///
    /// # Cancel safety
    /// As `work`.
    async fn until_closed<T>(
        &self,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        tokio::select! {
            biased;
            () = self.session.closed() => Err(Error::Closed),
            done = work => done,
        }
    }

    /// A session that expired under a waiting contender took its node along.
    fn failed(&mut self, err: Error) -> Result<Turn> {
        match err {
            Error::SessionExpired => {
                warn!(node = %self.node, "session expired; our node went with it");
                self.armed = false;
                Ok(Turn::Expired)
            }
            err => Err(err),
        }
    }

    async fn wait_until_first(&mut self) -> Result<Turn> {
        loop {
            let handoff = self.handoff.take();
            let (blocker, blocker_first) = match &self.place {
                Place::First => {
                    self.handoff = handoff;
                    return Ok(Turn::First);
                }
                Place::Crowded(_) => {
                    if !Box::pin(self.thinned()).await? {
                        return Ok(self.evicted());
                    }
                    continue;
                }
                Place::Behind {
                    blocker,
                    blocker_first,
                } => (blocker, *blocker_first),
            };
            let (gone, handoff) = self.gone(blocker, handoff).await?;
            self.handoff = handoff;
            let created = match gone {
                Gone::Heard => {
                    debug!(node = %self.node, "blocker gone; first, as heard without a request");
                    self.place = Place::First;
                    continue;
                }
                Gone::Evicted => return Ok(self.evicted()),
                Gone::Left(created) => created,
            };
            // Boxed, here and below: what runs after a wake-up takes no room while waiting.
            let look = Box::pin(self.look_after(created, blocker_first)).await?;
            match look {
                Look::First => {
                    debug!(node = %self.node, "blocker gone; first");
                    self.place = Place::First;
                }
                Look::Unknown if Box::pin(self.look_again()).await? => {}
                Look::Unknown | Look::Evicted => return Ok(self.evicted()),
            }
        }
    }

    fn evicted(&mut self) -> Turn {
        warn!(node = %self.node, "our node is gone; we are out of the queue");
        self.armed = false;
        Turn::Evicted
    }

    /// Resolves once the node at `blocker` is gone: heard to be a hand-off to us
    /// ([`HandOff::taken`]), or to be looked into (with the zxid that created the blocker,
    /// `None` if it was gone before it could be watched); or once our own node is heard to
    /// be gone. A data change is someone's write, not a departure: the node is watched
    /// again. The hand-off's watches (`handoff`: ours, kept from an earlier blocker) are set
    /// with the blocker's, in the same round trip.
    async fn gone(
        &self,
        blocker: &str,
        handoff: Option<Box<HandOff>>,
    ) -> Result<(Gone, Option<Box<HandOff>>)> {
        let own = handoff.and_then(|handoff| handoff.into_own());
        let client = self.client()?;
        let arming = HandOff::arm(&client, &self.node, own, blocker);
        // Boxed: setting the watches takes no room while waiting on them.
        let (watched, handoff) =
            Box::pin(self.until_closed(async { Ok(tokio::join!(self.watch(blocker), arming)) }))
                .await?;
        drop(client);
        // One that could not be set only costs a request after the blocker left.
        let mut handoff = handoff.ok();
        let mut watched = watched?;
        let mut created = None;
        while let Some((watcher, czxid)) = watched {
            created = Some(czxid);
            let heard = match handoff.as_mut() {
                Some(handoff) => tokio::select! {
                    biased;
                    () = handoff.own_deleted() => None,
                    event = watcher => Some(event),
                },
                None => Some(watcher.await),
            };
            let Some(event) = heard else {
                return Ok((Gone::Evicted, handoff));
            };
            match event.event_type {
                EventType::NodeDeleted => break,
                EventType::Session => return Err(terminal(event.session_state)),
                other => debug!(%blocker, ?other, "blocker changed but may be there"),
            }
            // Boxed: setting the watch takes no room while waiting on it.
            watched = Box::pin(self.until_closed(self.watch(blocker))).await?;
        }
        let gone = match handoff.as_mut().is_some_and(|handoff| handoff.taken()) {
            true => Gone::Heard,
            false => Gone::Left(created),
        };
        Ok((gone, handoff))
    }

    /// Sets a data watch on the node at `path`; with the zxid that created it, or `None` if
    /// it does not exist.
    async fn watch(&self, path: &str) -> Result<Option<(Armed, i64)>> {
        let client = self.client()?;
        match retry(&client, || client.get_and_watch_data(path)).await {
            Ok((_, stat, watcher)) => {
                debug!(node = %self.node, blocker = %path, "watching the blocker");
                Ok(Some((armed(watcher), stat.czxid)))
            }
            Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// After the blocker (created at zxid `created`, if known) left: reads our own node
    /// and the root's hand-off mark in one request. First if our node exists and the
    /// blocker was first, or the mark covers it.
    async fn look_after(&self, created: Option<i64>, blocker_first: bool) -> Result<Look> {
        let (root, _) = self.root_and_name();
        let results = self
            .until_closed(async {
                let client = self.client()?;
                retry(&client, || read_both(&client, root, &self.node)).await
            })
            .await?;
        let [mark, own] = results.as_slice() else {
            return Err(Error::ZooKeeper(zookeeper_client::Error::UnexpectedError(
                "a read of two nodes did not answer twice".into(),
            )));
        };
        if !matches!(own, MultiReadResult::Data { .. }) {
            return Ok(Look::Evicted);
        }
        let left_first = match (mark, created) {
            (MultiReadResult::Data { data, .. }, Some(created)) => covers(data, created),
            _ => false,
        };
        Ok(if blocker_first || left_first {
            Look::First
        } else {
            Look::Unknown
        })
    }

    /// Lists the root to learn who blocks us now, after a blocker of unknown place left;
    /// `false` if our own node is not there.
    async fn look_again(&mut self) -> Result<bool> {
        let (root, own) = self.root_and_name();
        let children = self
            .until_closed(async {
                let client = self.client()?;
                retry(&client, || client.list_children(root)).await
            })
            .await?;
        if !children.iter().any(|child| child == own) {
            return Ok(false);
        }
        let seq = sequence(own).unwrap_or_default();
        let ahead = Ahead::of(&children, seq, self.blocks);
        debug!(node = %self.node, ahead = ahead.count, "blocker left; looked again");
        // Not crowded: a contender that holds by count has no blocker to look after.
        self.place = Place::of(root, &ahead, None);
        Ok(true)
    }

    /// Lists the root with a child watch until it has few enough children to hold (then
    /// `true`, with our node in the listing) or our node is not among them (`false`). Every
    /// notification is only a reason to list again; the watch goes with the last listing.
    async fn thinned(&mut self) -> Result<bool> {
        let Place::Crowded(max) = self.place else {
            return Ok(true);
        };
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let (root, own) = self.root_and_name();
        let holds = loop {
            let (children, watcher) = self
                .until_closed(async {
                    let client = self.client()?;
                    retry(&client, || client.list_and_watch_children(root)).await
                })
                .await?;
            if !children.iter().any(|child| child == own) {
                break false;
            }
            if children.len() <= max {
                debug!(node = %self.node, children = children.len(), "few enough; holds");
                break true;
            }
            debug!(node = %self.node, children = children.len(), "crowded; watching the root");
            let event = watcher.changed().await;
            if event.event_type == EventType::Session {
                return Err(terminal(event.session_state));
            }
        };
        if holds {
            self.place = Place::First;
        }
        Ok(holds)
    }
}

/// Reads the nodes `root` and `node` in one request.
fn read_both<'a>(
    client: &'a Client,
    root: &str,
    node: &str,
) -> impl std::future::Future<
    Output = std::result::Result<Vec<MultiReadResult>, zookeeper_client::Error>,
> + 'a {
    let mut reader = client.new_multi_reader();
    let commit = reader
        .add_get_data(root)
        .and_then(|()| reader.add_get_data(node))
        .map(|()| reader.commit());
    async move { commit?.await }
}
