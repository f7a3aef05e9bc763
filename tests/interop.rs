//! Interoperation with other ZooKeeper recipe libraries on the same paths: Apache Curator's
//! `InterProcessMutex` and `LeaderLatch` (Java), and kazoo's `Lock` (Python).
//!
//! The peers are small programs in `tests/interop/`, driven over stdin/stdout: the Java one
//! is compiled with `javac` when this binary first needs it, against Debian's
//! `libcurator-recipes-java` jars; the Python one runs under Debian's `/usr/bin/python3` with
//! `python3-kazoo`. A peer that cannot run fails the test with the reason: nothing is skipped.
//!
//! Overrides: `CURATOR_CLASSPATH` (jars for the Java peer), `INTEROP_JAVA`, `INTEROP_JAVAC`,
//! `KAZOO_PYTHON` (a python3 that can `import kazoo`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use zk_harness::{
    await_count, await_empty, bounded, children, name, observer, sequence, session, unique_root,
    Ensemble,
};
use zk_recipes::{Candidate, LeaderElection, Mutex, MutexGuard, Role};
use zookeeper_client::{Acls, Client, CreateMode};

/// How long a peer may take to start (JVM start and connect) and to answer a command.
const PEER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a hand-off to a waiter may take once the holder released.
const HANDOFF: Duration = Duration::from_secs(10);
/// How long a waiter must keep waiting to count as "not let in".
const STILL_WAITING: Duration = Duration::from_millis(400);
/// Acquisitions per contender in the exclusion tests.
const ROUNDS: usize = 25;
/// Session timeout of the Rust contenders' sessions (the builder's default).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// Peers

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// `target/tmp/interop-<pid>`: the peer's classes and stderr logs (a peer that quits cleanly
/// removes its log). Directories of test binaries that no longer run are removed.
fn scratch_dir() -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    static STALE: OnceLock<()> = OnceLock::new();
    STALE.get_or_init(|| {
        for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("interop-")
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    let dir = base.join(format!("interop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {dir:?}: {e}"));
    dir
}

/// The class path of the Curator peer (its own classes not included).
fn curator_classpath() -> String {
    if let Ok(cp) = std::env::var("CURATOR_CLASSPATH") {
        return cp;
    }
    let jars = [
        "curator-recipes",
        "curator-framework",
        "curator-client",
        "zookeeper",
        "zookeeper-jute",
        "guava",
        "slf4j-api",
        // Logging goes nowhere: stdout carries the protocol.
        "slf4j-nop",
    ];
    let mut missing = Vec::new();
    let mut path = Vec::new();
    for jar in jars {
        let file = format!("/usr/share/java/{jar}.jar");
        if !Path::new(&file).exists() {
            missing.push(file.clone());
        }
        path.push(file);
    }
    assert!(
        missing.is_empty(),
        "the Curator peer needs {missing:?}: install Debian's libcurator-recipes-java, \
         libcurator-framework-java, zookeeper and libslf4j-java (scripts/test.sh does), or set \
         CURATOR_CLASSPATH"
    );
    path.join(":")
}

/// Compiles `CuratorPeer.java` once per test binary; the directory holding its class.
fn curator_classes() -> &'static Path {
    static CLASSES: OnceLock<PathBuf> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let out = scratch_dir().join("classes");
        let source = interop_dir().join("CuratorPeer.java");
        let javac = std::env::var("INTEROP_JAVAC").unwrap_or_else(|_| "javac".into());
        let compiled = std::process::Command::new(&javac)
            .args(["-nowarn", "-cp", &curator_classpath(), "-d"])
            .arg(&out)
            .arg(&source)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run {javac} to build the Curator peer (install a JDK): {e}")
            });
        assert!(
            compiled.status.success(),
            "{javac} failed on {source:?}:\n{}{}",
            String::from_utf8_lossy(&compiled.stdout),
            String::from_utf8_lossy(&compiled.stderr)
        );
        out
    })
}

fn kazoo_python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let python = std::env::var("KAZOO_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
        let probe = std::process::Command::new(&python)
            .args([
                "-c",
                "import inspect, kazoo.recipe.lock as l; \
                 assert 'extra_lock_patterns' in str(inspect.signature(l.Lock.__init__)), \
                 'kazoo too old: Lock has no extra_lock_patterns (needs 2.7.1)'",
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {python} for the kazoo peer: {e}"));
        assert!(
            probe.status.success(),
            "{python} cannot run the kazoo peer (install Debian's python3-kazoo, or set \
             KAZOO_PYTHON): {}",
            String::from_utf8_lossy(&probe.stderr)
        );
        python
    })
}

