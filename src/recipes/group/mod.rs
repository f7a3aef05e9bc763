//! Group membership: [`Group`], [`Membership`], [`Member`]; live views of a group's members
//! and of an election's leader. [`Group`]'s docs state what they promise.

mod membership;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info_span, Instrument};
use zookeeper_client::Client;

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::path;
use crate::queue::{is_contender_name, MAX_DATA};
use crate::recipes::view;
use crate::session::Session;

pub use membership::{Membership, Presence};

/// A wait that ends with the process, for a `wait` too long for the clock.
const FOREVER: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// A member of a group, as views see it: one node. A member that left and joined again
/// under the same id is another node: its `created` differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The member's id: its node's name.
    pub id: String,
    /// Its node's data, as last read; `None` if this session may not read the node (its
    /// ACL: [`NodeAcl::CreatorOnly`] of another user): such a member is listed without data.
    pub data: Option<Vec<u8>>,
    /// The zxid that created its node (as [`Membership::created`] says): the node's identity.
    pub created: u64,
}

/// A group on a path: its members are the nodes `<path>/<id>`.
///
/// # Semantics
///
/// * **A member** is the node `<path>/<id>`: EPHEMERAL, the member's data as its payload —
///   Apache Curator's `GroupMember` layout (a `PersistentNode` in EPHEMERAL mode under the
///   membership path), so Rust and Java services see one group.
/// * **It stays as long as the member wants it.** [`Group::join`] creates the node; the
///   [`Membership`] it returns keeps it: after the session expires it is made again, with
///   the same id and the data last set ([`Membership::set_data`]), on the session
///   [`Session`] renews itself into; deleted by someone, it is made again at once.
///   [`Membership::leave`] and dropping the membership delete it (in the background,
///   retried until it is gone or its session is over, as a lock's release).
/// * **One node, one member.** A node with the id that belongs to another live session is
///   never taken over: [`Group::join`] fails at once with [`Error::IdTaken`], and nothing
///   is created. (Curator's `PersistentNode` would write into it and share it; this recipe
///   does not.) [`Group::join_within`] waits, bounded, for such a node to go (a process
///   restarted at once, whose previous session the servers still keep): it waits for the
///   node's deletion, never takes it over. A node left by this membership's own previous
///   session (the servers have expired that session, but the server we talk to has not
///   applied the deletion yet) is waited for, then made again. If, while the membership
///   was away (expired), another session made the id its own, the membership does not
///   steal it back: its [`presence`](Membership::presence) turns [`Presence::Taken`], it
///   [`is_lost`](Membership::is_lost), and it never writes into or deletes that node.
/// * **No fenced writes.** A member's node is named by its id, a path any session may
///   create again, so the servers cannot prove that it is the node this membership made:
///   a [`Membership`] offers no fenced writes (its docs say why). Fence with a lock or a
///   leadership. A member writes only its own data into its own node
///   ([`Membership::set_data`], which says how close it comes to a fence).
/// * **Views.** [`Group::watch_members`] and
///   [`LeaderElection::watch_leader`](crate::LeaderElection::watch_leader) are
///   [`tokio::sync::watch`] receivers updated from ZooKeeper watches, never by polling. A
///   member is a node, not a name: a view shows each member's node ([`Member::created`]
///   tells one from another), and reads it again when it changes. The members view sets one
///   children watch on the group path and one data watch on each member's node (N members:
///   N + 1 watches per view, on its session); the leader view, one children watch on the
///   election path and one data watch on the leader's node. A data watch fires when the
///   node's data is set (Curator's `setThisData`, a leader's
///   [`proclaim`](crate::Leadership::proclaim)) and when the node is deleted — also when
///   another session then makes a node of the same name, during a connection blip included:
///   the servers fire it after the reconnect. Only the member whose watch fired is read
///   again (and new members).
/// * **Nodes the session may not read.** A member node whose ACL denies this session reading
///   it ([`NodeAcl::CreatorOnly`] of another user) is listed without data (`data` is `None`),
///   and does not stop the view or the listing. The servers tell a session nothing about a
///   node it may not read (they drop the notification, and the watch), so a view sets no
///   watch on it: it reads its stat again at each listing (when members join or leave), and
///   reads the member again when it is another node. For the same reason, a member whose
///   node's ACL is changed to deny this session reading it after it was read is shown as
///   last read for as long as its id is listed (a change of ACL fires no watch).
///
/// # How stale a view can be
///
/// While connected, a view trails the servers by one notification and one listing (plus one
/// read per new or changed member), and it is sequentially consistent, as every ZooKeeper
/// read: the server we talk to may trail the leader a little. A member that dies stays in
/// every view until the servers expire its session (its session timeout after it was last
/// heard). While the connection is **suspended**, nothing reaches the view: it keeps
/// showing the last state it saw (watch [`Session::events`] to know), and catches up as
/// soon as the connection is back (the servers tell about changes missed meanwhile) or,
/// after expiry, with a listing on the new session. So a view is stale by at most the time
/// the connection is down plus one round trip, on top of the member's own session timeout.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::Group;
///
/// let group = Group::new(&session, "/services/orders/members")?;
/// let me = group.join("replica-1", "10.0.0.7:8080").await?;
/// let mut members = group.watch_members().await?;
/// while members.changed().await.is_ok() {
///     let ids: Vec<String> = members.borrow().iter().map(|m| m.id.clone()).collect();
///     println!("members: {ids:?}");
/// }
/// me.leave().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Group {
    session: Session,
    root: Arc<str>,
    acl: NodeAcl,
}

