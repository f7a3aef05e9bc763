//! The dealer: a worker's task. It follows the group, computes what the assignment gives
//! this member, waits in the lock queue of each such partition, hands out each lock it gets,
//! asks a hold to let go when its partition moved away (once the next owner waits for it),
//! and takes a partition again when its hold ends while it is still this member's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{AbortHandle, Id, JoinError, JoinSet};
use tracing::{debug, warn};

use crate::error::{Error, Result};
use crate::loss::Loss;
use crate::recipes::group::{Member, Membership, Presence};
use crate::recipes::lock::{Mutex, MutexGuard};

use super::assign::assign;
use super::handoff::successor_waits;
use super::hold::{Ended, PartitionHold};
use super::state::WorkerState;
use super::Partitioner;

/// The pause after a lock that failed on the connection; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What an acquisition task returns: the partition, and its lock's guard.
type Taken = (Arc<str>, Result<MutexGuard>);

/// A task's outcome, with its id.
type Joined<T> = std::result::Result<(Id, T), JoinError>;

/// A partition handed out, as the dealer keeps it.
struct Held {
    token: u64,
    /// The name of its lock node.
    node: String,
    /// Set once the hold is asked to let go.
    moved: watch::Sender<bool>,
}

/// What woke the dealer.
enum Event {
    Stop,
    MembershipEnded(Loss),
    MembersChanged(bool),
    Taken(Joined<Taken>),
    Asked(Joined<Arc<str>>),
    Released(Ended),
}

/// Tasks keyed by partition: the one under way for each, the others aborted.
struct Tasks<T> {
    set: JoinSet<T>,
    by_name: BTreeMap<Arc<str>, AbortHandle>,
}

impl<T: Send + 'static> Tasks<T> {
    fn new() -> Tasks<T> {
        Tasks {
            set: JoinSet::new(),
            by_name: BTreeMap::new(),
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    fn spawn(
        &mut self,
        name: Arc<str>,
        task: impl std::future::Future<Output = T> + Send + 'static,
    ) {
        let handle = self.set.spawn(task);
        if let Some(before) = self.by_name.insert(name, handle) {
            before.abort();
        }
    }

    /// Aborts the task of each partition `keep` refuses.
    fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.by_name.retain(|name, task| {
            let kept = keep(name);
            if !kept {
                task.abort();
            }
            kept
        });
    }

    fn abort(&mut self, name: &str) {
        if let Some(task) = self.by_name.remove(name) {
            task.abort();
        }
    }

    /// Whether a task that ended is the one under way for `name` (no longer, once this says
    /// so): an aborted one is not.
    fn finished(&mut self, name: &str, task: Id) -> bool {
        let current = self.by_name.get(name).map(AbortHandle::id) == Some(task);
        if current {
            self.by_name.remove(name);
        }
        current
    }
}

pub(crate) struct Dealer {
    partitioner: Partitioner,
    members: watch::Receiver<Vec<Member>>,
    /// Whether the view changed since the assignment was last computed.
    stale: bool,
    granted: mpsc::UnboundedSender<PartitionHold>,
    ended: mpsc::UnboundedSender<Ended>,
    released: mpsc::UnboundedReceiver<Ended>,
    /// Waits in the lock queues of assigned partitions.
    taking: Tasks<Taken>,
    /// Waits for a successor before a hold is asked to let go.
    asking: Tasks<Arc<str>>,
    held: BTreeMap<Arc<str>, Held>,
    live: Vec<String>,
    assigned: BTreeSet<Arc<str>>,
    /// The holds this member's node says it has (index in the names, token), as last set.
    claimed: Vec<(usize, u64)>,
    state: watch::Sender<WorkerState>,
    end: watch::Sender<Option<Error>>,
}

