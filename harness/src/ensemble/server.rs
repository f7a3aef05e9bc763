//! One ZooKeeper server of an [`Ensemble`](super::Ensemble): its ports and files, its
//! `zoo.cfg`, its process (start, signal, stop, kill) and what it answers (its mode,
//! whether the answer is its own).

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::four_letter::four_letter_at;
use crate::config::ServerConfig;
use crate::launcher;

/// How long `stop` waits for a SIGTERM'ed server before it kills it.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// ZooKeeper tick; session timeouts are negotiated within [2, 300] ticks.
const TICK_MS: u64 = 200;

/// One server: `myid`, ports, dir, and the process while it runs.
pub(super) struct Server {
    /// `myid` (1-based).
    pub(super) id: usize,
    pub(super) client_port: u16,
    /// The TLS client port, if the ensemble has one.
    pub(super) secure_port: Option<u16>,
    quorum_port: u16,
    election_port: u16,
    pub(super) dir: PathBuf,
    /// The JVM options the ensemble's [`ServerConfig`] adds.
    jvm: Vec<String>,
    pub(super) child: Mutex<Option<Child>>,
    pub(super) paused: AtomicBool,
}

impl Server {
    /// Server `id` (1-based) of the ensemble under `ensemble_dir`, on `ports` (client,
    /// quorum, election, TLS client), with `config`'s JVM options; not started.
    pub(super) fn new(
        id: usize,
        ensemble_dir: &Path,
        ports: &[u16],
        config: &ServerConfig,
    ) -> Server {
        let dir = ensemble_dir.join(format!("s{id}"));
        Server {
            id,
            client_port: ports[0],
            secure_port: config.secure_client_port.then_some(ports[3]),
            quorum_port: ports[1],
            election_port: ports[2],
            jvm: (config.jvm.iter())
                .map(|option| ServerConfig::expand(option, &dir))
                .collect(),
            dir,
            child: Mutex::new(None),
            paused: AtomicBool::new(false),
        }
    }

    fn cfg_path(&self) -> PathBuf {
        self.dir.join("zoo.cfg")
    }

    pub(super) fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    pub(super) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn pid(&self) -> Option<i32> {
        self.child.lock().unwrap().as_ref().map(|c| c.id() as i32)
    }

    pub(super) fn is_running(&self) -> bool {
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

    pub(super) fn spawn(&self) {
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

    pub(super) fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// Waits until every thread of the server is stopped: SIGSTOP takes effect on each
    /// thread when it is next scheduled, so on a loaded machine a running thread can still
    /// answer a request right after the signal was sent.
    pub(super) fn await_stopped(&self) {
        let Some(pid) = self.pid() else { return };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline && !all_threads_stopped(pid) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub(super) fn kill(&self) {
        let mut child = self.child.lock().unwrap();
        if let Some(mut c) = child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    pub(super) fn stop(&self) {
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
    pub(super) async fn answers_itself(&self) -> bool {
        let data = self.dir.join("data");
        four_letter_at(&self.address(), "conf")
            .await
            .contains(&format!("dataDir={}", data.display()))
    }

    /// Serving: answers `srvr` with a mode (a follower only does once synced with a leader).
    pub(super) async fn mode(&self) -> Option<String> {
        if self.paused.load(Ordering::SeqCst) || !self.is_running() {
            return None;
        }
        let out = four_letter_at(&self.address(), "srvr").await;
        out.lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(|m| m.trim().to_string())
    }

    pub(super) fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    pub(super) fn bind_failed(&self) -> bool {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        text.contains("Address already in use") || text.contains("BindException")
    }

    /// Writes its `zoo.cfg` (naming every server of `all`, its ensemble, when there are
    /// several), its `myid`, and `config`'s files into its dir.
    pub(super) fn write_config(&self, all: &[Server], config: &ServerConfig) -> io::Result<()> {
        let s = self;
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
        if all.len() > 1 {
            for o in all {
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