impl Group {
    /// The group on `path`.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed.
    ///
    /// Nothing is sent to ZooKeeper.
    pub fn new(session: &Session, path: &str) -> Result<Group> {
        Ok(Group {
            session: session.clone(),
            root: Arc::from(path::validate_root(path)?),
            acl: session.node_acl(),
        })
    }

    /// The ACL of the nodes this group creates (member nodes, the group path and its
    /// parents where it makes them), instead of the session's.
    pub fn node_acl(mut self, acl: NodeAcl) -> Group {
        self.acl = acl;
        self
    }

    /// The group's path.
    pub fn path(&self) -> &str {
        &self.root
    }

    /// Joins as `id` with `data`: creates `<path>/<id>` and keeps it until the membership
    /// is left or dropped (re-created after session expiry). Waits for a live session.
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if `id` is not a node name ZooKeeper accepts (empty,
    ///   `.`, `..`, a `/`, a character it refuses), is named as a contender's node (see
    ///   [`check_name`]), or `data` is larger than a node holds (960 KiB here); nothing is
    ///   sent.
    /// * [`Error::IdTaken`] if the node exists and belongs to another live session (or is
    ///   persistent); nothing is created. A process that restarts under the same id sees
    ///   this until its previous session expires (its node goes with it):
    ///   [`join_within`](Self::join_within) waits for that.
    /// * [`Error::NoAuth`] if the ACL of the path denies creating the node.
    /// * [`Error::ConnectionLoss`] if the connection broke with the create in flight, three
    ///   times over.
    /// * [`Error::Closed`] if the session was closed (also while waiting for the connection).
    ///
    /// # Cancel safety
    /// Cancel safe: a node created for a dropped `join()` is deleted in the background.
    pub async fn join(&self, id: &str, data: impl Into<Vec<u8>>) -> Result<Membership> {
        self.join_until(id, data.into(), None).await
    }

    /// Joins as [`join`](Self::join) does, but if `<path>/<id>` belongs to another session,
    /// waits up to `wait` (from the call) for that node to go, then joins: for a process
    /// that restarts at once under its id (a pod after a crash) while the servers still
    /// keep its previous session, and that session's node, until it expires.
    ///
    /// ZooKeeper cannot be asked whether a session is alive or going away: a session is
    /// expired by the servers a session timeout after they last heard from it, and until
    /// then its node is a member's like any other. So the join waits for the node's
    /// deletion, with a watch on it (no polling), and never deletes, writes or takes over
    /// the node: a live member keeps its id, and the join fails with [`Error::IdTaken`]
    /// once `wait` has passed. A crashed process's node goes at most its session timeout
    /// (plus the servers' tick) after the crash: a `wait` a little longer than the session
    /// timeout the previous process ran with lets a restart at once join. If another
    /// joiner makes the node first once it went, the join waits for that one too, within
    /// the same `wait`; so it does for a node of another membership of this session (a
    /// dropped one's delete is under way; a live one keeps it).
    ///
    /// # Notable errors
    /// As [`join`](Self::join), but:
    /// * [`Error::IdTaken`] if the node still belongs to another session once `wait` has
    ///   passed, or is persistent (it never goes by itself: at once); nothing is created,
    ///   and the watch set on the node is removed.
    ///
    /// # Cancel safety
    /// Cancel safe: a node created for a dropped `join_within()` is deleted in the
    /// background; a watch set on another's node is removed.
    pub async fn join_within(
        &self,
        id: &str,
        data: impl Into<Vec<u8>>,
        wait: Duration,
    ) -> Result<Membership> {
        let now = Instant::now();
        let until = now.checked_add(wait).unwrap_or(now + FOREVER);
        self.join_until(id, data.into(), Some(until)).await
    }

    /// Joins as `id` with `data`, waiting for another session's node until `until`, if
    /// given (see [`join_within`](Self::join_within)).
    async fn join_until(
        &self,
        id: &str,
        data: Vec<u8>,
        until: Option<Instant>,
    ) -> Result<Membership> {
        let node = self.member_node(id)?;
        check_data(&data)?;
        let span = info_span!("zk.group.join", path = %self.root, id);
        Membership::join(self, node, id, data, until)
            .instrument(span)
            .await
    }

    /// The members now, by id; works without joining. A member whose node this session may
    /// not read is listed without data (see [`Group`]). Sets no watch.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read (not for a member's node).
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down:
    ///   it does not wait.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn members(&self) -> Result<Vec<Member>> {
        let client = self.session.connected()?;
        let children = match client.list_children(&self.root).await {
            Err(zookeeper_client::Error::NoNode) => Vec::new(),
            listed => listed.map_err(|err| Error::at(&self.root, err))?,
        };
        view::View::read(&mut MembersView::default(), &client, &self.root, children)
            .instrument(info_span!("zk.group.members", path = %self.root))
            .await
    }

