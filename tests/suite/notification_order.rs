//! The assumption the request-free hand-off rests on, pinned against a real server: one
//! session's watch notifications reach their watchers in the order the server sent them.
//!
//! A waiter learns from notifications alone that it may hold (`src/queue/handoff.rs`): once
//! it sees its blocker's watch fire, it looks, without waiting, whether the watch on its own
//! node and the one on the blocker's left-first signal have fired. That is sound only if
//! every notification the server sent before the blocker's deletion is already *ready* at
//! its watcher when the blocker's one is seen. zookeeper-client 0.11.2 (the version in
//! Cargo.lock; verified by reading its source: `session/mod.rs` `handle_recv_buf` →
//! `handle_notification` → `session/watch.rs` `WatchManager::dispatch_path_event`) decodes
//! the connection's replies and notifications in the order read, in its one session task,
//! and completes each notification's `futures::channel::oneshot` in place, which wakes the
//! watcher's task inside that send. So the order watchers are woken is the order the
//! notifications were sent, and a watcher seen ready implies every earlier one is ready.
//!
//! The tests here measure exactly that, independently of how tokio schedules tasks:
//! * every watch future is polled with a waker of its own that stamps a global sequence
//!   number (`AtomicU64::fetch_add`) when it is woken, so the stamps give the order in
//!   which zookeeper-client completed the watches (a watch completed while it was being
//!   polled is found ready by that poll and woken by no one: it has no stamp, and only
//!   the next check covers it);
//! * whenever one is woken, all are looked at without waiting, the latest in server order
//!   first (as the hand-off looks at its own node's watch only after its blocker's fired):
//!   a watch found ready while one the server notified earlier is not is a failure.
//!
//! The server order is known: a multi's notifications follow its ops (the server applies
//! the ops in order and queues the notifications of one connection in order), and single
//! writes, each awaited before the next and alternating between two writer sessions,
//! follow the write order. The ops are shuffled every round, so the order differs from the
//! order the watches were set and from any order of their paths. If this fails after an
//! upgrade of zookeeper-client, the hand-off is unsafe with that version (see
//! `src/queue/handoff.rs`): do not loosen this test to make it pass.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Notify;
use zk_harness::{await_empty, bounded, plain_client, unique_root, Ensemble, PATIENCE};
use zookeeper_client::{Acls, Client, CreateMode, EventType, OneshotWatcher, WatchedEvent};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Rounds per way of firing, and paths watched per round (each fired by one op; a quarter
/// of them carry two watches fired by the same notification).
const ROUNDS: u64 = 50;
const SLOTS: usize = 32;

/// A watched path's role in a round: what is watched on it and which op fires it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A data watch on an existing node, fired by a write into it.
    Written,
    /// An exists watch and a child watch on an existing node, both fired by its deletion
    /// (one notification): a waiter's watch on its blocker, or on its own node.
    Deleted,
    /// An exists watch on a missing node, fired by its creation: a left-first signal (in a
    /// multi it is deleted again right after, as a signal is).
    Created,
    /// A child watch on an existing node, fired by a child's creation.
    Grown,
}

impl Kind {
    fn of(slot: usize) -> Kind {
        [Kind::Written, Kind::Deleted, Kind::Created, Kind::Grown][slot % 4]
    }

    /// The event every watch on such a path must hear.
    fn event(self) -> EventType {
        match self {
            Kind::Written => EventType::NodeDataChanged,
            Kind::Deleted => EventType::NodeDeleted,
            Kind::Created => EventType::NodeCreated,
            Kind::Grown => EventType::NodeChildrenChanged,
        }
    }
}

/// A watch waiting for its notification, with the role of its path.
type Armed = Pin<Box<dyn Future<Output = (Kind, WatchedEvent)> + Send>>;

fn armed(kind: Kind, watcher: OneshotWatcher) -> Armed {
    Box::pin(async move { (kind, watcher.changed().await) })
}

