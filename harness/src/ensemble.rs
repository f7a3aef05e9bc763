//! Real ZooKeeper servers on loopback: start, stop, kill, pause, restart, ask.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::ServerConfig;
use crate::launcher;
use crate::proxy::Proxy;
use crate::wait::PATIENCE;

/// How long a server may take to start serving before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(40);
/// How long a four-letter word may take before it counts as "no answer".
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long `stop` waits for a SIGTERM'ed server before it kills it.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Start failure because another process took a port first: retried.
const PORT_CLASH: &str = "port clash";
/// ZooKeeper tick; session timeouts are negotiated within [2, 300] ticks.
const TICK_MS: u64 = 200;

struct Server {
    /// `myid` (1-based).
    id: usize,
    client_port: u16,
    /// The TLS client port, if the ensemble has one.
    secure_port: Option<u16>,
    quorum_port: u16,
    election_port: u16,
    dir: PathBuf,
    /// The JVM options the ensemble's [`ServerConfig`] adds.
    jvm: Vec<String>,
    child: Mutex<Option<Child>>,
    paused: AtomicBool,
}

impl Server {
    fn cfg_path(&self) -> PathBuf {
        self.dir.join("zoo.cfg")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn pid(&self) -> Option<i32> {
        self.child.lock().unwrap().as_ref().map(|c| c.id() as i32)
    }

    fn is_running(&self) -> bool {
        let mut child = self.child.lock().unwrap();
        match child.as_mut() {
            None => false,
            Some(c) => match c.try_wait() {
                Ok(None) => true,
                _ => {
                    *child = None;
                    false
                }
            },
        }
    }

    fn spawn(&self) {
        let mut child = self.child.lock().unwrap();
        if let Some(c) = child.as_mut() {
            if matches!(c.try_wait(), Ok(None)) {
                panic!("server {} is still running", self.id);
            }
        }
        let spawned = launcher::spawn(&self.cfg_path(), &self.log_path(), &self.dir, &self.jvm)
            .unwrap_or_else(|e| panic!("cannot start java for server {}: {e}", self.id));
        *child = Some(spawned);
        self.paused.store(false, Ordering::SeqCst);
    }

    fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// Waits until every thread of the server is stopped: SIGSTOP takes effect on each
    /// thread when it is next scheduled, so on a loaded machine a running thread can still
    /// answer a request right after the signal was sent.
    fn await_stopped(&self) {
        let Some(pid) = self.pid() else { return };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline && !all_threads_stopped(pid) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn kill(&self) {
        let mut child = self.child.lock().unwrap();
        if let Some(mut c) = child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    fn stop(&self) {
        let mut child = self.child.lock().unwrap();
        if let Some(mut c) = child.take() {
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
                // A stopped process handles SIGTERM only once it runs again.
                libc::kill(c.id() as i32, libc::SIGCONT);
            }
            let deadline = Instant::now() + STOP_TIMEOUT;
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Whoever answers on the client port is this server (not another process
    /// that took the port first): its `conf` names our data dir.
    async fn answers_itself(&self) -> bool {
        let data = self.dir.join("data");
        four_letter_at(&self.address(), "conf")
            .await
            .contains(&format!("dataDir={}", data.display()))
    }

    /// Serving: answers `srvr` with a mode (a follower only does once synced with a leader).
    async fn mode(&self) -> Option<String> {
        if self.paused.load(Ordering::SeqCst) || !self.is_running() {
            return None;
        }
        let out = four_letter_at(&self.address(), "srvr").await;
        out.lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|m| m.trim().to_string())
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn bind_failed(&self) -> bool {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        text.contains("Address already in use") || text.contains("BindException")
    }
}

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
            match ensemble.wait_all_serving(START_TIMEOUT).await {
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
                    panic!("{}", ensemble.failure_report(&why));
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
        for s in &self.servers {
            if s.paused.load(Ordering::SeqCst) || !s.is_running() {
                continue;
            }
            let out = four_letter_at(&s.address(), "wchs").await;
            total += out
                .lines()
                .find_map(|l| l.trim().strip_prefix("Total watches:"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
        }
        total
    }

    /// The sessions that watch `path`, by the serving servers' `wchp`, as `0x…` ids (as
    /// `zookeeper_client::SessionId` displays them).
    pub async fn watchers(&self, path: &str) -> BTreeSet<String> {
        let mut sessions = BTreeSet::new();
        for s in &self.servers {
            if s.paused.load(Ordering::SeqCst) || !s.is_running() {
                continue;
            }
            let out = four_letter_at(&s.address(), "wchp").await;
            let mut on_path = false;
            for line in out.lines() {
                if line.starts_with(char::is_whitespace) {
                    if on_path {
                        sessions.insert(line.trim().to_owned());
                    }
                } else {
                    on_path = line.trim() == path;
                }
            }
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
            let mut path: Option<&str> = None;
            for line in out.lines() {
                if !line.starts_with(char::is_whitespace) {
                    path = Some(line.trim()).filter(|p| p.starts_with(&under));
                } else if let Some(path) = path {
                    *watched.entry(path.to_owned()).or_default() += 1;
                }
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
            let out = four_letter_at(&s.address(), "mntr").await;
            all += out
                .lines()
                .find_map(|l| l.strip_prefix("zk_watch_count"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
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
            .map(|i| {
                let dir = dir.join(format!("s{}", i + 1));
                Server {
                    id: i + 1,
                    client_port: ports[4 * i],
                    secure_port: config.secure_client_port.then_some(ports[4 * i + 3]),
                    quorum_port: ports[4 * i + 1],
                    election_port: ports[4 * i + 2],
                    jvm: (config.jvm.iter())
                        .map(|option| ServerConfig::expand(option, &dir))
                        .collect(),
                    dir,
                    child: Mutex::new(None),
                    paused: AtomicBool::new(false),
                }
            })
            .collect();
        let ensemble = Ensemble { dir, servers };
        for s in &ensemble.servers {
            ensemble
                .write_config(s, config)
                .unwrap_or_else(|e| panic!("cannot write config under {:?}: {e}", s.dir));
        }
        ensemble
    }

    fn write_config(&self, s: &Server, config: &ServerConfig) -> io::Result<()> {
        let data = s.dir.join("data");
        std::fs::create_dir_all(&data)?;
        let mut cfg = format!(
            "tickTime={TICK_MS}\n\
             initLimit=20\n\
             syncLimit=10\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=*\n\
             admin.enableServer=false\n\
             minSessionTimeout={min}\n\
             maxSessionTimeout=60000\n\
             maxClientCnxns=0\n\
             forceSync=no\n\
             preAllocSize=1024\n\
             autopurge.purgeInterval=0\n\
             reconfigEnabled=false\n",
            data = data.display(),
            port = s.client_port,
            min = 2 * TICK_MS,
        );
        if self.servers.len() > 1 {
            for o in &self.servers {
                let _ = writeln!(
                    cfg,
                    "server.{}=127.0.0.1:{}:{}",
                    o.id, o.quorum_port, o.election_port
                );
            }
            std::fs::write(data.join("myid"), format!("{}\n", s.id))?;
        }
        if let Some(port) = s.secure_port {
            let _ = write!(
                cfg,
                "secureClientPort={port}\n\
                 serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
            );
        }
        for line in &config.cfg {
            let _ = writeln!(cfg, "{}", ServerConfig::expand(line, &s.dir));
        }
        for (name, contents) in &config.files {
            std::fs::write(s.dir.join(name), contents)?;
        }
        std::fs::write(s.cfg_path(), cfg)
    }

    async fn wait_all_serving(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut modes = Vec::new();
            for s in &self.servers {
                if !s.is_running() {
                    return Err(format!("server {} exited during startup", s.id));
                }
                modes.push(s.mode().await);
            }
            let all = modes.iter().all(Option::is_some);
            let led = modes
                .iter()
                .any(|m| matches!(m.as_deref(), Some("leader") | Some("standalone")));
            if all && led {
                for s in &self.servers {
                    if !s.answers_itself().await {
                        return Err(format!(
                            "{PORT_CLASH}: another process answers on {}",
                            s.address()
                        ));
                    }
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("not serving after {timeout:?}: modes {modes:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn failure_report(&self, why: &str) -> String {
        let mut report = format!(
            "ZooKeeper ensemble of {} failed to start: {why}\n(class path: {})\n",
            self.servers.len(),
            launcher::classpath()
        );
        for s in &self.servers {
            let _ = write!(
                report,
                "--- server {} ({}) log tail ---\n{}\n",
                s.id,
                s.log_path().display(),
                s.log_tail(40)
            );
        }
        report
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

/// Shared ensembles are never dropped: kill their servers (PDEATHSIG would, too)
/// and remove their files when the test binary exits.
fn remove_at_exit(ensemble: &'static Ensemble) {
    static SHARED: Mutex<Vec<&'static Ensemble>> = Mutex::new(Vec::new());
    static REGISTER: OnceLock<()> = OnceLock::new();

    extern "C" fn cleanup() {
        let Ok(shared) = SHARED.try_lock() else {
            return;
        };
        for ensemble in shared.iter() {
            for s in &ensemble.servers {
                if let Ok(mut child) = s.child.try_lock() {
                    if let Some(mut c) = child.take() {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&ensemble.dir);
        }
    }

    REGISTER.get_or_init(|| unsafe {
        libc::atexit(cleanup);
    });
    SHARED.lock().unwrap().push(ensemble);
}

/// Whether every thread of process `pid` is in the stopped state (`T` in its stat line).
fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true; // gone: nothing answers any more
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
            // The state follows the command name, which is in parentheses.
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
        })
    })
}

/// Sends `cmd` to the server at `address`, reads the answer to EOF.
/// Empty when the server cannot be reached or does not answer in time.
pub async fn four_letter_at(address: &str, cmd: &str) -> String {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await?;
        stream.write_all(cmd.as_bytes()).await?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await?;
        io::Result::Ok(String::from_utf8_lossy(&out).into_owned())
    };
    match tokio::time::timeout(FOUR_LETTER_TIMEOUT, exchange).await {
        Ok(Ok(out)) => out,
        _ => String::new(),
    }
}

/// Forces expiry of a live session: a second client takes the session over with
/// its id and password, then closes it, until a take-over attempt is answered
/// "session expired" by the server; then waits until no server lists the session
/// among its connections any more.
///
/// ZooKeeper 3.8 drops the older connection of a session when another one takes
/// it over, so the owner reconnects and may take it back before the second
/// client's handshake finished: take-over attempts fail fast and are repeated.
pub async fn expire_session(connect_string: &str, session: &zookeeper_client::SessionInfo) {
    use zookeeper_client::{Client, Error, SessionState};

    let id = session.id();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let twin = Client::connector()
            .with_session(session.clone())
            .with_session_timeout(Duration::from_secs(2))
            .with_fail_eagerly()
            .connect(connect_string)
            .await;
        match twin {
            Ok(twin) => {
                let mut state = twin.state_watcher();
                drop(twin); // the last handle: the client sends CloseSession
                let closed = async {
                    loop {
                        match state.changed().await {
                            SessionState::Closed | SessionState::Expired => break,
                            _ => continue,
                        }
                    }
                };
                if tokio::time::timeout(Duration::from_secs(10), closed)
                    .await
                    .is_err()
                {
                    panic!("closing session {id} was not acknowledged within 10 s");
                }
                // The victim may have taken the session back before the close reached the
                // server (each takeover kicks the other connection): try again until the
                // server itself answers that the session is gone.
            }
            Err(Error::SessionExpired) => break, // already gone
            Err(e) if Instant::now() >= deadline => {
                panic!("cannot take over session {id} to expire it: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    // No server should list the session among its connections any more.
    let needle = format!("sid={id}");
    let deadline = Instant::now() + Duration::from_secs(5);
    'poll: while Instant::now() < deadline {
        for address in connect_string.split(',') {
            if four_letter_at(address.trim(), "cons")
                .await
                .contains(&needle)
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue 'poll;
            }
        }
        break;
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

/// Ports this process handed out (servers bind them later; the proxy's are taken).
static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// `n` distinct free ports on 127.0.0.1, never handed out twice by this process.
fn free_ports(n: usize) -> Vec<u16> {
    let mut given = GIVEN.lock().unwrap();
    let mut ports = Vec::with_capacity(n);
    // Keep the listeners open until all are chosen so the OS hands out distinct ones.
    let mut held = Vec::new();
    while ports.len() < n {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        held.push(listener);
        if !given.contains(&port) {
            given.push(port);
            ports.push(port);
        }
    }
    ports
}

/// A listener on a free 127.0.0.1 port that is not one handed out to a server
/// which may not have bound it yet.
fn reserved_listener() -> TcpListener {
    let mut given = GIVEN.lock().unwrap();
    let mut held = Vec::new();
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return listener;
        }
        held.push(listener);
    }
}

/// Removes `zk-recipes-<pid>-*` dirs left by test binaries that no longer run.
fn remove_stale_dirs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix("zk-recipes-") else {
                continue;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
}
