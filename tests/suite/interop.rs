//! Interoperation with other ZooKeeper recipe libraries on the same paths: Apache Curator's
//! `InterProcessMutex`, `LeaderLatch`, `InterProcessReadWriteLock` and
//! `InterProcessSemaphoreV2` (Java), and kazoo's `Lock`, `ReadLock` and `WriteLock` (Python).
//!
//! The peers are small programs in `tests/interop/`, driven over stdin/stdout by
//! [`zk_harness::peers::Peer`]: a peer that cannot run fails the test with the reason, nothing
//! is skipped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_harness::peers::Peer;
use zk_harness::{
    await_count, await_empty, bounded, children, name, observer, sequence, session, unique_root,
    Ensemble,
};
use zk_recipes::{Candidate, LeaderElection, Mutex, MutexGuard, Role, RwLock, Semaphore};
use zookeeper_client::{Acls, Client, CreateMode};

/// How long a hand-off to a waiter may take once the holder released.
const HANDOFF: Duration = Duration::from_secs(10);
/// How long a waiter must keep waiting to count as "not let in".
const STILL_WAITING: Duration = Duration::from_millis(400);
/// Acquisitions per contender in the exclusion tests.
const ROUNDS: usize = 25;
/// Session timeout of the Rust contenders' sessions (the builder's default).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// ZooKeeper helpers

/// Waits for a spawned `lock()`; fails if it takes longer than a hand-off should.
async fn handed_off(
    waiter: tokio::task::JoinHandle<zk_recipes::Result<MutexGuard>>,
    what: &str,
) -> MutexGuard {
    bounded(&format!("{what}: handed the lock"), HANDOFF, waiter)
        .await
        .expect("lock task panicked")
        .unwrap_or_else(|e| panic!("{what}: lock() failed: {e}"))
}

/// Shared state of an exclusion test: a counter znode (`<count> <last holder>`) that every
/// holder read-modify-writes, and an EPHEMERAL "inside" znode every holder creates on entry
/// (NodeExists means two holders at once).
struct Section {
    counter: String,
    inside: String,
}

impl Section {
    async fn create(client: &Client, base: &str) -> Section {
        let section = Section {
            counter: format!("{base}-counter"),
            inside: format!("{base}-inside"),
        };
        client
            .create(
                &section.counter,
                b"0 -",
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            )
            .await
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", section.counter));
        section
    }

    /// One critical section as `who`; returns whether it overlapped another holder's and
    /// who held before.
    async fn enter(&self, client: &Client, who: &str) -> (bool, String) {
        let options = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        let overlap = match client.create(&self.inside, who.as_bytes(), &options).await {
            Ok(_) => false,
            Err(zookeeper_client::Error::NodeExists) => true,
            Err(e) => panic!("{who}: cannot create {}: {e}", self.inside),
        };
        let (data, _) = client.get_data(&self.counter).await.unwrap();
        let text = String::from_utf8(data).unwrap();
        let (count, previous) = text.split_once(' ').unwrap();
        let count: u64 = count.parse().unwrap();
        tokio::task::yield_now().await;
        let next = format!("{} {who}", count + 1);
        client
            .set_data(&self.counter, next.as_bytes(), None)
            .await
            .unwrap();
        if !overlap {
            client.delete(&self.inside, None).await.unwrap();
        }
        (overlap, previous.to_string())
    }

    async fn count(&self, client: &Client) -> u64 {
        let (data, _) = client.get_data(&self.counter).await.unwrap();
        let text = String::from_utf8(data).unwrap();
        text.split(' ').next().unwrap().parse().unwrap()
    }

    async fn remove(&self, client: &Client) {
        client.delete(&self.counter, None).await.unwrap();
        assert_eq!(client.check_stat(&self.inside).await.unwrap(), None);
    }
}

/// What the Rust contenders of an exclusion test saw.
#[derive(Default)]
struct RustTally {
    acquisitions: u64,
    overlaps: u64,
    /// Times the previous holder was the foreign peer.
    after_foreign: u64,
}

/// Runs `per_session` Rust contenders on each of two sessions, `ROUNDS` acquisitions each,
/// once the `foreign` peer (whose holders sign the counter `<foreign>-<n>`) has a contender
/// under `root`.
async fn rust_contenders(
    zk: &Ensemble,
    root: &str,
    section: Arc<Section>,
    foreign: &'static str,
    per_session: usize,
) -> RustTally {
    let sessions = [
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
    ];
    let tokens = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let mut tasks = Vec::new();
    for (s, session) in sessions.iter().enumerate() {
        for c in 0..per_session {
            let who = format!("rust-{s}-{c}");
            let session = session.clone();
            let section = section.clone();
            let tokens = tokens.clone();
            let mutex = Mutex::new(&session, root).unwrap();
            tasks.push(tokio::spawn(async move {
                let mut tally = RustTally::default();
                for _ in 0..ROUNDS {
                    let guard = mutex.lock().await.unwrap();
                    tokens.lock().unwrap().push(guard.fencing_token());
                    let client = session.client().expect("session is live");
                    let (overlap, previous) = section.enter(&client, &who).await;
                    tally.acquisitions += 1;
                    tally.overlaps += u64::from(overlap);
                    tally.after_foreign += u64::from(previous.starts_with(foreign));
                    guard.release().await.unwrap();
                }
                tally
            }));
        }
    }
    let mut total = RustTally::default();
    for task in tasks {
        let tally = task.await.expect("Rust contender panicked");
        total.acquisitions += tally.acquisitions;
        total.overlaps += tally.overlaps;
        total.after_foreign += tally.after_foreign;
    }
    // Tokens were pushed inside the critical section, so in holder order.
    let tokens = tokens.lock().unwrap();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens must grow from one Rust holder to the next: {tokens:?}"
    );
    total
}