impl Dealer {
    pub(crate) fn new(
        partitioner: Partitioner,
        members: watch::Receiver<Vec<Member>>,
        granted: mpsc::UnboundedSender<PartitionHold>,
        state: watch::Sender<WorkerState>,
        end: watch::Sender<Option<Error>>,
    ) -> Dealer {
        let (ended, released) = mpsc::unbounded_channel();
        Dealer {
            partitioner,
            members,
            stale: true,
            granted,
            ended,
            released,
            taking: Tasks::new(),
            asking: Tasks::new(),
            held: BTreeMap::new(),
            live: Vec::new(),
            assigned: BTreeSet::new(),
            claimed: Vec::new(),
            state,
            end,
        }
    }

    /// Deals for `membership` until asked to stop (or the worker ends), then leaves: the
    /// member node first, then each hold asked to let go (once its successor waits); returns
    /// once every hold handed out has ended.
    pub(crate) async fn run(
        mut self,
        membership: Membership,
        mut stop: oneshot::Receiver<()>,
    ) -> Result<()> {
        let dealt = self.deal(&membership, &mut stop).await;
        self.taking.set.shutdown().await;
        self.taking.by_name.clear();
        let left = match dealt {
            Ok(()) => membership.leave().await,
            Err(err) => {
                warn!(%err, "the worker ended; its partitions are let go");
                self.end.send_replace(Some(err));
                drop(membership);
                Ok(())
            }
        };
        self.let_go().await;
        debug!("left; every hold handed out ended");
        left
    }

    /// Deals: returns once asked to stop, or with why the worker ended.
    async fn deal(
        &mut self,
        membership: &Membership,
        stop: &mut oneshot::Receiver<()>,
    ) -> Result<()> {
        loop {
            if self.stale {
                self.rebalance();
            }
            let event = tokio::select! {
                biased;
                _ = &mut *stop => Event::Stop,
                loss = membership.lost() => Event::MembershipEnded(loss),
                seen = self.members.changed() => Event::MembersChanged(seen.is_ok()),
                Some(taken) = self.taking.set.join_next_with_id() => Event::Taken(taken),
                Some(asked) = self.asking.set.join_next_with_id() => Event::Asked(asked),
                Some(ended) = self.released.recv() => Event::Released(ended),
            };
            match event {
                Event::Stop => return Ok(()),
                Event::MembershipEnded(loss) => return Err(ended(membership, loss)),
                Event::MembersChanged(true) => {
                    self.stale = true;
                    self.check_set()?;
                }
                Event::MembersChanged(false) => return Err(Error::Closed),
                Event::Taken(taken) => self.taken(taken)?,
                Event::Asked(asked) => self.asked(asked),
                Event::Released(ended) => self.released(ended),
            }
            self.claim(membership);
        }
    }

    /// Ends the worker if a member whose node is older than this member's records other
    /// partitions: one that joined while this member's node was away (its session expired,
    /// or someone deleted it) and so was not refused by it. The newer node gives way, as
    /// at [`join`](super::Partitioner::join). Nothing to judge while this member's node is
    /// not in view.
    fn check_set(&self) -> Result<()> {
        let (record, me) = (&self.partitioner.record, &*self.partitioner.id);
        let view = self.members.borrow();
        let ours = (view.iter())
            .find(|m| m.id == me && record.counts(m))
            .map(|m| m.created);
        match ours.and_then(|ours| record.conflict(&view, Some(ours))) {
            Some(other) => Err(record.refused(&self.partitioner.root, other)),
            None => Ok(()),
        }
    }

    /// Says in this member's node which partitions it holds now, if that changed: the
    /// assignment keeps them where it can (see `assign.rs`). The membership's task writes
    /// the latest claims; this does not wait for it.
    fn claim(&mut self, membership: &Membership) {
        let names = &self.partitioner.names;
        let held: Vec<(usize, u64)> = (self.held.iter())
            .filter_map(|(name, held)| {
                Some((
                    names.binary_search_by(|n| (**n).cmp(name)).ok()?,
                    held.token,
                ))
            })
            .collect();
        if held != self.claimed {
            let data = self.partitioner.record.data(&held, &self.partitioner.data);
            membership.want_data(data);
            self.claimed = held;
        }
    }

