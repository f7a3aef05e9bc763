//! The server side: the root's children, signal paths, watches, and each session's queue
//! of replies and notifications.
//!
//! A request is served as one step, between any two steps of other sessions; its reply,
//! and the notifications of the changes it makes, go at the end of the queues of the
//! sessions concerned. A transaction applies all its operations in that one step, and its
//! notifications reach each watching session in the order of its operations.

use super::{Kind, World};

/// A sequence number (index of a bit in a listing).
pub(super) type Seq = u8;

/// A path under the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Path {
    /// A contender node.
    Node(Seq),
    /// The left-first signal of a contender node (`<node>.left-first`).
    Signal(Seq),
    /// The root's children (a child watch).
    Children,
}

/// What a notification says happened at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Event {
    Created,
    Deleted,
    Changed,
}

/// A request, as sent by a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Req {
    /// Create an EPHEMERAL_SEQUENTIAL contender node.
    Create,
    /// List the root.
    List,
    /// Read a contender node with a data watch.
    Watch(Seq),
    /// List the root with a child watch.
    ListWatch,
    /// Exists, with a watch if `true` (kept only when it can say something: on a node that
    /// exists, on a signal path that does not).
    Exists(Path, bool),
    /// Delete a node; if `true`, in one transaction after creating and deleting its signal.
    Remove(Seq, bool),
}

/// A reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Reply {
    Created(Seq),
    /// The children, as a bit set of sequence numbers.
    Listed(u32),
    /// Whether the path exists.
    Found(bool),
    /// The node is gone (deleted now, or it was already).
    Removed,
}

/// What a server sends to a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Msg {
    Reply(Reply),
    Notification(Path, Event),
    /// Not sent: marks where the session's own node was deleted, for invariant I1. Messages
    /// before it were sent while the node existed.
    Ghost,
}

/// A watch of one session on one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Watch {
    pub(super) path: Path,
    /// The node was written since the watch was set, and the client has not heard it (the
    /// notification is on its way, or was lost with the connection): the server answers
    /// for it on reconnection. Data versions need not be kept otherwise.
    pub(super) written: bool,
    /// Set at the server: the next change of the path fires it.
    pub(super) server: bool,
    /// Known to the client (the reply that set it was delivered) and not yet heard firing:
    /// set again on reconnection.
    pub(super) client: bool,
}

/// A change of the server's tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    Create(Path),
    Delete(Path),
    Write(Seq),
}

impl Change {
    /// Whether a watch on `path` fires for it.
    fn fires(self, path: Path) -> bool {
        match self {
            Change::Create(changed) | Change::Delete(changed) => {
                changed == path || path == Path::Children
            }
            Change::Write(seq) => path == Path::Node(seq),
        }
    }

    fn event(self, path: Path) -> Event {
        match self {
            _ if path == Path::Children => Event::Changed,
            Change::Create(_) => Event::Created,
            Change::Delete(_) => Event::Deleted,
            Change::Write(_) => Event::Changed,
        }
    }
}

/// The tree under the root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Server {
    /// The contender nodes that exist, as a bit set of sequence numbers.
    pub(super) live: u32,
    /// The contender (index) that created each sequence number; [`GONE`] once deleted, so
    /// that states differing only in who owned a deleted node are one.
    pub(super) owner: Vec<u8>,
    /// What kind of contender made each sequence number, deleted or not: its name says so
    /// (see [`names`](super::names)).
    pub(super) made_by: Vec<Kind>,
    /// Signal paths on which a node exists (made by someone else than a leaving contender).
    pub(super) forged: u32,
}

/// The owner of a deleted node.
pub(super) const GONE: u8 = u8::MAX;

pub(super) fn bit(seq: Seq) -> u32 {
    1 << seq
}

impl Server {
    pub(super) fn is_live(&self, seq: Seq) -> bool {
        self.live & bit(seq) != 0
    }

    pub(super) fn exists(&self, path: Path) -> bool {
        match path {
            Path::Node(seq) => self.is_live(seq),
            Path::Signal(seq) => self.forged & bit(seq) != 0,
            Path::Children => true,
        }
    }

    fn create(&mut self, owner: usize, kind: Kind) -> Seq {
        let seq = Seq::try_from(self.owner.len()).unwrap_or(Seq::MAX);
        assert!(seq < 32, "the model makes at most 32 nodes");
        self.owner.push(u8::try_from(owner).unwrap_or(GONE));
        self.made_by.push(kind);
        self.live |= bit(seq);
        seq
    }
}

