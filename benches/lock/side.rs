//! The two sides the bench compares, behind one interface so that a scenario runs the
//! same steps on either: ours (zk-recipes' `Mutex`, and its `LeaderElection` for
//! fail-over) and the peer (zookeeper-client's built-in `Client::lock`). Also the
//! alternating order in which the sides take turns.

use std::ops::{Index, IndexMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zk_recipes::{LeaderElection, Mutex, MutexGuard, Session};
use zookeeper_client as zk;

/// Session timeout of the scenarios that do not flood the server.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
pub enum Side {
    Ours,
    Peer,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Ours, Side::Peer];

    /// The sides' turns over `reps` repetitions: which side runs first alternates, so
    /// drift favours neither.
    pub fn alternating(reps: usize) -> impl Iterator<Item = Side> {
        (0..reps).flat_map(Side::order)
    }

    fn order(rep: usize) -> [Side; 2] {
        if rep % 2 == 0 {
            [Side::Ours, Side::Peer]
        } else {
            [Side::Peer, Side::Ours]
        }
    }

    /// A new session of this side's kind.
    pub async fn connect(self, hosts: &str, timeout: Duration) -> Conn {
        match self {
            Side::Ours => Conn::Ours(connect_session(hosts, timeout).await),
            Side::Peer => Conn::Peer(connect_client(hosts, timeout).await),
        }
    }
}

/// One value per side, indexed by [`Side`].
#[derive(Default)]
pub struct PerSide<T> {
    pub ours: T,
    pub peer: T,
}

impl<T> Index<Side> for PerSide<T> {
    type Output = T;

    fn index(&self, side: Side) -> &T {
        match side {
            Side::Ours => &self.ours,
            Side::Peer => &self.peer,
        }
    }
}

impl<T> IndexMut<Side> for PerSide<T> {
    fn index_mut(&mut self, side: Side) -> &mut T {
        match side {
            Side::Ours => &mut self.ours,
            Side::Peer => &mut self.peer,
        }
    }
}

/// A plain zookeeper-client session: the peer's, and the bench's own observers.
pub async fn connect_client(hosts: &str, timeout: Duration) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(timeout)
        .connect(hosts)
        .await
        .unwrap_or_else(|e| panic!("connect {hosts}: {e}"))
}

async fn connect_session(hosts: &str, timeout: Duration) -> Session {
    Session::builder()
        .session_timeout(timeout)
        .connect(hosts)
        .await
        .unwrap_or_else(|e| panic!("connect {hosts}: {e}"))
}

/// One side's session: a zk-recipes `Session` or a zookeeper-client `Client`.
pub enum Conn {
    Ours(Session),
    Peer(zk::Client),
}

impl Conn {
    /// The lock on `root`, as this side takes it.
    pub fn lock_on<'c>(&'c self, root: &'c str) -> Lock<'c> {
        match self {
            Conn::Ours(session) => Lock::Ours(Mutex::new(session, root).expect("mutex")),
            Conn::Peer(client) => Lock::Peer(PeerLock { client, root }),
        }
    }

    /// This side's seat in an election on `root`: ours a `LeaderElection`, the peer's
    /// the lock (leading is holding it).
    pub fn election<'c>(&'c self, root: &'c str, id: &str) -> Election<'c> {
        match self {
            Conn::Ours(session) => {
                Election::Ours(LeaderElection::new(session, root, id).expect("election"))
            }
            Conn::Peer(client) => Election::Peer(PeerLock { client, root }),
        }
    }

    /// Spawns a waiter that takes the lock on `root` once, releases it, counts itself in
    /// `done` and returns the instant it finished. The task holds only what a waiter
    /// needs: ours its `Mutex` and `lock()`, the peer its client, root and `lock()`.
    pub fn spawn_waiter(&self, root: &Arc<str>, done: &Arc<AtomicUsize>) -> JoinHandle<Instant> {
        let done = done.clone();
        match self {
            Conn::Ours(session) => {
                let mutex = Mutex::new(session, root).expect("waiter mutex");
                tokio::spawn(async move {
                    let guard = mutex.lock().await.expect("waiter lock");
                    guard.release().await.expect("waiter release");
                    done.fetch_add(1, Ordering::Relaxed);
                    Instant::now()
                })
            }
            Conn::Peer(client) => {
                let (client, root) = (client.clone(), root.clone());
                tokio::spawn(async move {
                    let lock = peer_lock(&client, &root).await;
                    peer_release(lock).await;
                    done.fetch_add(1, Ordering::Relaxed);
                    Instant::now()
                })
            }
        }
    }

