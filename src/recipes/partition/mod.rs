//! Work assignment: a fixed set of partitions dealt among the live members of a group, each
//! worked by one member at a time under a fenced hold: [`Partitioner`], [`Worker`],
//! [`PartitionHold`]. [`Partitioner`]'s docs state what they promise.

mod assign;
mod dealer;
mod handoff;
mod hold;
mod record;
mod state;
mod worker;

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info_span, Instrument};

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::path;
use crate::queue::MAX_DATA;
use crate::recipes::contenders::{validate_id, Contender};
use crate::recipes::group::{check_name, Group, Member};
use crate::recipes::lock::Mutex;
use crate::session::{reconnected, Session};

pub use hold::PartitionHold;
pub use state::WorkerState;
pub use worker::Worker;

use record::{member_data, Record};

/// A fixed set of partitions (shards, queues, tenants, scheduled jobs) dealt among the live
/// members of a group on `path`, each worked by exactly one member at a time.
///
/// # Semantics
///
/// * **Layout.** Members are the nodes of a [`Group`] on `<path>/members`; partition `name` is
///   the [`Mutex`] on `<path>/partitions/<name>`. A member works a partition only while it
///   holds that lock, through a [`PartitionHold`]: exclusion and fencing are the mutex's —
///   no two members trust one partition at once (a member paused past its session, cut off
///   from the servers, or whose membership was taken included: its hold is lost before the
///   lock can pass), and the fencing token grows with every new owner.
/// * **The assignment** is a deterministic function of the partition names, the live
///   members' ids and who holds what now, as each member publishes in its own node (the
///   partitions it holds, with their tokens). Each member may own `⌊P/N⌋` or `⌈P/N⌉` of the
///   `P` partitions (the larger share going to the members that own most); each keeps what
///   it holds up to that; the rest are dealt by rendezvous hashing among the members with
///   room. Every member computes it from its own view of the group; there is no leader to
///   elect, lose or fence. Once the members' views agree, each of `N` members owns `⌊P/N⌋`
///   or `⌈P/N⌉` partitions, and the assignment is sticky: a member that joins takes exactly
///   its share (`⌊P/(N+1)⌋` or `⌈P/(N+1)⌉`) from the others and nothing else moves; a member
///   that leaves (or dies) gives up exactly its own. (The members' ids alone could not give
///   both: see `assign.rs`.) Views trail the servers, so two members may want one partition
///   for a moment: its lock decides, and the one the settled assignment does not name gives
///   it up. [`Partitioner::assignment`] computes the function.
/// * **Cooperative hand-off.** A member waits for each partition the assignment gives it in
///   that partition's lock queue. When the assignment moves a partition away from its owner,
///   the owner's hold says so ([`PartitionHold::moved`]) once the next owner waits in the
///   queue (or after a second, if none comes); the owner finishes and releases, and the next
///   owner holds on one notification, as a mutex hands off: the partition is worked all the
///   while but for that one step. Partitions that do not move are never released. A member
///   that leaves ([`Worker::leave`]) leaves the group first (so the others start waiting for
///   its partitions), then lets go of each partition as its next owner waits.
/// * **Liveness.** After a clean leave, each partition is owned again within a few round
///   trips of its release. A member that dies (or is paused, or cut off) keeps its
///   partitions until the servers expire its session: then its member node and its lock
///   nodes go at once, and the others hold within a few round trips.
/// * **One set of partitions.** Every member must be made with the same partition names.
///   A member's node records them (a count and a fingerprint of the names, and the version
///   of the assignment function: see [`Error::PartitionsConflict`]); [`join`](Self::join)
///   refuses, with that error and nothing left behind, to join a group where a member records
///   another set (of two that join at once, the one whose node is newer gives way; so does
///   a member whose node is made again, after an expiry, once another set joined while it
///   was away: its worker ends with that error). Members
///   with another record, and group nodes this session may not read, are not counted in
///   the assignment.
/// * **Ids.** A member's id is its member node's name and its partitions' lock nodes' data,
///   so an operator sees who owns what ([`owners`](Self::owners)); give each member a
///   stable id ([`id`](Self::id)): a member that restarts under the same id gets the same
///   partitions back. A random id is used otherwise.
///
/// # Working a partition
///
/// [`Worker::next_partition`] returns each partition as it is granted. Work on it while
/// neither [`PartitionHold::lost`] nor [`PartitionHold::moved`] resolved (look at
/// [`is_lost`](PartitionHold::is_lost) before each unit of work: after a pause it is read
/// from the clock), pass [`fencing_token`](PartitionHold::fencing_token) to what the work
/// writes, then release the hold. A released (or dropped, or lost and released) partition
/// that is still this member's is taken again and handed out again.
///
/// ```no_run
/// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
/// use zk_recipes::Partitioner;
///
/// let shards: Vec<String> = (0..16).map(|i| format!("shard-{i}")).collect();
/// let partitioner = Partitioner::new(&session, "/services/indexer", shards)?.id("replica-1")?;
/// let worker = partitioner.join().await?;
/// loop {
///     let hold = worker.next_partition().await?;
///     tokio::spawn(async move {
///         tokio::select! {
///             _ = hold.lost() => {}   // stop at once: another member may hold it now
///             _ = hold.moved() => {}  // finish the unit of work under way, then let go
///             _ = index(hold.name(), hold.fencing_token()) => {}
///         }
///         let _ = hold.release().await;
///     });
/// }
/// # }
/// # async fn index(_shard: &str, _token: u64) {}
/// ```
#[derive(Clone, Debug)]
pub struct Partitioner {
    session: Session,
    root: Arc<str>,
    /// The members, on `<root>/members`.
    group: Group,
    /// The partition names, sorted.
    names: Arc<[String]>,
    record: Record,
    id: Arc<str>,
    data: Arc<[u8]>,
    acl: NodeAcl,
}