    /// Assigns nothing more, asks every hold to let go (once a successor waits, if another
    /// member is live), and waits until each hold handed out has ended.
    async fn let_go(&mut self) {
        self.assigned.clear();
        let me = &*self.partitioner.id;
        let successors = self.live.iter().any(|member| member != me);
        let names: Vec<Arc<str>> = self.held.keys().cloned().collect();
        for name in names {
            match successors {
                true => self.ask(name),
                false => self.tell(&name),
            }
        }
        self.publish();
        // Nothing more is handed out; only the holds out there keep `released` open.
        let (closed, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.granted, closed));
        let (closed, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.ended, closed));
        loop {
            tokio::select! {
                Some(asked) = self.asking.set.join_next_with_id() => self.asked(asked),
                ended = self.released.recv() => match ended {
                    Some(ended) => self.released(ended),
                    None => break,
                },
            }
        }
        self.asking.set.shutdown().await;
    }

    /// Computes what the assignment gives this member from the view, and acts on the
    /// difference: holds of partitions moved away are asked to let go (once their successor
    /// waits), waits for partitions moved away are dropped (their nodes deleted in the
    /// background), and the partitions given to this member are waited for.
    fn rebalance(&mut self) {
        self.stale = false;
        let me = &*self.partitioner.id;
        let (live, assigned) = {
            let view = self.members.borrow_and_update();
            let (record, names) = (&self.partitioner.record, &self.partitioner.names);
            let live = record.members(&view);
            let dealt = match live.contains(&me) {
                true => assign(
                    names,
                    &live,
                    &owners(record.owners(names, &view), me, &self.held),
                ),
                false => BTreeMap::new(),
            };
            let mine: BTreeSet<Arc<str>> = (dealt.into_iter())
                .filter(|(_, member)| *member == me)
                .map(|(partition, _)| Arc::from(partition))
                .collect();
            (live.into_iter().map(str::to_owned).collect(), mine)
        };
        if assigned != self.assigned {
            debug!(
                members = ?live,
                gained = ?assigned.difference(&self.assigned).collect::<Vec<_>>(),
                lost = ?self.assigned.difference(&assigned).collect::<Vec<_>>(),
                "assignment changed"
            );
        }
        self.live = live;
        self.assigned = assigned;
        let assigned = &self.assigned;
        // Given back before its hold was asked to let go: it goes on.
        self.asking.retain(|name| !assigned.contains(name));
        self.taking.retain(|name| {
            let kept = assigned.contains(name);
            if !kept {
                debug!(partition = %name, "moved away; no longer waiting for it");
            }
            kept
        });
        let moved: Vec<Arc<str>> = (self.held.iter())
            .filter(|(name, held)| !assigned.contains(*name) && !*held.moved.borrow())
            .filter(|(name, _)| !self.asking.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in moved {
            self.ask(name);
        }
        self.take_assigned();
    }

    /// Asks the hold of `name` to let go once a successor waits in its lock queue.
    fn ask(&mut self, name: Arc<str>) {
        let Some(held) = self.held.get(&name) else {
            return;
        };
        debug!(partition = %name, token = held.token, "moved away; letting go once the next owner waits");
        let lock = self.partitioner.lock_path(&name);
        let (session, ours) = (self.partitioner.session.clone(), held.node.clone());
        let waited = name.clone();
        self.asking.spawn(name, async move {
            successor_waits(session, lock, ours).await;
            waited
        });
    }

    /// A successor waits (or waited long enough): the hold is asked to let go, unless its
    /// partition was given back meanwhile.
    fn asked(&mut self, asked: Joined<Arc<str>>) {
        if let Ok((task, name)) = asked {
            if self.asking.finished(&name, task) && !self.assigned.contains(&name) {
                self.tell(&name);
            }
        }
    }

    /// Asks the hold of `name` to let go now.
    fn tell(&self, name: &str) {
        if let Some(held) = self.held.get(name) {
            debug!(partition = %name, token = held.token, "asking the hold to let go");
            held.moved.send_replace(true);
        }
    }

    /// Waits for each assigned partition neither held nor waited for.
    fn take_assigned(&mut self) {
        let wanted: Vec<Arc<str>> = (self.assigned.iter())
            .filter(|name| !self.held.contains_key(*name) && !self.taking.contains(name))
            .cloned()
            .collect();
        for name in wanted {
            let mutex = self.partitioner.mutex(&name);
            self.taking.spawn(name.clone(), take(name, mutex));
        }
        self.publish();
    }

    /// A lock taken: hands it out if its wait is still the one under way (else it goes,
    /// released in the background).
    ///
    /// # Notable errors
    /// What the lock failed with but for the connection (retried): the worker ends.
    fn taken(&mut self, taken: Joined<Taken>) -> Result<()> {
        // Aborted: its partition moved away.
        let Ok((task, (name, guard))) = taken else {
            return Ok(());
        };
        if !self.taking.finished(&name, task) {
            return Ok(());
        }
        let guard = guard?;
        let (token, node) = (guard.fencing_token(), guard.node().to_owned());
        debug!(partition = %name, token, %node, "granted");
        let node = node
            .rsplit_once('/')
            .map_or(node.clone(), |(_, name)| name.to_owned());
        let (moved, told) = watch::channel(false);
        self.held.insert(name.clone(), Held { token, node, moved });
        let hold = PartitionHold::new(guard, name, told, self.ended.clone());
        // A worker that is gone drops the hold: it tells that it ended.
        let _ = self.granted.send(hold);
        self.publish();
        Ok(())
    }

    /// A hold ended: its partition is taken again if it is still this member's.
    fn released(&mut self, (name, token): Ended) {
        if self.held.get(&name).is_some_and(|held| held.token == token) {
            debug!(partition = %name, token, "hold ended");
            self.held.remove(&name);
            self.asking.abort(&name);
            self.take_assigned();
        }
    }

    /// Publishes what this member knows now.
    fn publish(&self) {
        let state = WorkerState {
            members: self.live.clone(),
            assigned: self.assigned.iter().map(|name| name.to_string()).collect(),
            owned: (self.held.iter())
                .map(|(name, held)| (name.to_string(), held.token))
                .collect(),
        };
        self.state.send_if_modified(|now| {
            let changed = *now != state;
            *now = state;
            changed
        });
    }
}