    /// The members as they change, by id: a receiver that starts with the members now and
    /// is updated from one children watch and one data watch per member (see [`Group`] for
    /// how stale it can be): members that join or leave, data set into a member's node, a
    /// member's node replaced by another of the same name. A member whose node this session
    /// may not read is listed without data. The
    /// view follows the session across reconnections and expiry, and stops when
    /// every receiver is dropped or the session is closed (then `changed()` fails).
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read (not for a member's node).
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down
    ///   now.
    ///
    /// # Cancel safety
    /// Cancel safe: a view started for a dropped call stops once its first listing is
    /// answered.
    pub async fn watch_members(&self) -> Result<watch::Receiver<Vec<Member>>> {
        let span = info_span!("zk.group.watch", path = %self.root);
        view::start(
            &self.session,
            self.root.clone(),
            MembersView::following(),
            span,
        )
        .await
    }

    /// `<path>/<id>` if `id` can be a member's id (see [`check_name`]).
    fn member_node(&self, id: &str) -> Result<String> {
        match check_name(&self.root, id) {
            Err(Error::InvalidPath { reason, .. }) => Err(Error::InvalidArgument(format!(
                "member id {id:?}: {reason}"
            ))),
            checked => checked.map(|()| path::join(&self.root, id)),
        }
    }
}

/// Checks `name` as a member's id in the group on `parent`, by the rule
/// [`Group::join`] checks it with, without a session: a program can refuse a bad id
/// before it connects. Nothing is sent.
///
/// An id is one node's name, and never one that a lock, an election or a semaphore names
/// its contenders' nodes with (`_c_<uuid>-lock-0000000001`, kazoo's
/// `<hex>__lock__0000000001`): [`revoke`](crate::revoke) would take the member's node for
/// a contender's and overwrite its data.
///
/// # Notable errors
/// * [`Error::InvalidPath`] if `parent` is no recipe root (see
///   [`check_path`](crate::check_path)), or `name` is empty, `.` or `..`, holds a `/` or a
///   character ZooKeeper rejects, makes the path longer than 32 KiB, or is named as a
///   contender's node; its reason says which.
pub fn check_name(parent: &str, name: &str) -> Result<()> {
    path::check_name(parent, name)?;
    match is_contender_name(name) {
        true => Err(Error::InvalidPath {
            path: path::join(parent, name),
            reason: "the name is a contender's node name (a lock's, an election's): \
                     revoke would ask it",
        }),
        false => Ok(()),
    }
}

fn check_data(data: &[u8]) -> Result<()> {
    match data.len() > MAX_DATA {
        true => Err(Error::InvalidArgument(format!(
            "member data is {} bytes; a node holds at most {MAX_DATA}",
            data.len()
        ))),
        false => Ok(()),
    }
}

/// The members view: ids and data, keyed by node. Following, it sets a data watch on each
/// member's node it may read and reads a member again when its watch fires: its data was
/// set, or its node was deleted (and maybe made again by another session); a member it may
/// not read is looked at again (its stat) at each listing. A one-off listing sets none.
#[derive(Default)]
struct MembersView {
    known: BTreeMap<String, Member>,
    /// The node watches, when following.
    watches: Option<view::NodeWatches>,
    /// Members whose watch fired: read again at the next listing.
    stale: BTreeSet<String>,
}

impl MembersView {
    fn following() -> MembersView {
        MembersView {
            watches: Some(view::NodeWatches::default()),
            ..MembersView::default()
        }
    }