/// A watch's waker: stamps the next global sequence number the first time it is woken.
struct Stamp {
    clock: Arc<AtomicU64>,
    stamp: AtomicU64,
    woken: Arc<Notify>,
}

impl Wake for Stamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let now = self.clock.fetch_add(1, Ordering::SeqCst) + 1;
        let _first = self
            .stamp
            .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst);
        self.woken.notify_one();
    }
}

/// One watched future, the rank of the notification that must fire it in the server's
/// order, and what it must hear.
struct Watched<T> {
    rank: usize,
    what: String,
    future: Pin<Box<dyn Future<Output = T> + Send>>,
    stamp: Arc<Stamp>,
    heard: Option<T>,
}

/// Watches to check, in the order the server will notify them (equal ranks: one
/// notification).
struct Order<T> {
    watched: Vec<Watched<T>>,
    clock: Arc<AtomicU64>,
    woken: Arc<Notify>,
}

impl<T> Order<T> {
    fn new() -> Self {
        Order {
            watched: Vec::new(),
            clock: Arc::new(AtomicU64::new(0)),
            woken: Arc::new(Notify::new()),
        }
    }

    fn add(&mut self, rank: usize, what: String, future: Pin<Box<dyn Future<Output = T> + Send>>) {
        let stamp = Arc::new(Stamp {
            clock: self.clock.clone(),
            stamp: AtomicU64::new(0),
            woken: self.woken.clone(),
        });
        self.watched.push(Watched {
            rank,
            what,
            future,
            stamp,
            heard: None,
        });
    }

    /// Polls every watch once with its stamping waker; none may have fired yet.
    fn arm(&mut self) -> Result<(), String> {
        self.watched.sort_by_key(|watched| watched.rank);
        for watched in &mut self.watched {
            if poll(watched) {
                return Err(format!(
                    "{} fired before anything was written",
                    watched.what
                ));
            }
        }
        Ok(())
    }

    /// Waits until every watch fired, checking at each wake-up that what is ready is a
    /// prefix of the server's order, then that the stamps follow it. Fails the test if the
    /// notifications do not all come within [`PATIENCE`].
    async fn check(mut self) -> Result<Vec<(String, T)>, String> {
        let mut probes = 0;
        while self.watched.iter().any(|watched| watched.heard.is_none()) {
            bounded("every watch fires", PATIENCE, self.woken.notified()).await;
            probes += 1;
            // The latest first: a watch seen ready was completed before any later look, so
            // an earlier one found pending now was completed after it.
            let mut latest_ready: Option<usize> = None;
            for i in (0..self.watched.len()).rev() {
                let watched = &mut self.watched[i];
                let ready = watched.heard.is_some() || poll(watched);
                match latest_ready {
                    None if ready => latest_ready = Some(i),
                    Some(later) if !ready && self.watched[later].rank > self.watched[i].rank => {
                        let (later, earlier) = (&self.watched[later], &self.watched[i]);
                        return Err(format!(
                            "probe {probes}: `{}` (notification {}) was ready while `{}` \
                             (notification {}) was not",
                            later.what, later.rank, earlier.what, earlier.rank
                        ));
                    }
                    _ => {}
                }
            }
        }
        // A channel completed while its receiver was being polled wakes no one (the poll
        // sees it ready): only the watches that were woken have a stamp to compare.
        let mut woken: Vec<&Watched<T>> = self
            .watched
            .iter()
            .filter(|watched| watched.stamp.stamp.load(Ordering::SeqCst) != 0)
            .collect();
        woken.sort_by_key(|watched| watched.stamp.stamp.load(Ordering::SeqCst));
        if let Some(pair) = woken.windows(2).find(|pair| pair[0].rank > pair[1].rank) {
            let order: Vec<String> = woken
                .iter()
                .map(|watched| format!("{}:{}", watched.rank, watched.what))
                .collect();
            return Err(format!(
                "`{}` (notification {}) was woken before `{}` (notification {}); \
                 wake order: {}",
                pair[0].what,
                pair[0].rank,
                pair[1].what,
                pair[1].rank,
                order.join(" ")
            ));
        }
        Ok(self
            .watched
            .into_iter()
            .filter_map(|watched| Some((watched.what, watched.heard?)))
            .collect())
    }
}

