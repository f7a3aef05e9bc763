//! Spawns ZooKeeper server JVMs from one dedicated, never-exiting thread.
//!
//! Every child gets `PR_SET_PDEATHSIG = SIGKILL`. Linux sends that signal when
//! the *thread* that forked the child exits, so all children are forked by the
//! launcher thread below, which lives as long as the test binary: when the
//! binary exits (tests passed, failed or panicked), the kernel kills the servers.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

struct Request {
    cfg: PathBuf,
    log: PathBuf,
    dir: PathBuf,
    jvm: Vec<String>,
    reply: mpsc::Sender<io::Result<Child>>,
}

/// Class path of the server: `ZK_CLASSPATH`, or Debian's `zookeeper` package
/// (its jar's manifest names its dependencies) plus slf4j-simple for logging and
/// netty-codec, which the manifest leaves out and the Netty (TLS) server needs.
pub fn classpath() -> String {
    if let Ok(cp) = std::env::var("ZK_CLASSPATH") {
        return cp;
    }
    let mut jars = vec!["/usr/share/java/zookeeper.jar"];
    // slf4j-simple logs to stderr, which goes to the server's log file.
    for extra in [
        "/usr/share/java/slf4j-simple.jar",
        "/usr/share/java/netty-codec.jar",
    ] {
        if Path::new(extra).exists() {
            jars.push(extra);
        }
    }
    jars.join(":")
}

fn java() -> String {
    std::env::var("ZK_JAVA").unwrap_or_else(|_| "java".to_string())
}

fn command(req: &Request) -> io::Result<Command> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&req.log)?;
    let mut cmd = Command::new(java());
    cmd.args([
        "-Xmx256m",
        "-Xss512k",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-Djava.net.preferIPv4Stack=true",
        "-Dzookeeper.jmx.log4j.disable=true",
        // Fast elections: short quorum connect timeout, bounded notification backoff.
        "-Dzookeeper.cnxTimeout=1000",
        "-Dzookeeper.fastleader.maxNotificationInterval=1000",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
    ])
    .args(&req.jvm)
    .args([
        "-cp",
        &classpath(),
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
    ])
    .arg(&req.cfg)
    .current_dir(&req.dir)
    .stdin(Stdio::null())
    .stdout(log.try_clone()?)
    .stderr(log);
    let parent = std::process::id() as libc::pid_t;
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died between fork and prctl: nobody would kill us later.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    Ok(cmd)
}

fn launcher() -> &'static Mutex<mpsc::Sender<Request>> {
    static LAUNCHER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("zk-launcher".into())
            .spawn(move || {
                // Never returns: `tx` lives in a static, so `recv` never fails.
                while let Ok(req) = rx.recv() {
                    let child = command(&req).and_then(|mut c| c.spawn());
                    let _ = req.reply.send(child);
                }
                loop {
                    std::thread::park();
                }
            })
            .expect("spawn launcher thread");
        Mutex::new(tx)
    })
}

/// Starts `java <jvm> ... QuorumPeerMain <cfg>` in `dir`, stdout and stderr appended to `log`.
pub fn spawn(cfg: &Path, log: &Path, dir: &Path, jvm: &[String]) -> io::Result<Child> {
    if std::env::var_os("ZK_CLASSPATH").is_none()
        && !Path::new("/usr/share/java/zookeeper.jar").exists()
    {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "/usr/share/java/zookeeper.jar not found: install Debian's `zookeeper` package \
             (bash scripts/test.sh does) or set ZK_CLASSPATH",
        ));
    }
    let (reply, answer) = mpsc::channel();
    let req = Request {
        cfg: cfg.to_path_buf(),
        log: log.to_path_buf(),
        dir: dir.to_path_buf(),
        jvm: jvm.to_vec(),
        reply,
    };
    launcher()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send(req)
        .map_err(|_| io::Error::other("launcher thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("launcher thread is gone"))?
}