    /// Marks stale each known member whose node this session may not read and that is gone
    /// or is another node now (its stat tells: an exists request needs no permission; the
    /// requests are sent back to back). No watch tells about such a node: the servers drop
    /// its notifications for this session.
    ///
    /// # Notable errors
    /// As `exists`.
    async fn look_at_unreadable(&mut self, client: &Client, root: &str) -> Result<()> {
        let sent: Vec<_> = self
            .known
            .values()
            .filter(|m| m.data.is_none() && !self.stale.contains(&m.id))
            .map(|m| {
                let node = path::join(root, &m.id);
                let stat = client.check_stat(&node);
                (m, node, stat)
            })
            .collect();
        let mut replaced = Vec::new();
        for (member, node, stat) in sent {
            let stat = stat.await.map_err(|err| Error::at(&node, err))?;
            if stat.and_then(|s| u64::try_from(s.czxid).ok()) != Some(member.created) {
                replaced.push(member.id.clone());
            }
        }
        self.stale.extend(replaced);
        Ok(())
    }
}

#[async_trait]
impl view::View for MembersView {
    type Value = Vec<Member>;

    async fn read(
        &mut self,
        client: &Client,
        root: &str,
        children: Vec<String>,
    ) -> Result<Vec<Member>> {
        let children: BTreeSet<String> = children.into_iter().collect();
        self.known.retain(|id, _| children.contains(id));
        self.stale.retain(|id| children.contains(id));
        self.look_at_unreadable(client, root).await?;
        let unread: Vec<String> = children
            .into_iter()
            .filter(|id| self.stale.contains(id) || !self.known.contains_key(id))
            .collect();
        let read = view::read_nodes(client, root, unread, self.watches.as_mut()).await?;
        for (id, read) in read {
            self.stale.remove(&id);
            match read {
                Some((data, stat)) => {
                    let created = u64::try_from(stat.czxid).unwrap_or_default();
                    self.known.insert(id.clone(), Member { id, data, created });
                }
                // Left meanwhile: the children watch tells.
                None => {
                    self.known.remove(&id);
                }
            }
        }
        Ok(self.known.values().cloned().collect())
    }

    async fn changed(&mut self) {
        if let Some(watches) = &mut self.watches {
            let fired = watches.fired().await;
            self.stale.extend(fired);
        } else {
            std::future::pending::<()>().await;
        }
    }
}
