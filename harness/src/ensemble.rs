//! Real ZooKeeper servers on loopback: start, stop, kill, pause, restart, ask.
//!
//! [`Ensemble`] is here; its parts: `server` (one server: its files, its process, what it
//! answers), `start` (waiting until every server serves, or why not), `four_letter`
//! (four-letter words, and reading the answers about watches), `expire`
//! ([`expire_session`]), `ports` (free ports, each handed out once), `cleanup` (what is
//! left behind, removed).

mod cleanup;
mod expire;
mod four_letter;
mod ports;
mod server;
mod start;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::config::ServerConfig;
use crate::proxy::Proxy;
use crate::wait::PATIENCE;
use cleanup::{remove_at_exit, remove_stale_dirs};
pub use expire::expire_session;
pub use four_letter::four_letter_at;
use four_letter::{mntr_watch_count, path_watches, total_watches};
use ports::{free_ports, reserved_listener};
use server::Server;
use start::{failure_report, wait_all_serving, PORT_CLASH};

/// How long a server may take to start serving before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(40);

/// Real ZooKeeper servers on loopback. Dropping it kills them and removes their files.
pub struct Ensemble {
    dir: PathBuf,
    servers: Vec<Server>,
}

impl Ensemble {
    /// Starts `n` servers (1: standalone) and returns once every one serves and,
    /// for `n > 1`, a leader is elected.
    pub async fn start(n: usize) -> Ensemble {
        Ensemble::start_with(n, &ServerConfig::default()).await
    }

