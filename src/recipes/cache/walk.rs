//! Reading the servers: a whole subtree (the resync's walk) or a batch of nodes, with many
//! requests in flight on one connection.
//!
//! The servers answer one session's requests in the order they were sent, so the replies
//! are awaited in that order: the first request sent is always the next one answered.
//! Pipelining only pays where the socket has `TCP_NODELAY` (the session sets it).

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tracing::{debug, debug_span, Instrument};
use zookeeper_client::{Client, Error as Zk, Stat};

use super::snapshot::Read;
use crate::error::{Error, Result};
use crate::path;

/// How many requests a walk keeps in flight.
const WINDOW: usize = 1024;

/// How many nodes a walk reads before it hands them on.
pub(super) const CHUNK: usize = 4096;

/// What a read of one node found, by path.
pub(super) type Found = Vec<(Arc<str>, Read)>;

type Reply<'a, T> = Pin<Box<dyn Future<Output = std::result::Result<T, Zk>> + Send + 'a>>;

/// A request of the walk, before it is sent.
enum Todo {
    Data(Arc<str>),
    Children(Arc<str>),
}

/// A request of the walk in flight.
enum Sent<'a> {
    Data(Arc<str>, Reply<'a, (Vec<u8>, Stat)>),
    Children(Arc<str>, Reply<'a, Vec<String>>),
}

impl Todo {
    fn send(self, client: &Client) -> Sent<'_> {
        match self {
            Todo::Data(path) => {
                let reply = client.get_data(&path);
                Sent::Data(path, Box::pin(reply))
            }
            Todo::Children(path) => {
                let reply = client.list_children(&path);
                Sent::Children(path, Box::pin(reply))
            }
        }
    }
}

/// Reads every node of the subtree at `root` (none if it does not exist) after a `sync`
/// (so that a server behind what this process saw before catches up first): each node's
/// data and stat, and the children of those that have some. Hands what it read to `take`,
/// [`CHUNK`] nodes at a time; returns the paths of every node found.
///
/// Not a snapshot of one moment: a node is read as it was when its request arrived; what
/// changes meanwhile is told by the cache's watch, set before the walk.
///
/// # Notable errors
/// * [`Error::ConnectionLoss`], [`Error::SessionExpired`], [`Error::Closed`] if the
///   connection broke: walk again once it is back.
/// * [`Error::NoAuth`] if the session may not read `root`'s children.
pub(super) async fn walk(
    client: &Client,
    root: &Arc<str>,
    mut take: impl FnMut(Found),
) -> Result<HashSet<Arc<str>>> {
    sync(client, root).await?;
    let mut todo = VecDeque::from([Todo::Data(root.clone())]);
    let mut in_flight = VecDeque::new();
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    loop {
        while in_flight.len() < WINDOW {
            let Some(next) = todo.pop_front() else { break };
            in_flight.push_back(next.send(client));
        }
        let Some(sent) = in_flight.pop_front() else {
            break;
        };
        match sent {
            Sent::Data(path, reply) => {
                let read = answered(client, &path, reply.await).await?;
                if let Some((_, stat)) = &read {
                    if stat.num_children > 0 {
                        todo.push_back(Todo::Children(path.clone()));
                    }
                    seen.insert(path.clone());
                }
                found.push((path, read));
            }
            Sent::Children(path, reply) => match reply.await {
                Ok(names) => todo.extend(
                    names
                        .iter()
                        .map(|name| Todo::Data(Arc::from(path::join(&path, name)))),
                ),
                // Deleted since its data was read: its children went first.
                Err(Zk::NoNode) => {}
                Err(Zk::NoAuth) if *path != **root => {
                    debug!(node = %path, "may not list the node's children: not cached");
                }
                Err(err) => return Err(Error::at(&path, err)),
            },
        }
        if found.len() >= CHUNK {
            take(std::mem::take(&mut found));
        }
    }
    take(found);
    Ok(seen)
}

/// Asks the servers for a `sync` of `root`: once it is answered, the server of `client`'s
/// connection has applied every write the quorum made before the sync was asked for, and
/// sent every notification of them before the answer.
///
/// # Notable errors
/// As [`walk`]: a sync cut off.
pub(super) async fn sync(client: &Client, root: &str) -> Result<()> {
    client
        .sync(root)
        .instrument(debug_span!("zk.cache.sync"))
        .await
        .map_err(|err| Error::at(root, err))
}

/// Reads the nodes at `paths`, every request sent before the first reply is awaited.
///
/// # Notable errors
/// As [`walk`].
pub(super) async fn read(client: &Client, paths: Vec<Arc<str>>) -> Result<Found> {
    let sent: Vec<_> = paths
        .into_iter()
        .map(|path| {
            let reply = client.get_data(&path);
            (path, reply)
        })
        .collect();
    let mut found = Vec::with_capacity(sent.len());
    for (path, reply) in sent {
        let read = answered(client, &path, reply.await).await?;
        found.push((path, read));
    }
    Ok(found)
}

/// What a data read of `node` found: `None` if it does not exist; its stat only (read
/// with an exists request, which needs no permission) if the session may not read it.
///
/// # Notable errors
/// As [`walk`].
async fn answered(
    client: &Client,
    node: &str,
    reply: std::result::Result<(Vec<u8>, Stat), Zk>,
) -> Result<Read> {
    match reply {
        Ok((data, stat)) => Ok(Some((Some(data), stat))),
        Err(Zk::NoNode) => Ok(None),
        Err(Zk::NoAuth) => {
            debug!(node, "may not read the node: its stat only");
            let stat = client
                .check_stat(node)
                .await
                .map_err(|err| Error::at(node, err))?;
            Ok(stat.map(|stat| (None, stat)))
        }
        Err(err) => Err(Error::at(node, err)),
    }
}
