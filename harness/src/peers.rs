//! Peers: small programs of other ZooKeeper recipe libraries in `tests/interop/`, driven
//! over stdin/stdout — a Curator peer (Java, compiled with `javac` when first needed,
//! against Debian's `libcurator-recipes-java` jars) and a kazoo peer (Python, under Debian's
//! `/usr/bin/python3` with `python3-kazoo`). A peer that cannot run fails the test (or the
//! benchmark) with the reason: nothing is skipped.
//!
//! Overrides: `CURATOR_CLASSPATH` (jars for the Java peer), `INTEROP_JAVA`, `INTEROP_JAVAC`,
//! `KAZOO_PYTHON` (a python3 that can `import kazoo`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::Ensemble;

/// How long a peer may take to start (JVM start and connect) and to answer a command.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// The peers' sources: `tests/interop/` of the zk-recipes package.
fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/interop")
}

/// `$TMPDIR/zk-recipes-interop-<pid>`: the peer's classes and stderr logs (a peer that quits
/// cleanly removes its log). Directories of processes that no longer run are removed.
fn scratch_dir() -> PathBuf {
    let base = std::env::temp_dir();
    let base = base.as_path();
    static STALE: OnceLock<()> = OnceLock::new();
    STALE.get_or_init(|| {
        for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("zk-recipes-interop-")
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    let dir = base.join(format!("zk-recipes-interop-{}", std::process::id()));
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

/// Compiles `CuratorPeer.java`, `CuratorGroupPeer.java` and `CuratorCachePeer.java` once per
/// test binary; the
/// directory holding their classes.
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
            .arg(interop_dir().join("CuratorGroupPeer.java"))
            .arg(interop_dir().join("CuratorCachePeer.java"))
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
pub struct Peer {
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
    pub async fn curator(zk: &Ensemble, path: &str) -> Peer {
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
    pub async fn kazoo(zk: &Ensemble, path: &str) -> Peer {
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

    pub fn fail(&mut self, what: &str) -> ! {
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
    pub async fn line(&mut self, timeout: Duration) -> Option<String> {
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

    pub async fn send(&mut self, command: &str) {
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
    pub async fn reply_within(&mut self, timeout: Duration) -> Option<String> {
        let line = self.line(timeout).await?;
        match line.strip_prefix("ok") {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => Some(rest.trim().to_string()),
            _ => self.fail(&format!("replied {line:?}")),
        }
    }

    pub async fn reply(&mut self) -> String {
        match self.reply_within(PEER_TIMEOUT).await {
            Some(reply) => reply,
            None => self.fail(&format!("did not reply within {PEER_TIMEOUT:?}")),
        }
    }

    pub async fn call(&mut self, command: &str) -> String {
        self.send(command).await;
        self.reply().await
    }

    /// Asks the peer to close its client and exit; kills it if it does not.
    pub async fn quit(mut self) {
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

impl Peer {
    /// A Curator client (one session) whose `GroupMember`s join the group on `path`
    /// (`tests/interop/CuratorGroupPeer.java` lists its commands).
    pub async fn curator_group(zk: &Ensemble, path: &str) -> Peer {
        let cmd = curator_program("CuratorGroupPeer", &["-Xmx128m", "-XX:TieredStopAtLevel=1"]);
        Peer::start("curator-group", with_target(cmd, zk, path)).await
    }

    /// A Curator client (one session) that keeps a `CuratorCache` of `path`
    /// (`tests/interop/CuratorCachePeer.java` lists its commands), with room for a large
    /// cache (1 GiB of heap) and the optimizing compiler, for benchmarks.
    pub async fn curator_cache(zk: &Ensemble, path: &str) -> Peer {
        let cmd = curator_program("CuratorCachePeer", &["-Xmx1g"]);
        Peer::start("curator-cache", with_target(cmd, zk, path)).await
    }
}

/// `java` running the Curator peer `class` with the JVM options `options`.
fn curator_program(class: &str, options: &[&str]) -> Command {
    let classes = curator_classes().display().to_string();
    let classpath = format!("{}:{classes}", curator_classpath());
    let java = std::env::var("INTEROP_JAVA").unwrap_or_else(|_| "java".into());
    let mut cmd = Command::new(java);
    cmd.args(options)
        .args([
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            "-cp",
            &classpath,
        ])
        .arg(class);
    cmd
}

/// `cmd` with the servers of `zk` and `path` as its arguments.
fn with_target(mut cmd: Command, zk: &Ensemble, path: &str) -> Command {
    cmd.args([&zk.connect_string(), path]);
    cmd
}