    /// The size of this side's `lock()` future on `root`, as a task that awaits it
    /// stores it (made, never polled).
    pub fn lock_future_bytes(&self, root: &str) -> usize {
        match self {
            Conn::Ours(session) => {
                let mutex = Mutex::new(session, root).expect("mutex");
                let lock = mutex.lock();
                std::mem::size_of_val(&lock)
            }
            Conn::Peer(client) => {
                let (prefix, options) = peer_lock_args(root);
                std::mem::size_of_val(&client.lock(prefix, b"", options))
            }
        }
    }

    /// Closes ours now; the peer's session ends when its client is dropped.
    pub fn close(&self) {
        if let Conn::Ours(session) = self {
            session.close();
        }
    }
}

/// A lock on one root, as one side takes it.
pub enum Lock<'c> {
    Ours(Mutex),
    Peer(PeerLock<'c>),
}

impl<'c> Lock<'c> {
    /// Waits as long as it takes to hold the lock.
    pub async fn lock(&self) -> Held<'c> {
        match self {
            Lock::Ours(mutex) => Held::Mutex(mutex.lock().await.expect("lock")),
            Lock::Peer(peer) => Held::Peer(peer.lock().await),
        }
    }
}

/// The peer's lock on a root: its client and the root, nothing made yet.
#[derive(Clone, Copy)]
pub struct PeerLock<'c> {
    client: &'c zk::Client,
    root: &'c str,
}

impl<'c> PeerLock<'c> {
    async fn lock(self) -> zk::LockClient<'c> {
        peer_lock(self.client, self.root).await
    }
}

/// What one side holds: ours a `MutexGuard` or a leading `Candidate`, the peer its lock.
pub enum Held<'c> {
    Mutex(MutexGuard),
    Leader(zk_recipes::Candidate),
    Peer(zk::LockClient<'c>),
}

impl Held<'_> {
    /// Lets go and waits for the server: ours releases the mutex or resigns, the peer
    /// deletes its lock node.
    pub async fn release(self) {
        match self {
            Held::Mutex(guard) => guard.release().await.expect("release"),
            Held::Leader(candidate) => candidate.resign().await.expect("resign"),
            Held::Peer(lock) => peer_release(lock).await,
        }
    }
}

/// A seat in a leader election: ours a `LeaderElection`, the peer's a lock whose holder
/// leads.
pub enum Election<'c> {
    Ours(LeaderElection),
    Peer(PeerLock<'c>),
}

impl<'c> Election<'c> {
    /// Ours joins the queue (a request); the peer joins only when it asks for the lock.
    pub async fn join(&self) -> Joined<'c> {
        match self {
            Election::Ours(election) => Joined::Ours(election.join().await.expect("join")),
            Election::Peer(peer) => Joined::Peer(*peer),
        }
    }
}

/// In the election, not (yet) leading.
pub enum Joined<'c> {
    Ours(zk_recipes::Candidate),
    Peer(PeerLock<'c>),
}

impl<'c> Joined<'c> {
    /// Waits to lead: ours `leadership()`, the peer `lock()`.
    pub async fn lead(self) -> Held<'c> {
        match self {
            Joined::Ours(candidate) => {
                candidate.leadership().await.expect("leadership");
                Held::Leader(candidate)
            }
            Joined::Peer(peer) => Held::Peer(peer.lock().await),
        }
    }
}

/// The peer's lock on `root`, named as Curator (and zk-recipes) name their nodes.
fn peer_lock_args(root: &str) -> (zk::LockPrefix<'_>, zk::LockOptions<'static>) {
    let prefix = zk::LockPrefix::new_curator(root, "lock-").expect("lock prefix");
    let options = zk::LockOptions::new(zk::Acls::anyone_all())
        .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
        .expect("lock options");
    (prefix, options)
}

pub async fn peer_lock<'c>(client: &'c zk::Client, root: &str) -> zk::LockClient<'c> {
    let (prefix, options) = peer_lock_args(root);
    client.lock(prefix, b"", options).await.expect("peer lock")
}

/// Deletes the peer's lock node and waits for the server, as `MutexGuard::release` does.
pub async fn peer_release(lock: zk::LockClient<'_>) {
    let client = lock.client();
    client
        .delete(lock.lock_path(), None)
        .await
        .expect("peer release");
    // Already deleted: skip the background delete its Drop would send (a few bytes leak).
    std::mem::forget(lock);
}