/// What a partitioner's path shows (see [`Partitioner::status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionerStatus {
    /// The members, by id, each with its own data (the record taken off).
    pub members: Vec<Member>,
    /// Each partition whose lock node exists, by name.
    pub partitions: Vec<PartitionOwner>,
}

/// Who holds one partition's lock, and who waits for it (see [`Partitioner::owners`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionOwner {
    /// The partition's name.
    pub partition: String,
    /// Its holder: the first contender of its lock, with its token and its member id; `None`
    /// if nobody holds it.
    pub holder: Option<Contender>,
    /// The contenders waiting for it, in order (members the assignment gives it to, or gave
    /// it to a moment ago).
    pub waiting: Vec<Contender>,
}

impl Partitioner {
    /// A partitioner of `partitions` on `path`. The names are kept sorted; their order does
    /// not matter. Nothing is sent to ZooKeeper.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed.
    /// * [`Error::InvalidArgument`] if there is no partition, a name is given twice, or a
    ///   name is not a node name ZooKeeper accepts (empty, `.`, `..`, a `/`, a character it
    ///   refuses).
    pub fn new<I>(session: &Session, path: &str, partitions: I) -> Result<Partitioner>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let root = path::validate_root(path)?;
        let names = check_partitions(root, partitions)?;
        let record = Record::of(&names);
        let size = record.max_len(names.len(), &[]);
        if size > MAX_DATA {
            return Err(Error::InvalidArgument(format!(
                "{} partitions: a member that holds them all says so in {size} bytes; a node \
                 holds at most {MAX_DATA}",
                names.len()
            )));
        }
        Ok(Partitioner {
            session: session.clone(),
            root: Arc::from(root),
            group: Group::new(session, &path::join(root, "members"))?,
            record,
            names: names.into(),
            id: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
            data: Arc::from(Vec::new()),
            acl: session.node_acl(),
        })
    }

    /// This member's id, instead of a random one: its member node's name and the data of its
    /// partitions' lock nodes. Keep it stable across restarts.
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if `id` is no member id (see [`check_name`]) or no
    ///   contender id (see [`check_contender_id`](crate::check_contender_id)).
    pub fn id(self, id: &str) -> Result<Partitioner> {
        match check_name(self.group.path(), id) {
            Err(Error::InvalidPath { reason, .. }) => Err(Error::InvalidArgument(format!(
                "member id {id:?}: {reason}"
            ))),
            checked => checked,
        }?;
        validate_id(id)?;
        Ok(Partitioner {
            id: Arc::from(id),
            ..self
        })
    }

    /// Data this member shows in its node after the partitioner's record (an address, say),
    /// shown by [`members`](Self::members).
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if it does not fit in a node with the record.
    pub fn data(self, data: impl Into<Vec<u8>>) -> Result<Partitioner> {
        let data = data.into();
        let size = self.record.max_len(self.names.len(), &data);
        if size > MAX_DATA {
            return Err(Error::InvalidArgument(format!(
                "member data is {size} bytes with the record and the partitions held at most; \
                 a node holds at most {MAX_DATA}"
            )));
        }
        Ok(Partitioner {
            data: data.into(),
            ..self
        })
    }

    /// The ACL of the nodes this partitioner creates (its member node, its lock nodes, the
    /// paths it makes), instead of the session's.
    pub fn node_acl(self, acl: NodeAcl) -> Partitioner {
        Partitioner {
            group: self.group.node_acl(acl),
            acl,
            ..self
        }
    }

    /// The partitioner's path.
    pub fn path(&self) -> &str {
        &self.root
    }

    /// This member's id.
    pub fn member_id(&self) -> &str {
        &self.id
    }

    /// The partition names, sorted.
    pub fn partitions(&self) -> &[String] {
        &self.names
    }

    /// Joins the group and starts dealing: the [`Worker`] hands out each partition the
    /// assignment gives this member as its lock is held. Waits for a live session; returns
    /// once this member's node is in the group.
    ///
    /// # Notable errors
    /// * [`Error::PartitionsConflict`] if a member of the group records another set of
    ///   partitions; nothing is left of this member.
    /// * [`Error::IdTaken`] if a member with this id belongs to another live session.
    /// * [`Error::NoAuth`] if the ACL of the path denies reading or creating nodes.
    /// * [`Error::Closed`] if the session was closed (also while waiting).
    ///
    /// # Cancel safety
    /// Cancel safe: a member node made for a dropped `join()` is deleted in the background.
    pub async fn join(&self) -> Result<Worker> {
        let span = info_span!("zk.partition.join", path = %self.root, id = %self.id);
        self.enter().instrument(span).await
    }

    /// Looks at the group, joins it unless a member records other partitions, and looks
    /// again, once its own node is in view, for an older one that joined meanwhile.
    async fn enter(&self) -> Result<Worker> {
        let mut members = self.watch_group().await?;
        if let Some(other) = self.record.conflict(&members.borrow_and_update(), None) {
            return Err(self.record.refused(&self.root, other));
        }
        let data = self.record.data(&[], &self.data);
        let membership = self.group.join(&self.id, data).await?;
        let ours = |m: &Member| m.id == *self.id && self.record.counts(m);
        let created = tokio::select! {
            seen = members.wait_for(|now| now.iter().any(ours)) => {
                seen.map_err(|_| Error::Closed)?.iter().find(|m| ours(m)).map(|m| m.created)
            }
            loss = membership.lost() => return Err(dealer::ended(&membership, loss)),
        };
        let older = (self.record.conflict(&members.borrow(), created))
            .map(|m| self.record.refused(&self.root, m));
        if let Some(refused) = older {
            let _ = membership.leave().await;
            return Err(refused);
        }
        Ok(Worker::start(self.clone(), membership, members))
    }

    /// A live view of the group, once the connection lets it start.
    async fn watch_group(&self) -> Result<watch::Receiver<Vec<Member>>> {
        loop {
            match self.group.watch_members().await {
                Err(Error::Disconnected | Error::Renewing | Error::ConnectionLoss) => {
                    let client = self.session.live().await?;
                    let _ = reconnected(&client).await;
                }
                watched => return watched,
            }
        }
    }

    /// The path of partition `name`'s lock.
    pub(crate) fn lock_path(&self, name: &str) -> String {
        path::join(&self.root, &format!("partitions/{name}"))
    }

    /// The lock of partition `name`, its contenders carrying this member's id.
    pub(crate) fn mutex(&self, name: &str) -> Result<Mutex> {
        Ok(Mutex::new(&self.session, &self.lock_path(name))?
            .id(&self.id)?
            .node_acl(self.acl))
    }

    /// The members that work these partitions now, by id, each with its own data (the record
    /// taken off); works without joining. Sets no watch.
    ///
    /// # Notable errors
    /// As [`Group::members`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn members(&self) -> Result<Vec<Member>> {
        let all = self.group.members().await?;
        Ok(all
            .iter()
            .filter(|m| self.record.counts(m))
            .map(|m| Member {
                data: m.data.as_deref().map(|data| member_data(data).to_vec()),
                ..m.clone()
            })
            .collect())
    }

    /// Who holds each partition's lock (with its token and member id) and who waits for
    /// it, by partition name; works without joining. The locks are listed at once (one
    /// listing and one read per contender each, sent together).
    ///
    /// # Notable errors
    /// As [`Mutex::contenders`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn owners(&self) -> Result<Vec<PartitionOwner>> {
        list_owners(&self.session, &self.root, self.names.iter().cloned()).await
    }

    /// What the partitioner on `path` shows to someone who does not know its partitions (an
    /// operator's `zk-recipes status`): its members (those whose node holds a partitioner's
    /// record, of any partitions) and every partition whose lock node exists, with who holds
    /// it and who waits. Sets no watch; a missing path shows nothing.
    ///
    /// # Notable errors
    /// * [`Error::InvalidPath`] if `path` is malformed.
    /// * [`Error::NoAuth`] if a path may not be read; the connection's errors.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn status(session: &Session, path: &str) -> Result<PartitionerStatus> {
        let root = path::validate_root(path)?;
        let span = info_span!("zk.partition.status", path = %root);
        async {
            let group = Group::new(session, &path::join(root, "members"))?;
            let members = (group.members().await?.into_iter())
                .filter(record::is_member)
                .map(|m| Member {
                    data: m.data.as_deref().map(|data| member_data(data).to_vec()),
                    ..m
                })
                .collect();
            let parent = path::join(root, "partitions");
            let client = session.connected()?;
            let names = match client.list_children(&parent).await {
                Err(zookeeper_client::Error::NoNode) => Vec::new(),
                listed => listed.map_err(|err| Error::at(&parent, err))?,
            };
            let partitions = list_owners(session, root, names.into_iter()).await?;
            Ok(PartitionerStatus {
                members,
                partitions,
            })
        }
        .instrument(span)
        .await
    }

    /// The assignment of these partitions to `members` (ids), given who owns what now
    /// (`owners`: partition to member id; empty when nobody holds anything yet): each
    /// partition's member, as every member computes it (see [`Partitioner`]). Empty if there
    /// are no members.
    pub fn assignment(
        &self,
        members: &[&str],
        owners: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let owners = (owners.iter())
            .map(|(partition, member)| (partition.as_str(), member.as_str()))
            .collect();
        assign::assign(&self.names, members, &owners)
            .into_iter()
            .map(|(partition, member)| (partition.to_owned(), member.to_owned()))
            .collect()
    }
}