/// Polls a watch that has not fired yet with its own waker; whether it fired now.
fn poll<T>(watched: &mut Watched<T>) -> bool {
    let waker = Waker::from(watched.stamp.clone());
    match watched
        .future
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
    {
        Poll::Ready(heard) => {
            watched.heard = Some(heard);
            true
        }
        Poll::Pending => false,
    }
}

/// A small deterministic shuffle (xorshift), seeded per round so a failure can be told
/// apart from the next run's order.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = usize::try_from(next() % (i as u64 + 1)).unwrap();
        order.swap(i, j);
    }
    order
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

async fn create(client: &Client, path: &str) {
    client
        .create(
            path,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap_or_else(|err| panic!("create {path}: {err}"));
}

/// Deletes `path` and everything under it.
async fn delete_tree(client: &Client, path: &str) {
    let mut stack = vec![(path.to_owned(), false)];
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            client.delete(&node, None).await.unwrap();
            continue;
        }
        let children = client.list_children(&node).await.unwrap();
        stack.push((node.clone(), true));
        stack.extend(
            children
                .into_iter()
                .map(|child| (format!("{node}/{child}"), false)),
        );
    }
}

/// How a round's ops are sent.
#[derive(Clone, Copy, Debug)]
enum Firing {
    /// All in one multi, in op order.
    Multi,
    /// One write at a time, each awaited, alternating between two writer sessions.
    Interleaved,
}

fn slot_path(dir: &str, slot: usize) -> String {
    format!("{dir}/n{slot:02}")
}

/// One round: `SLOTS` paths under `dir` watched by `watcher`, fired in a shuffled order.
async fn round(watcher: &Client, writers: &[Client; 2], dir: &str, firing: Firing, seed: u64) {
    let writer = &writers[0];
    create(writer, dir).await;
    for slot in 0..SLOTS {
        if Kind::of(slot) != Kind::Created {
            create(writer, &slot_path(dir, slot)).await;
        }
    }
    // The slots in the order of their ops, and each slot's place in it.
    let ops = shuffled(SLOTS, seed);
    let mut ranks = vec![0; SLOTS];
    for (place, &slot) in ops.iter().enumerate() {
        ranks[slot] = place;
    }

    let mut order = Order::new();
    for (slot, &rank) in ranks.iter().enumerate() {
        let path = slot_path(dir, slot);
        let kind = Kind::of(slot);
        let what = |watch: &str| format!("{watch} {path} ({kind:?})");
        match kind {
            Kind::Written => {
                let (_, _, watch) = watcher.get_and_watch_data(&path).await.unwrap();
                order.add(rank, what("data watch"), armed(kind, watch));
            }
            Kind::Deleted => {
                let (stat, watch) = watcher.check_and_watch_stat(&path).await.unwrap();
                assert!(stat.is_some(), "{path} exists");
                order.add(rank, what("exists watch"), armed(kind, watch));
                let (_, _, watch) = watcher.get_and_watch_children(&path).await.unwrap();
                order.add(rank, what("child watch"), armed(kind, watch));
            }
            Kind::Created => {
                let (stat, watch) = watcher.check_and_watch_stat(&path).await.unwrap();
                assert!(stat.is_none(), "{path} is missing");
                order.add(rank, what("exists watch"), armed(kind, watch));
            }
            Kind::Grown => {
                let (_, _, watch) = watcher.get_and_watch_children(&path).await.unwrap();
                order.add(rank, what("child watch"), armed(kind, watch));
            }
        }
    }
    order
        .arm()
        .unwrap_or_else(|err| panic!("seed {seed}: {err}"));

    let fire = tokio::spawn(fire(writers.clone(), dir.to_owned(), ops, firing));
    let heard = order
        .check()
        .await
        .unwrap_or_else(|err| panic!("{firing:?}, seed {seed}: {err}"));
    bounded("the writes", PATIENCE, fire)
        .await
        .expect("the writes");
    for (what, (kind, event)) in heard {
        assert_eq!(event.event_type, kind.event(), "{what} heard {event:?}");
    }
    delete_tree(writer, dir).await;
}