impl World {
    /// Serves the oldest request of contender `c` that the server has not served.
    pub(super) fn serve(&mut self, c: usize) {
        let client = &mut self.clients[c];
        let req = client.awaiting[client.awaiting.len() - usize::from(client.unserved)];
        client.unserved -= 1;
        let reply = match req {
            Req::Create => {
                let seq = self.server.create(c, self.clients[c].kind);
                self.apply(&[Change::Create(Path::Node(seq))]);
                Reply::Created(seq)
            }
            Req::List => Reply::Listed(self.server.live),
            Req::ListWatch => {
                self.set_watch(c, Path::Children);
                Reply::Listed(self.server.live)
            }
            Req::Watch(seq) => {
                let found = self.server.is_live(seq);
                if found {
                    self.set_watch(c, Path::Node(seq));
                }
                Reply::Found(found)
            }
            Req::Exists(path, watch) => {
                let found = self.server.exists(path);
                if watch && found == matches!(path, Path::Node(_)) {
                    self.set_watch(c, path);
                }
                Reply::Found(found)
            }
            Req::Remove(seq, signal) => {
                if self.server.is_live(seq) {
                    // A signal path someone made: the transaction fails, and the node is
                    // deleted without it.
                    let signal = signal && !self.server.exists(Path::Signal(seq));
                    let node = Change::Delete(Path::Node(seq));
                    if signal {
                        let path = Path::Signal(seq);
                        self.apply(&[Change::Create(path), Change::Delete(path), node]);
                    } else {
                        self.apply(&[node]);
                    }
                }
                Reply::Removed
            }
        };
        self.clients[c].inbox.push(Msg::Reply(reply));
    }

    fn set_watch(&mut self, c: usize, path: Path) {
        let watches = &mut self.clients[c].watches;
        match watches.iter_mut().find(|watch| watch.path == path) {
            Some(watch) => {
                watch.server = true;
                watch.written = false;
            }
            None => {
                watches.push(Watch {
                    path,
                    written: false,
                    server: true,
                    client: false,
                });
                watches.sort();
            }
        }
    }

    /// Applies `changes` in one step (a transaction), then tells every connected session
    /// what its watches saw, in the order of the changes.
    pub(super) fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            match *change {
                Change::Create(Path::Signal(seq)) => self.server.forged |= bit(seq),
                Change::Delete(Path::Signal(seq)) => self.server.forged &= !bit(seq),
                Change::Delete(Path::Node(seq)) => self.server.live &= !bit(seq),
                Change::Write(_) => {}
                // Made by `Server::create` already.
                Change::Create(Path::Node(_)) => {}
                Change::Create(Path::Children) | Change::Delete(Path::Children) => {
                    unreachable!("the root is not a child")
                }
            }
        }
        for (c, client) in self.clients.iter_mut().enumerate() {
            if !client.connected || !client.listening() {
                continue;
            }
            // Its node, even before the client learns its name.
            let own_deleted = changes.iter().any(|change| match change {
                Change::Delete(Path::Node(seq)) => {
                    usize::from(self.server.owner[usize::from(*seq)]) == c
                }
                _ => false,
            });
            if own_deleted && client.may_decide() {
                client.inbox.push(Msg::Ghost);
            }
            for change in changes {
                for watch in &mut client.watches {
                    if watch.server && change.fires(watch.path) {
                        let event = change.event(watch.path);
                        watch.server = false;
                        watch.written = event == Event::Changed;
                        client.inbox.push(Msg::Notification(watch.path, event));
                    }
                }
            }
        }
        // A disconnected client's watches: the server answers for them on reconnection.
        for client in &mut self.clients {
            if client.connected {
                continue;
            }
            for watch in &mut client.watches {
                watch.written |= changes.iter().any(|change| match (change, watch.path) {
                    (Change::Write(_), Path::Node(_)) | (_, Path::Children) => {
                        change.fires(watch.path)
                    }
                    _ => false,
                });
            }
        }
        for change in changes {
            if let Change::Delete(Path::Node(seq)) = change {
                self.server.owner[usize::from(*seq)] = GONE;
            }
        }
    }
}