    /// [`start`](Self::start) with `config`'s additions on every server.
    pub async fn start_with(n: usize, config: &ServerConfig) -> Ensemble {
        assert!(n >= 1, "an ensemble needs at least one server");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let ensemble = Ensemble::create(n, config);
            for s in &ensemble.servers {
                s.spawn();
            }
            match wait_all_serving(&ensemble.servers, START_TIMEOUT).await {
                Ok(()) => return ensemble,
                Err(why) => {
                    for s in &ensemble.servers {
                        s.kill();
                    }
                    let port_clash = why.starts_with(PORT_CLASH)
                        || ensemble.servers.iter().any(Server::bind_failed);
                    if port_clash && attempt < 3 {
                        continue; // drop removes the dir; try again with new ports
                    }
                    panic!("{}", failure_report(&ensemble.servers, &why));
                }
            }
        }
    }

    /// One ensemble of `n` servers per test binary, started on first use and shared
    /// by every test that asks; each test must work under its own [`unique_root`].
    /// Never stop, kill or pause servers of a shared ensemble.
    pub async fn shared(n: usize) -> &'static Ensemble {
        Ensemble::shared_with(n, ServerConfig::default()).await
    }

    /// [`shared`](Self::shared), one per `n` and `config`.
    pub async fn shared_with(n: usize, config: ServerConfig) -> &'static Ensemble {
        type Shared = HashMap<(usize, ServerConfig), &'static Ensemble>;
        static SHARED: OnceLock<tokio::sync::Mutex<Shared>> = OnceLock::new();
        let map = SHARED.get_or_init(Default::default);
        let mut map = map.lock().await;
        let key = (n, config);
        if let Some(e) = map.get(&key) {
            return e;
        }
        let started = Ensemble::start_with(n, &key.1).await;
        let ensemble: &'static Ensemble = Box::leak(Box::new(started));
        remove_at_exit(ensemble);
        map.insert(key, ensemble);
        ensemble
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...`
    pub fn connect_string(&self) -> String {
        self.servers
            .iter()
            .map(Server::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `127.0.0.1:s1,127.0.0.1:s2,...`: the TLS client ports of an ensemble started with
    /// [`ServerConfig::secure_client_port`]; panics for one without.
    pub fn secure_connect_string(&self) -> String {
        let address = |s: &Server| match s.secure_port {
            Some(port) => format!("127.0.0.1:{port}"),
            None => panic!("server {} has no TLS client port", s.id),
        };
        let addresses: Vec<String> = self.servers.iter().map(address).collect();
        addresses.join(",")
    }

    /// Client address of server `i` (0-based).
    pub fn address(&self, i: usize) -> String {
        self.servers[i].address()
    }

    /// How many servers it has (at least one, so there is no `is_empty`).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// SIGTERM, then wait for the process to exit (SIGKILL after 10 s).
    pub fn stop(&self, i: usize) {
        self.servers[i].stop();
    }

    /// SIGKILL, then wait for the process to exit.
    pub fn kill(&self, i: usize) {
        self.servers[i].kill();
    }

    /// SIGSTOP: the process stays, its sockets stay open, nothing is answered.
    pub fn pause(&self, i: usize) {
        self.servers[i].signal(libc::SIGSTOP);
        self.servers[i].await_stopped();
        self.servers[i].paused.store(true, Ordering::SeqCst);
    }

    /// SIGCONT.
    pub fn resume(&self, i: usize) {
        self.servers[i].signal(libc::SIGCONT);
        self.servers[i].paused.store(false, Ordering::SeqCst);
    }

    /// Starts a stopped or killed server again (same ports, same data) and waits
    /// until it serves (in an ensemble: has joined the quorum).
    pub async fn restart(&self, i: usize) {
        let s = &self.servers[i];
        s.kill(); // no-op when it is not running
        s.spawn();
        let deadline = Instant::now() + START_TIMEOUT;
        while s.mode().await.is_none() {
            if !s.is_running() || Instant::now() >= deadline {
                panic!(
                    "server {} did not come back on {}\n--- log tail ---\n{}",
                    s.id,
                    s.address(),
                    s.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            s.answers_itself().await,
            "another process answers on {} (port taken while server {} was down)",
            s.address(),
            s.id
        );
    }

    /// Sends a four-letter word to server `i` and returns its whole answer
    /// (empty when the server does not answer within 2 s).
    pub async fn four_letter(&self, i: usize, cmd: &str) -> String {
        four_letter_at(&self.servers[i].address(), cmd).await
    }

    /// Index of the server whose `srvr` says `Mode: leader` (standalone: `Some(0)`).
    pub async fn leader(&self) -> Option<usize> {
        for (i, s) in self.servers.iter().enumerate() {
            match s.mode().await.as_deref() {
                Some("leader") | Some("standalone") => return Some(i),
                _ => {}
            }
        }
        None
    }

    /// Waits until some server leads; panics after `timeout`.
    pub async fn wait_for_leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.leader().await {
                return i;
            }
            if Instant::now() >= deadline {
                let mut modes = String::new();
                for s in &self.servers {
                    let _ = write!(modes, " s{}={:?}", s.id, s.mode().await);
                }
                panic!("no leader elected within {timeout:?}:{modes}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Total watches over all serving servers (sum of `wchs`'s `Total watches:N`).
    pub async fn watch_count(&self) -> usize {
        let mut total = 0;
        for s in self.serving() {
            total += total_watches(&four_letter_at(&s.address(), "wchs").await);
        }
        total
    }

    /// The sessions that watch `path`, by the serving servers' `wchp`, as `0x…` ids (as
    /// `zookeeper_client::SessionId` displays them).
    pub async fn watchers(&self, path: &str) -> BTreeSet<String> {
        let mut sessions = BTreeSet::new();
        for s in self.serving() {
            let out = four_letter_at(&s.address(), "wchp").await;
            let on_path = path_watches(&out).filter(|(watched, _)| *watched == path);
            sessions.extend(on_path.map(|(_, session)| session.to_owned()));
        }
        sessions
    }

    /// The paths under `root` that have data watches, each with the number of sessions
    /// that watch it, by the serving servers' `wchp`.
    ///
    /// `wchc`, `wchp` and `wchs` report data watches only (`get_and_watch_data`,
    /// `check_and_watch_stat`): see [`child_watch_count`](Self::child_watch_count).
    pub async fn watched_under(&self, root: &str) -> BTreeMap<String, usize> {
        let under = format!("{root}/");
        let mut watched = BTreeMap::new();
        for s in self.serving() {
            let out = four_letter_at(&s.address(), "wchp").await;
            for (path, _) in path_watches(&out).filter(|(path, _)| path.starts_with(&under)) {
                *watched.entry(path.to_owned()).or_default() += 1;
            }
        }
        watched
    }

    /// Waits until the data watches under `root` are exactly `expected` (path → number of
    /// sessions). Watches are set in the background and the server offers no event for them,
    /// so this polls; fails the test after [`PATIENCE`].
    pub async fn await_watched_under(&self, root: &str, expected: &BTreeMap<String, usize>) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let watched = self.watched_under(root).await;
            if &watched == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "data watches under {root}: {watched:?}, expected {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Child watches (`list_and_watch_children`, `get_and_watch_children`) over all serving
    /// servers: `mntr`'s `zk_watch_count` counts data and child watches, [`watch_count`]
    /// (`wchs`) data watches only.
    ///
    /// [`watch_count`]: Self::watch_count
    pub async fn child_watch_count(&self) -> usize {
        let mut all = 0;
        for s in self.serving() {
            all += mntr_watch_count(&four_letter_at(&s.address(), "mntr").await);
        }
        all.saturating_sub(self.watch_count().await)
    }

    /// Waits until [`child_watch_count`](Self::child_watch_count) is `n`; fails the test
    /// after [`PATIENCE`].
    pub async fn await_child_watch_count(&self, n: usize) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let counted = self.child_watch_count().await;
            if counted == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{counted} child watches, expected {n}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The servers that run and are not paused.
    fn serving(&self) -> impl Iterator<Item = &Server> {
        self.servers
            .iter()
            .filter(|s| !s.paused.load(Ordering::SeqCst) && s.is_running())
    }

    /// Waits until `session` (a `0x…` id) watches `path`. Setting a watch raises no event
    /// anyone could wait on, so this polls `wchp`; fails the test after [`PATIENCE`].
    pub async fn await_watcher(&self, path: &str, session: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let watchers = self.watchers(path).await;
            if watchers.contains(session) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "session {session} never watched {path}; its watchers: {watchers:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A TCP proxy on a free 127.0.0.1 port in front of server `i`.
    /// Must be called within a tokio runtime, which runs the proxy.
    pub async fn proxy(&self, i: usize) -> Proxy {
        Proxy::start(reserved_listener(), self.servers[i].client_port)
    }

    // ----- internals -----

    fn create(n: usize, config: &ServerConfig) -> Ensemble {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "zk-recipes-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let ports = free_ports(4 * n);
        let servers: Vec<Server> = (0..n)
            .map(|i| Server::new(i + 1, &dir, &ports[4 * i..4 * i + 4], config))
            .collect();
        let ensemble = Ensemble { dir, servers };
        for s in &ensemble.servers {
            s.write_config(&ensemble.servers, config)
                .unwrap_or_else(|e| panic!("cannot write config under {:?}: {e}", s.dir));
        }
        ensemble
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        for s in &self.servers {
            s.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `/t-<name>-<random>`: a root path no other test (or earlier run) uses.
pub fn unique_root(name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::SeqCst));
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("/t-{name}-{:012x}", h.finish() & 0xffff_ffff_ffff)
}