/// Who holds and who waits for the lock of each partition `names` of the partitioner on
/// `root`, sorted by name (the locks listed at once).
async fn list_owners(
    session: &Session,
    root: &str,
    names: impl Iterator<Item = String>,
) -> Result<Vec<PartitionOwner>> {
    let mut listings = JoinSet::new();
    for name in names {
        let mutex = Mutex::new(session, &path::join(root, &format!("partitions/{name}")))?;
        listings.spawn(async move { (name, mutex.contenders().await) });
    }
    let mut owners = Vec::with_capacity(listings.len());
    while let Some(listed) = listings.join_next().await {
        let (partition, contenders) = listed.map_err(|_| Error::Closed)?;
        let mut contenders = contenders?.into_iter().peekable();
        let holder = contenders.next_if(|c| c.holds);
        owners.push(PartitionOwner {
            partition,
            holder,
            waiting: contenders.collect(),
        });
    }
    owners.sort_by(|a, b| a.partition.cmp(&b.partition));
    Ok(owners)
}

/// Checks the partition names under `root`: at least one, none twice, each a node name;
/// sorted.
fn check_partitions<I>(root: &str, partitions: I) -> Result<Vec<String>>
where
    I: IntoIterator,
    I::Item: Into<String>,
{
    let parent = path::join(root, "partitions");
    let mut names: Vec<String> = partitions.into_iter().map(Into::into).collect();
    for name in &names {
        if let Err(Error::InvalidPath { reason, .. }) = path::check_name(&parent, name) {
            return Err(Error::InvalidArgument(format!(
                "partition name {name:?}: {reason}"
            )));
        }
    }
    names.sort_unstable();
    if let Some(twice) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(Error::InvalidArgument(format!(
            "partition {:?} is named twice",
            twice[0]
        )));
    }
    if names.is_empty() {
        return Err(Error::InvalidArgument(
            "a partitioner needs at least one partition".into(),
        ));
    }
    Ok(names)
}