/// Who holds what, as the members' nodes say (`claimed`), but for this member (`me`): what
/// it holds now (`held`). Its own node trails its holds by a write and a notification;
/// deciding from that would let it give up a partition its settled share keeps (the others,
/// who see only its node, agree once the node catches up).
fn owners<'a>(
    mut claimed: BTreeMap<&'a str, &'a str>,
    me: &'a str,
    held: &'a BTreeMap<Arc<str>, Held>,
) -> BTreeMap<&'a str, &'a str> {
    claimed.retain(|_, member| *member != me);
    claimed.extend(held.keys().map(|name| (&**name, me)));
    claimed
}

/// Takes the lock of partition `name`, waiting as long as it takes; waits out connection
/// failures, with back-off.
async fn take(name: Arc<str>, mutex: Result<Mutex>) -> Taken {
    let taken = async {
        let mutex = mutex?;
        let mut pause = FIRST_PAUSE;
        loop {
            match mutex.lock().await {
                Err(
                    err @ (Error::ConnectionLoss
                    | Error::Disconnected
                    | Error::Renewing
                    | Error::SessionExpired),
                ) => {
                    debug!(partition = %name, %err, ?pause, "cannot wait for the lock; again after a pause");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                taken => return taken,
            }
        }
    };
    let taken = taken.await;
    (name, taken)
}

/// Why a worker ended when its membership did.
pub(crate) fn ended(membership: &Membership, loss: Loss) -> Error {
    match (membership.presence(), loss) {
        (Presence::Taken, _) => Error::IdTaken {
            node: membership.node().to_owned(),
        },
        (_, Loss::Closed) => Error::Closed,
        _ => Error::Lost {
            node: membership.node().to_owned(),
        },
    }
}