/// Exclusion across languages: Rust contenders and the `peer`'s `stress` threads.
async fn exclusion_with(zk: &Ensemble, mut peer: Peer, root: &str, foreign: &'static str) {
    let client = observer(&zk.connect_string()).await;
    let section = Arc::new(Section::create(&client, root).await);
    // A Rust gate holds the lock until the peer's threads (each on its own session) queue
    // behind it, so both sides really interleave from the start.
    let gate_session = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let gate = Mutex::new(&gate_session, root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let peer_threads = 2;
    peer.send(&format!(
        "stress {ROUNDS} {} {} {peer_threads}",
        section.counter, section.inside
    ))
    .await;
    await_count(&client, root, 1 + peer_threads as usize).await;
    let open_gate = async {
        // The 4 Rust contenders queue behind the peer's threads; then the gate opens.
        await_count(&client, root, 1 + peer_threads as usize + 4).await;
        gate.release().await.unwrap();
    };
    let (rust, ()) = tokio::join!(
        rust_contenders(zk, root, section.clone(), foreign, 2),
        open_gate
    );
    let reply = peer.reply().await;
    let mut words = reply.split(' ').map(|w| w.parse::<u64>().unwrap());
    let (peer_acquisitions, peer_overlaps) = (words.next().unwrap(), words.next().unwrap());
    peer.quit().await;

    assert_eq!(peer_acquisitions, ROUNDS as u64 * peer_threads);
    assert_eq!(rust.acquisitions, ROUNDS as u64 * 4);
    assert_eq!(
        (rust.overlaps, peer_overlaps),
        (0, 0),
        "two holders were inside at once (Rust saw, {foreign} saw)"
    );
    assert_eq!(
        section.count(&client).await,
        rust.acquisitions + peer_acquisitions,
        "updates were lost: the counter is not the number of acquisitions"
    );
    assert!(
        rust.after_foreign > 0,
        "no Rust holder ever followed a {foreign} holder: the two sides did not interleave"
    );
    section.remove(&client).await;
    await_empty(&client, root).await;
}

/// Queue order across languages: a Rust waiter behind a `peer` holder gets the lock only
/// when the peer unlocks; a peer waiter behind a Rust holder likewise, and a Rust waiter
/// behind that peer waiter waits for the peer's turn to end. `peer_view` is the peer command
/// that lists the queue as the peer sees it, and `expected_view` maps the queue as we see it
/// (child names, by sequence) to the answer the peer must give.
async fn hand_offs_with(
    zk: &Ensemble,
    mut peer: Peer,
    root: &str,
    peer_view: &str,
    expected_view: impl Fn(&[String]) -> String,
) {
    let client = observer(&zk.connect_string()).await;
    let (one, two) = (
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
    );

    // 1. The peer holds; a Rust waiter waits until it unlocks.
    let reply = peer.call("lock").await;
    let peer_node = reply
        .strip_prefix("locked ")
        .expect("locked <node>")
        .to_string();
    assert_eq!(
        children(&client, root).await,
        vec![name(&peer_node).to_string()]
    );
    let peer_czxid = client.check_stat(&peer_node).await.unwrap().unwrap().czxid;
    let mutex = Mutex::new(&one, root).unwrap();
    assert!(
        mutex.try_lock().await.unwrap().is_none(),
        "try_lock took a lock the peer holds"
    );
    assert!(
        mutex
            .try_lock_for(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none(),
        "try_lock_for took a lock the peer holds"
    );
    assert_eq!(
        children(&client, root).await.len(),
        1,
        "a given-up try left a node"
    );
    let waiter = tokio::spawn(async move { mutex.lock().await });
    await_count(&client, root, 2).await;
    tokio::time::sleep(STILL_WAITING).await;
    assert!(
        !waiter.is_finished(),
        "Rust took the lock while the peer held it"
    );
    assert_eq!(peer.call("unlock").await, "unlocked");
    let guard = handed_off(waiter, "Rust waiter behind the peer").await;
    let sequence_of = |node: &str| sequence(node).expect("a sequential node");
    assert!(sequence_of(guard.node()) > sequence_of(&peer_node));
    assert!(
        guard.fencing_token() > u64::try_from(peer_czxid).unwrap(),
        "the fencing token must grow across languages"
    );

    // 2. Rust holds; the peer waits; a second Rust waiter queues behind the peer.
    assert_eq!(
        peer.call("lock-for 0").await,
        "false",
        "peer took a lock Rust holds"
    );
    assert_eq!(
        peer.call("lock-for 300").await,
        "false",
        "peer took a lock Rust holds"
    );
    assert_eq!(
        children(&client, root).await.len(),
        1,
        "a given-up peer try left a node"
    );
    peer.send("lock").await;
    await_count(&client, root, 2).await;
    let second = Mutex::new(&two, root).unwrap();
    let waiter = tokio::spawn(async move { second.lock().await });
    let queue = await_count(&client, root, 3).await;
    assert_eq!(queue[0], name(guard.node()));
    // The peer orders the queue as we do.
    peer.send(peer_view).await;
    // (The peer is busy with `lock`: its answers come in order.)
    assert_eq!(
        peer.reply_within(STILL_WAITING).await,
        None,
        "the peer got the lock while Rust held it"
    );
    guard.release().await.unwrap();
    let reply = peer.reply_within(HANDOFF).await;
    let peer_node = match reply.as_deref().and_then(|r| r.strip_prefix("locked ")) {
        Some(node) => node.to_string(),
        None => peer.fail(&format!("was not handed the lock: {reply:?}")),
    };
    assert_eq!(
        name(&peer_node),
        queue[1],
        "the peer holds through its own node"
    );
    let view = peer.reply().await;
    let now = children(&client, root).await;
    assert_eq!(
        view,
        expected_view(&now),
        "the peer orders the queue differently"
    );
    tokio::time::sleep(STILL_WAITING).await;
    assert!(
        !waiter.is_finished(),
        "the second Rust waiter took the lock while the peer held it"
    );
    assert_eq!(peer.call("unlock").await, "unlocked");
    let guard = handed_off(waiter, "Rust waiter behind the peer waiter").await;
    assert_eq!(name(guard.node()), queue[2]);
    guard.release().await.unwrap();

    peer.quit().await;
    await_empty(&client, root).await;
}

// ---------------------------------------------------------------------------------------
// Curator InterProcessMutex

#[tokio::test(flavor = "multi_thread")]
async fn mutex_excludes_curator_interprocess_mutex() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-exclusion");
    let peer = Peer::curator(zk, &root).await;
    exclusion_with(zk, peer, &root, "curator").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mutex_and_curator_hand_off_in_queue_order() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-order");
    let peer = Peer::curator(zk, &root).await;
    let root_prefix = format!("{root}/");
    // Curator's getParticipantNodes: full paths in its own queue order.
    hand_offs_with(zk, peer, &root, "nodes", |queue| {
        queue
            .iter()
            .map(|name| format!("{root_prefix}{name}"))
            .collect::<Vec<_>>()
            .join(" ")
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// kazoo Lock (extra_lock_patterns=["-lock-"])

#[tokio::test(flavor = "multi_thread")]
async fn mutex_excludes_kazoo_lock() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("kazoo-exclusion");
    let peer = Peer::kazoo(zk, &root).await;
    exclusion_with(zk, peer, &root, "kazoo").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mutex_and_kazoo_hand_off_in_queue_order() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("kazoo-order");
    let peer = Peer::kazoo(zk, &root).await;
    // kazoo's contenders(): node data in its queue order; ours is our default id.
    let ours = default_id();
    hand_offs_with(zk, peer, &root, "contenders", |queue| {
        queue
            .iter()
            .map(|name| {
                if name.contains("__lock__") {
                    "kazoo-main"
                } else {
                    ours.as_str()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// Curator LeaderLatch

/// Who leads, asking every candidate itself: the Java latches through the peer, the Rust
/// candidates through `role()`.
async fn who_leads(java: &mut Peer, java_ids: &[&str], rust: &[(&str, &Candidate)]) -> Vec<String> {
    let mut leading = Vec::new();
    for id in java_ids {
        match java.call(&format!("is-leader {id}")).await.as_str() {
            "true" => leading.push(id.to_string()),
            "false" => {}
            other => java.fail(&format!("is-leader said {other:?}")),
        }
    }
    for (id, candidate) in rust {
        if candidate.role() == Role::Leader {
            leading.push(id.to_string());
        }
    }
    leading
}

/// Samples until `expected` alone leads (never two leaders at one sample), then samples a
/// few more times to see it stay so; and checks that both libraries name it as leader.
async fn settle_on(
    expected: &str,
    java: &mut Peer,
    java_ids: &[&str],
    rust: &[(&str, &Candidate)],
    election: &LeaderElection,
) {
    let deadline = Instant::now() + HANDOFF;
    loop {
        let leading = who_leads(java, java_ids, rust).await;
        assert!(leading.len() <= 1, "two leaders at once: {leading:?}");
        if leading == [expected] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{expected} should lead within {HANDOFF:?}; leaders: {leading:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        let leading = who_leads(java, java_ids, rust).await;
        assert_eq!(
            leading,
            [expected],
            "leadership did not stay with {expected}"
        );
    }
    let ours = election.leader().await.unwrap().and_then(|p| p.id);
    assert_eq!(ours.as_deref(), Some(expected), "LeaderElection::leader()");
    if let Some(id) = java_ids.first() {
        assert_eq!(
            java.call(&format!("latch-leader {id}")).await,
            expected,
            "LeaderLatch::getLeader()"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn election_shares_path_with_curator_leader_latch() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-election");
    let client = observer(&zk.connect_string()).await;
    let mut java = Peer::curator(zk, &root).await;
    let (one, two) = (
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
    );
    let r1_election = LeaderElection::new(&one, &root, "r1").unwrap();
    let r2_election = LeaderElection::new(&two, &root, "r2").unwrap();
    let czxid = |node: String| {
        let client = client.clone();
        async move { client.check_stat(&node).await.unwrap().unwrap().czxid as u64 }
    };

    // Queue: j1, r1, j2, r2 — alternating languages.
    assert_eq!(java.call("latch-join j1").await, "joined");
    await_count(&client, &root, 1).await;
    let r1 = r1_election.join().await.unwrap();
    assert_eq!(java.call("latch-join j2").await, "joined");
    await_count(&client, &root, 3).await;
    let r2 = r2_election.join().await.unwrap();
    let queue = await_count(&client, &root, 4).await;

    let participants = r2_election.participants().await.unwrap();
    let ids: Vec<&str> = participants
        .iter()
        .map(|p| p.id.as_deref().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["j1", "r1", "j2", "r2"],
        "participants() in queue order, Java ids too"
    );
    let nodes: Vec<&str> = participants.iter().map(|p| name(&p.node)).collect();
    assert_eq!(nodes, queue, "participants() nodes");
    assert!(
        participants.iter().all(|p| p.node.contains("-latch-")),
        "Rust and Curator both name latch nodes _c_<uuid>-latch-<seq>: {participants:?}"
    );
    assert_eq!(
        java.call("participants j1").await,
        "j1* r1 j2 r2",
        "Curator's LeaderLatch sees the same queue and the same leader"
    );

    let rust = [("r1", &r1), ("r2", &r2)];
    settle_on("j1", &mut java, &["j1", "j2"], &rust, &r1_election).await;

    // The Java leader leaves: the next in queue, a Rust candidate, leads.
    let j1_term = czxid(format!("{root}/{}", queue[0])).await;
    assert_eq!(java.call("latch-close j1").await, "closed");
    let leadership = bounded("r1 leads once j1 closed", HANDOFF, r1.leadership())
        .await
        .unwrap();
    assert!(leadership.term() > j1_term, "terms grow across languages");
    assert_eq!(name(leadership.node()), queue[1]);
    settle_on("r1", &mut java, &["j2"], &rust, &r1_election).await;

    // The Rust leader resigns: the next in queue, a Java latch, leads.
    r1.resign().await.unwrap();
    assert!(
        leadership.is_lost(),
        "a resigned leader's leadership is lost"
    );
    assert_eq!(
        java.call("await-leader j2 10000").await,
        "true",
        "j2 should lead once r1 resigned"
    );
    let rust = [("r2", &r2)];
    settle_on("j2", &mut java, &["j2"], &rust, &r2_election).await;
    assert_eq!(r2.role(), Role::Follower);

    // A Java latch joins at the end; the Java leader leaves: the Rust candidate leads, then
    // hands over to that Java latch.
    assert_eq!(java.call("latch-join j3").await, "joined");
    await_count(&client, &root, 3).await;
    assert_eq!(java.call("latch-close j2").await, "closed");
    let term = bounded("r2 leads once j2 closed", HANDOFF, r2.leadership())
        .await
        .unwrap()
        .term();
    settle_on("r2", &mut java, &["j3"], &rust, &r2_election).await;
    assert_eq!(java.call("participants j3").await, "r2* j3");
    let j3_node = children(&client, &root).await.pop().unwrap();
    r2.resign().await.unwrap();
    assert_eq!(
        java.call("await-leader j3 10000").await,
        "true",
        "j3 should lead once r2 resigned"
    );
    settle_on("j3", &mut java, &["j3"], &[], &r2_election).await;
    assert!(czxid(format!("{root}/{j3_node}")).await > term);

    java.quit().await;
    await_empty(&client, &root).await;
}

// ---------------------------------------------------------------------------------------
// Read/write lock and semaphore: Curator's InterProcessReadWriteLock and
// InterProcessSemaphoreV2, kazoo's ReadLock and WriteLock

/// A room every holder enters while it holds (Rust and the peers alike; see
/// CuratorPeer.java): it creates the EPHEMERAL_SEQUENTIAL `<room>/<kind>-<who>-`, waits
/// `HOLD`, lists the room and leaves. A writer (`w`) must see no one else, a reader (`r`) no
/// writer, a lease holder (`h`) at most the maximum of holders.
struct Room {
    path: String,
}

/// What one side saw in the room.
#[derive(Debug, Default, PartialEq)]
struct RoomTally {
    sections: u64,
    violations: u64,
    /// The most readers (or lease holders) one listing saw.
    most: u64,
    /// Listings that saw a holder of the other side.
    foreign: u64,
}

/// How long a holder stays in the room: long enough for readers (and holders) to meet.
const HOLD: Duration = Duration::from_millis(20);

impl Room {
    async fn create(client: &Client, base: &str) -> Room {
        let path = format!("{base}-room");
        client
            .create(
                &path,
                b"",
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            )
            .await
            .unwrap_or_else(|e| panic!("cannot create {path}: {e}"));
        Room { path }
    }

    /// Enters as `who` (`rust-…`) of `kind`; counts what it saw into `tally`.
    async fn enter(
        &self,
        client: &Client,
        kind: char,
        who: &str,
        max: usize,
        tally: &mut RoomTally,
    ) {
        let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let prefix = format!("{}/{kind}-{who}-", self.path);
        let (_, seq) = client.create(&prefix, b"", &options).await.unwrap();
        tokio::time::sleep(HOLD).await;
        let seen = client.list_children(&self.path).await.unwrap();
        client
            .delete(&format!("{prefix}{seq}"), None)
            .await
            .unwrap();
        let writers = seen.iter().filter(|c| c.starts_with("w-")).count();
        let bad = match kind {
            'w' => seen.len() != 1,
            'r' => writers > 0,
            _ => seen.len() > max,
        };
        tally.sections += 1;
        tally.violations += u64::from(bad);
        tally.most = tally.most.max((seen.len() - writers) as u64);
        tally.foreign += u64::from(seen.iter().any(|c| c[2..].starts_with("curator")));
    }

    async fn remove(&self, client: &Client) {
        assert!(children(client, &self.path).await.is_empty());
        client.delete(&self.path, None).await.unwrap();
    }
}

impl RoomTally {
    /// The peer's `ok <sections> <violations> <most> <foreign>`.
    fn parse(reply: &str) -> RoomTally {
        let n: Vec<u64> = reply.split(' ').map(|w| w.parse().unwrap()).collect();
        RoomTally {
            sections: n[0],
            violations: n[1],
            most: n[2],
            foreign: n[3],
        }
    }

    fn add(&mut self, other: RoomTally) {
        self.sections += other.sections;
        self.violations += other.violations;
        self.most = self.most.max(other.most);
        self.foreign += other.foreign;
    }
}

/// Two sessions of Rust holders on `root`, three on each, `ROUNDS` sections each: a writer
/// and two readers of a read/write lock (`max` 0), or three acquirers of a semaphore of
/// `max` leases.
async fn rust_holders(zk: &Ensemble, root: &str, max: u32, room: Arc<Room>) -> RoomTally {
    let sessions = [
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
    ];
    let mut tasks = Vec::new();
    for (s, session) in sessions.iter().enumerate() {
        for c in 0..3 {
            let (session, room) = (session.clone(), room.clone());
            let lock = RwLock::new(&session, root).unwrap();
            let semaphore = (max > 0).then(|| Semaphore::new(&session, root, max).unwrap());
            let kind = match (c, max) {
                (_, 1..) => 'h',
                (0, 0) => 'w',
                _ => 'r',
            };
            let who = format!("rust-{kind}{s}{c}");
            tasks.push(tokio::spawn(async move {
                let mut tally = RoomTally::default();
                let client = session.client().expect("session is live");
                for round in 0..ROUNDS {
                    // A pause of its own between sections, so that readers of both languages
                    // come to stand together in the queue (they would keep their places).
                    let pause = (round * 7 + s * 5 + c * 3) % 11;
                    tokio::time::sleep(Duration::from_millis(pause as u64 * 3)).await;
                    // Lazy: it enters the room once awaited, while holding.
                    let enter = room.enter(&client, kind, &who, max as usize, &mut tally);
                    match (kind, &semaphore) {
                        ('w', _) => {
                            let guard = lock.write().await.unwrap();
                            enter.await;
                            guard.release().await.unwrap();
                        }
                        (_, Some(semaphore)) => {
                            let lease = semaphore.acquire().await.unwrap();
                            enter.await;
                            lease.release().await.unwrap();
                        }
                        _ => {
                            let guard = lock.read().await.unwrap();
                            enter.await;
                            guard.release().await.unwrap();
                        }
                    }
                }
                tally
            }));
        }
    }
    let mut total = RoomTally::default();
    for task in tasks {
        total.add(task.await.expect("Rust holder panicked"));
    }
    total
}

/// Curator readers and writers (each thread on its own session) and ours on one path, all
/// queued behind a Rust writer before it lets them go: a writer is always alone, readers of
/// both languages read together.
#[tokio::test(flavor = "multi_thread")]
async fn rw_lock_shares_path_with_curator_read_write_lock() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-rw");
    let client = observer(&zk.connect_string()).await;
    let room = Arc::new(Room::create(&client, &root).await);
    let mut peer = Peer::curator(zk, &root).await;
    let gate_session = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let gate = RwLock::new(&gate_session, &root)
        .unwrap()
        .write()
        .await
        .unwrap();
    let (java_readers, java_writers) = (3, 1);
    peer.send(&format!(
        "rw-stress {ROUNDS} {} {java_readers} {java_writers} {}",
        room.path,
        HOLD.as_millis()
    ))
    .await;
    await_count(&client, &root, 1 + java_readers + java_writers).await;
    let open_gate = async {
        await_count(&client, &root, 1 + java_readers + java_writers + 6).await;
        gate.release().await.unwrap();
    };
    let (rust, ()) = tokio::join!(rust_holders(zk, &root, 0, room.clone()), open_gate);
    let java = RoomTally::parse(&peer.reply().await);
    peer.quit().await;
    eprintln!("Rust {rust:?}, Curator {java:?}");

    assert_eq!(
        java.sections,
        (ROUNDS * (java_readers + java_writers)) as u64
    );
    assert_eq!(rust.sections, (ROUNDS * 6) as u64);
    assert_eq!(
        (rust.violations, java.violations),
        (0, 0),
        "a writer was not alone (Rust saw, Curator saw)"
    );
    assert!(rust.most.max(java.most) >= 2, "readers never read together");
    assert!(
        rust.foreign + java.foreign > 0,
        "readers of the two languages never read together: {rust:?} {java:?}"
    );
    room.remove(&client).await;
    await_empty(&client, &root).await;
}

/// Curator's InterProcessSemaphoreV2 (each thread on its own session) and ours on one path,
/// counted in one room across the processes: never more than the maximum, and full at times.
#[tokio::test(flavor = "multi_thread")]
async fn semaphore_shares_path_with_curator_semaphore_v2() {
    const MAX: u32 = 3;
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-sem");
    let (locks, leases) = (format!("{root}/locks"), format!("{root}/leases"));
    let client = observer(&zk.connect_string()).await;
    let room = Arc::new(Room::create(&client, &root).await);
    let mut peer = Peer::curator(zk, &root).await;
    // Rust holds every lease until both sides queue at the internal mutex.
    let gate_session = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let gate = Semaphore::new(&gate_session, &root, MAX).unwrap();
    let mut held = Vec::new();
    for _ in 0..MAX {
        held.push(gate.acquire().await.unwrap());
    }
    let java_threads = 4;
    peer.send(&format!(
        "sem-stress {ROUNDS} {} {java_threads} {MAX} {}",
        room.path,
        HOLD.as_millis()
    ))
    .await;
    await_count(&client, &locks, java_threads).await;
    let open_gate = async {
        await_count(&client, &locks, java_threads + 6).await;
        for lease in held.drain(..) {
            lease.release().await.unwrap();
        }
    };
    let (rust, ()) = tokio::join!(rust_holders(zk, &root, MAX, room.clone()), open_gate);
    let java = RoomTally::parse(&peer.reply().await);
    peer.quit().await;
    eprintln!("Rust {rust:?}, Curator {java:?}");

    assert_eq!(java.sections, (ROUNDS * java_threads) as u64);
    assert_eq!(rust.sections, (ROUNDS * 6) as u64);
    assert_eq!(
        (rust.violations, java.violations),
        (0, 0),
        "more than {MAX} leases at once (Rust saw, Curator saw)"
    );
    assert_eq!(rust.most.max(java.most), u64::from(MAX), "never full");
    assert!(
        rust.foreign > 0 && java.foreign > 0,
        "the languages never met in the room: {rust:?} {java:?}"
    );
    room.remove(&client).await;
    await_empty(&client, &leases).await;
    await_empty(&client, &locks).await;
}

/// A lease held by Curator counts for Rust and the other way round; each side's timeouts
/// leave nothing.
#[tokio::test(flavor = "multi_thread")]
async fn semaphore_and_curator_count_each_others_leases() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-leases");
    let (locks, leases) = (format!("{root}/locks"), format!("{root}/leases"));
    let client = observer(&zk.connect_string()).await;
    let mut peer = Peer::curator(zk, &root).await;
    let ours = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let semaphore = Semaphore::new(&ours, &root, 2).unwrap();

    let java_lease = peer.call("acquire 2").await;
    let java_lease = java_lease.strip_prefix("lease ").expect("lease <node>");
    assert!(java_lease.contains("-lease-"), "{java_lease}");
    let rust_lease = semaphore.acquire().await.unwrap();
    assert!(name(rust_lease.node()).contains("-lease-"));
    // Full: neither side takes a third.
    assert!(semaphore.try_acquire().await.unwrap().is_none());
    assert!(semaphore
        .try_acquire_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert_eq!(peer.call("acquire-for 2 300").await, "none");
    assert_eq!(children(&client, &leases).await.len(), 2);
    assert!(children(&client, &locks).await.is_empty());

    // A Rust waiter gets the lease Curator returns.
    let waiter = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await })
    };
    await_count(&client, &leases, 3).await;
    tokio::time::sleep(STILL_WAITING).await;
    assert!(!waiter.is_finished(), "a third lease was taken");
    assert_eq!(peer.call("return").await, "returned");
    let second = tokio::time::timeout(HANDOFF, waiter)
        .await
        .expect("the lease Curator returned is taken")
        .unwrap()
        .unwrap();
    // A Curator waiter gets the lease Rust returns.
    peer.send("acquire 2").await;
    await_count(&client, &leases, 3).await;
    assert_eq!(
        peer.reply_within(STILL_WAITING).await,
        None,
        "a third lease"
    );
    rust_lease.release().await.unwrap();
    let reply = peer.reply_within(HANDOFF).await;
    assert!(
        reply.is_some_and(|r| r.starts_with("lease ")),
        "Curator's waiter"
    );
    second.release().await.unwrap();
    peer.quit().await;
    await_empty(&client, &leases).await;
    await_empty(&client, &locks).await;
}

/// Hand-offs between a peer's read/write lock and ours, in queue order: the peer's writer
/// keeps our readers out; our reader lets the peer's reader in and keeps its writer out; a
/// peer writer waiting behind our reader keeps a later reader of ours out until it is done;
/// the peer's reader waits for our writer.
async fn rw_hand_offs_with(zk: &Ensemble, mut peer: Peer, root: &str) {
    let client = observer(&zk.connect_string()).await;
    let (one, two) = (
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
    );
    let (first, second) = (
        RwLock::new(&one, root).unwrap(),
        RwLock::new(&two, root).unwrap(),
    );

    // 1. The peer writes: we neither read nor write until it is done.
    assert_eq!(peer.call("write").await, "write");
    assert!(
        first.try_read().await.unwrap().is_none(),
        "read past a writer"
    );
    assert!(
        first.try_write().await.unwrap().is_none(),
        "wrote past a writer"
    );
    assert!(first
        .try_read_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        children(&client, root).await.len(),
        1,
        "a given-up try left a node"
    );
    let reader = {
        let first = first.clone();
        tokio::spawn(async move { first.read().await })
    };
    await_count(&client, root, 2).await;
    tokio::time::sleep(STILL_WAITING).await;
    assert!(!reader.is_finished(), "read while the peer wrote");
    assert_eq!(peer.call("unwrite").await, "unwrite");
    let reader = tokio::time::timeout(HANDOFF, reader)
        .await
        .expect("our reader follows the peer's writer")
        .unwrap()
        .unwrap();

    // 2. We read: the peer reads along, but does not write.
    assert_eq!(peer.call("read-for 0").await, "true", "the peer's reader");
    assert_eq!(peer.call("unread").await, "unread");
    assert_eq!(
        peer.call("write-for 300").await,
        "false",
        "wrote past our reader"
    );
    assert_eq!(children(&client, root).await.len(), 1);

    // 3. A peer writer waits behind our reader; our later reader waits behind that writer.
    peer.send("write").await;
    await_count(&client, root, 2).await;
    assert!(
        second.try_read().await.unwrap().is_none(),
        "read past the peer's waiting writer"
    );
    let late = {
        let second = second.clone();
        tokio::spawn(async move { second.read().await })
    };
    await_count(&client, root, 3).await;
    assert_eq!(
        peer.reply_within(STILL_WAITING).await,
        None,
        "wrote past our reader"
    );
    reader.release().await.unwrap();
    let reply = peer.reply_within(HANDOFF).await;
    assert_eq!(
        reply.as_deref(),
        Some("write"),
        "the peer's writer follows our reader"
    );
    tokio::time::sleep(STILL_WAITING).await;
    assert!(!late.is_finished(), "read while the peer wrote");
    assert_eq!(peer.call("unwrite").await, "unwrite");
    let late = tokio::time::timeout(HANDOFF, late)
        .await
        .expect("our late reader follows the peer's writer")
        .unwrap()
        .unwrap();
    late.release().await.unwrap();

    // 4. We write: the peer's reader waits, then reads along with ours.
    let writer = first.write().await.unwrap();
    assert_eq!(
        peer.call("read-for 300").await,
        "false",
        "read past our writer"
    );
    peer.send("read").await;
    await_count(&client, root, 2).await;
    assert_eq!(
        peer.reply_within(STILL_WAITING).await,
        None,
        "read past our writer"
    );
    writer.release().await.unwrap();
    let reply = peer.reply_within(HANDOFF).await;
    assert_eq!(
        reply.as_deref(),
        Some("read"),
        "the peer's reader follows our writer"
    );
    let along = first.try_read().await.unwrap().expect("we read along");
    assert!(
        first.try_write().await.unwrap().is_none(),
        "wrote past readers"
    );
    along.release().await.unwrap();
    assert_eq!(peer.call("unread").await, "unread");

    peer.quit().await;
    await_empty(&client, root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rw_lock_and_curator_hand_off_in_queue_order() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-rw-order");
    let peer = Peer::curator(zk, &root).await;
    rw_hand_offs_with(zk, peer, &root).await;
}

/// kazoo 2.8's ReadLock and WriteLock, made with extra_lock_patterns naming our kinds.
#[tokio::test(flavor = "multi_thread")]
async fn rw_lock_and_kazoo_hand_off_in_queue_order() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("kazoo-rw-order");
    let peer = Peer::kazoo(zk, &root).await;
    rw_hand_offs_with(zk, peer, &root).await;
}

// ---------------------------------------------------------------------------------------
// Group membership: Curator's GroupMember (a PersistentNode, EPHEMERAL, at <path>/<id>)

#[tokio::test(flavor = "multi_thread")]
async fn group_members_of_curator_and_ours_see_one_group() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-group");
    let mut peer = Peer::curator_group(zk, &root).await;
    let ours = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let group = zk_recipes::Group::new(&ours, &root).unwrap();
    let mut view = group.watch_members().await.unwrap();
    let ids = |members: &[zk_recipes::Member]| -> Vec<String> {
        members.iter().map(|m| m.id.clone()).collect()
    };

    assert_eq!(peer.call("join java java-data").await, "joined");
    zk_harness::await_watch("Curator's member", &mut view, |m| ids(m) == ["java"]).await;
    assert_eq!(view.borrow()[0].data.as_deref(), Some(&b"java-data"[..]));

    let member = group.join("rust", "rust-data").await.unwrap();
    assert_eq!(
        peer.call("await-members 20000 java,rust").await,
        "true java=java-data,rust=rust-data",
        "Curator sees our member"
    );
    // One id, one node: ours does not take the id a Curator member holds.
    let taken = group.join("java", "x").await;
    assert!(
        matches!(taken, Err(zk_recipes::Error::IdTaken { .. })),
        "{taken:?}"
    );

    member.leave().await.unwrap();
    assert_eq!(
        peer.call("await-members 20000 java").await,
        "true java=java-data"
    );
    assert_eq!(peer.call("leave java").await, "left");
    zk_harness::await_watch("no member", &mut view, |m| m.is_empty()).await;
    peer.quit().await;
    await_empty(&observer(&zk.connect_string()).await, &root).await;
}

// ---------------------------------------------------------------------------------------
// Revocation and contenders with Curator

/// The id zk-recipes' contenders carry by default: `<host name>/<process id>`.
fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host name");
    format!("{}/{}", host.trim(), std::process::id())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_curator_holder_made_revocable_is_called_back_when_zk_recipes_asks() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-revocable");
    let client = observer(&zk.connect_string()).await;
    let mut peer = Peer::curator(zk, &root).await;
    assert_eq!(peer.call("revocable").await, "revocable");
    let reply = peer.call("lock").await;
    let peer_node = reply
        .strip_prefix("locked ")
        .expect("locked <node>")
        .to_string();

    let asker = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let mutex = Mutex::new(&asker, &root).unwrap();
    // Curator's contender shows as its id whatever Curator stored in its node (Curator
    // 5.4's InterProcessMutex stores nothing).
    let seen = mutex.contenders().await.unwrap();
    assert_eq!(
        (seen[0].node.as_str(), seen[0].holds),
        (peer_node.as_str(), true)
    );
    let stored = client.get_data(&peer_node).await.unwrap().0;
    assert_eq!(seen[0].id.as_deref().map(str::as_bytes), Some(&stored[..]));

    assert_eq!(mutex.revoke_holders().await.unwrap(), vec![peer_node]);
    let called = peer.line(zk_harness::PATIENCE).await;
    assert_eq!(called.as_deref(), Some("revocation-requested"));
    assert_eq!(peer.call("unlock").await, "unlocked");
    peer.quit().await;
    await_empty(&client, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zk_recipes_holder_hears_curators_revoker() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("curator-revoker");
    let client = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    let mut peer = Peer::curator(zk, &root).await;
    // Curator sees our contender, with our id as its data.
    assert_eq!(peer.call("nodes").await, guard.node());
    assert_eq!(
        client.get_data(guard.node()).await.unwrap().0,
        default_id().as_bytes()
    );

    assert_eq!(
        peer.call(&format!("revoke {}", guard.node())).await,
        "revoked"
    );
    bounded(
        "the holder hears Curator",
        zk_harness::PATIENCE,
        guard.revocation_requested(),
    )
    .await
    .unwrap();
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    peer.quit().await;
    await_empty(&client, &root).await;
}