/// Sends a round's ops, for the slots in `ops` order, as `firing` says.
async fn fire(writers: [Client; 2], dir: String, ops: Vec<usize>, firing: Firing) {
    match firing {
        Firing::Multi => {
            let mut multi = writers[0].new_multi_writer();
            let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
            for &slot in &ops {
                let path = slot_path(&dir, slot);
                match Kind::of(slot) {
                    Kind::Written => multi.add_set_data(&path, b"x", None).unwrap(),
                    Kind::Deleted => multi.add_delete(&path, None).unwrap(),
                    Kind::Created => {
                        multi.add_create(&path, b"", &options).unwrap();
                        multi.add_delete(&path, None).unwrap();
                    }
                    Kind::Grown => multi
                        .add_create(&format!("{path}/c"), b"", &options)
                        .unwrap(),
                }
            }
            multi.commit().await.unwrap();
        }
        Firing::Interleaved => {
            for (i, &slot) in ops.iter().enumerate() {
                let writer = &writers[i % 2];
                let path = slot_path(&dir, slot);
                match Kind::of(slot) {
                    Kind::Written => {
                        writer.set_data(&path, b"x", None).await.unwrap();
                    }
                    Kind::Deleted => writer.delete(&path, None).await.unwrap(),
                    Kind::Created => create(writer, &path).await,
                    Kind::Grown => create(writer, &format!("{path}/c")).await,
                }
            }
        }
    }
}

async fn rounds(firing: Firing, name: &str) {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root(name);
    let watcher = plain_client(&hosts, SESSION_TIMEOUT).await;
    let writers = [
        plain_client(&hosts, SESSION_TIMEOUT).await,
        plain_client(&hosts, SESSION_TIMEOUT).await,
    ];
    create(&writers[0], &root).await;
    let base = seed();
    for i in 0..ROUNDS {
        let dir = format!("{root}/r{i}");
        round(&watcher, &writers, &dir, firing, base.wrapping_add(i)).await;
    }
    await_empty(&writers[0], &root).await;
    writers[0].delete(&root, None).await.unwrap();
}

/// Watches fired by one multi each round (sets, deletes, creates with a delete right after
/// as a left-first signal is made, child creations): woken and ready in op order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_multi_notifies_in_op_order() {
    rounds(Firing::Multi, "order-multi").await;
}

/// Watches fired by single writes from two sessions in turn: woken and ready in write
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn single_writes_notify_in_write_order() {
    rounds(Firing::Interleaved, "order-single").await;
}

/// The checker itself has teeth: completions out of order are found, in order are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_finds_an_order_broken() {
    for broken in [false, true] {
        let mut order = Order::new();
        let mut senders = Vec::new();
        for rank in 0..8 {
            let (sender, receiver) = tokio::sync::oneshot::channel::<usize>();
            order.add(
                rank,
                format!("watch {rank}"),
                Box::pin(async move { receiver.await.unwrap() }),
            );
            senders.push(sender);
        }
        order.arm().unwrap();
        if broken {
            senders.swap(3, 5);
        }
        let completer = std::thread::spawn(move || {
            for (rank, sender) in senders.into_iter().enumerate() {
                // A checker that found the order broken has stopped listening.
                let _ = sender.send(rank);
            }
        });
        let checked = order.check().await;
        completer.join().unwrap();
        match (broken, checked) {
            (false, Ok(heard)) => assert_eq!(heard.len(), 8),
            // Only 3 and 4 were completed after a later one.
            (true, Err(err)) => {
                assert!(err.contains("watch 3") || err.contains("watch 4"), "{err}")
            }
            (broken, checked) => panic!("broken {broken}: {:?}", checked.map(|heard| heard.len())),
        }
    }
}