/// A peer program: one command line in, one reply line out.
struct Peer {
    name: String,
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: PathBuf,
    /// The last command sent, for failure messages.
    last: String,
}

impl Peer {
    /// A Curator client (one session) on `path`.
    async fn curator(zk: &Ensemble, path: &str) -> Peer {
        let classpath = format!("{}:{}", curator_classpath(), curator_classes().display());
        let java = std::env::var("INTEROP_JAVA").unwrap_or_else(|_| "java".into());
        let mut cmd = Command::new(java);
        cmd.args([
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            "-cp",
            &classpath,
            "CuratorPeer",
            &zk.connect_string(),
            path,
        ]);
        Peer::start("curator", cmd).await
    }

    /// A kazoo client (one session) on `path`.
    async fn kazoo(zk: &Ensemble, path: &str) -> Peer {
        let mut cmd = Command::new(kazoo_python());
        cmd.arg("-u")
            .arg(interop_dir().join("kazoo_peer.py"))
            .args([&zk.connect_string(), path]);
        Peer::start("kazoo", cmd).await
    }

    async fn start(kind: &str, mut cmd: Command) -> Peer {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = format!("{kind}-{}", COUNTER.fetch_add(1, Ordering::SeqCst));
        let stderr = scratch_dir().join(format!("{name}.stderr"));
        let log = std::fs::File::create(&stderr)
            .unwrap_or_else(|e| panic!("cannot create {stderr:?}: {e}"));
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true);
        // Dies with the thread that started it (the test's), even if the binary is killed.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the {kind} peer ({cmd:?}): {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut peer = Peer {
            name,
            child,
            stdin,
            stdout,
            stderr,
            last: "(start)".into(),
        };
        let line = peer.line(PEER_TIMEOUT).await;
        if line.as_deref() != Some("ready") {
            peer.fail(&format!("did not start: said {line:?}"));
        }
        peer
    }

    fn fail(&mut self, what: &str) -> ! {
        let status = self.child.try_wait().ok().flatten();
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "peer {} {what} (last command {:?}, exit status {status:?})\n--- stderr tail ({}) ---\n{}",
            self.name,
            self.last,
            self.stderr.display(),
            tail.join("\n")
        );
    }

    /// The next line, `None` on timeout; fails on end of output.
    async fn line(&mut self, timeout: Duration) -> Option<String> {
        match tokio::time::timeout(timeout, self.stdout.next_line()).await {
            Err(_) => None,
            Ok(Ok(Some(line))) => Some(line),
            Ok(Ok(None)) => {
                let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
                self.fail("exited")
            }
            Ok(Err(e)) => self.fail(&format!("stdout unreadable: {e}")),
        }
    }

    async fn send(&mut self, command: &str) {
        self.last = command.to_string();
        let sent = async {
            self.stdin.write_all(command.as_bytes()).await?;
            self.stdin.write_all(b"\n").await?;
            self.stdin.flush().await
        };
        if let Err(e) = sent.await {
            self.fail(&format!("cannot be written to: {e}"));
        }
    }

    /// The reply to the last command if it comes within `timeout`: the text after `ok`.
    async fn reply_within(&mut self, timeout: Duration) -> Option<String> {
        let line = self.line(timeout).await?;
        match line.strip_prefix("ok") {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => Some(rest.trim().to_string()),
            _ => self.fail(&format!("replied {line:?}")),
        }
    }

    async fn reply(&mut self) -> String {
        match self.reply_within(PEER_TIMEOUT).await {
            Some(reply) => reply,
            None => self.fail(&format!("did not reply within {PEER_TIMEOUT:?}")),
        }
    }

    async fn call(&mut self, command: &str) -> String {
        self.send(command).await;
        self.reply().await
    }

    /// Asks the peer to close its client and exit; kills it if it does not.
    async fn quit(mut self) {
        let reply = self.call("quit").await;
        assert_eq!(reply, "bye");
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {
                let _ = std::fs::remove_file(&self.stderr);
            }
            Ok(status) => self.fail(&format!("exited badly after quit: {status:?}")),
            Err(_) => {
                let _ = self.child.kill().await;
                self.fail("did not exit within 10 s of quit");
            }
        }
    }
}

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
    // kazoo's contenders(): node data in its queue order; ours is empty ("-").
    hand_offs_with(zk, peer, &root, "contenders", |queue| {
        queue
            .iter()
            .map(|name| {
                if name.contains("__lock__") {
                    "kazoo-main"
                } else {
                    "-"
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
    let ours = election.leader().await.unwrap().map(|p| p.id);
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
    let ids: Vec<&str> = participants.iter().map(|p| p.id.as_str()).collect();
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
