//! Running the `zk-recipes` binary in tests, against servers from `zk-harness`.
//!
//! Every process is started with `kill_on_drop`, so a failing test leaves none behind; each
//! test works in a scratch directory of its own, removed when it passes.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use zk_harness::{bounded, children, observer, unique_root, Ensemble, PATIENCE};
use zk_recipes::{Lease, Mutex, MutexGuard, Semaphore, Session};

/// What a test works on: the binary's shared standalone server, a lock or election path and
/// a scratch directory of its own.
#[derive(Debug)]
pub struct Test {
    pub hosts: String,
    pub root: String,
    pub scratch: Scratch,
}

impl Test {
    pub async fn new(name: &str) -> Test {
        let ensemble = Ensemble::shared(1).await;
        Test {
            hosts: ensemble.connect_string(),
            root: unique_root(&format!("cli-{name}")),
            scratch: Scratch::new(name),
        }
    }

    /// `zk-recipes ARGS` on the test's server.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = zk_recipes(&self.hosts);
        command.args(args);
        command
    }

    /// Takes the lock on the test's path with the library, on a session of its own.
    pub async fn hold_lock(&self) -> (Session, MutexGuard) {
        let session = Session::connect(&self.hosts).await.expect("connect");
        let mutex = Mutex::new(&session, &self.root).expect("a mutex");
        let guard = mutex.lock().await.expect("lock");
        (session, guard)
    }

    /// Takes `n` leases of a semaphore of `max` on the test's path with the library, on a
    /// session of its own.
    pub async fn hold_leases(&self, max: u32, n: usize) -> (Session, Vec<Lease>) {
        let session = Session::connect(&self.hosts).await.expect("connect");
        let semaphore = Semaphore::new(&session, &self.root, max).expect("a semaphore");
        let mut leases = Vec::with_capacity(n);
        for _ in 0..n {
            leases.push(semaphore.acquire().await.expect("a lease"));
        }
        (session, leases)
    }

    /// The names of the path's children now, in queue order.
    pub async fn children(&self) -> Vec<String> {
        children(&observer(&self.hosts).await, &self.root).await
    }
}

/// A `zk-recipes` command on `hosts`: arguments still to add; standard input closed.
pub fn zk_recipes(hosts: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_zk-recipes"));
    command
        .env("ZK_HOSTS", hosts)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Starts `command`; fails the test if it cannot.
pub fn start(command: &mut Command) -> Child {
    command.spawn().expect("start zk-recipes")
}

/// Waits for `child` to exit, at most `within`; fails the test otherwise.
pub async fn exit_within(child: &mut Child, within: Duration) -> ExitStatus {
    bounded("zk-recipes to exit", within, child.wait())
        .await
        .expect("wait for zk-recipes")
}

/// Sends `signal` to `child` (zk-recipes itself, not its CMD).
pub fn signal(child: &Child, signal: Signal) {
    let pid = child.id().expect("zk-recipes still running");
    let pid = Pid::from_raw(i32::try_from(pid).expect("a pid"));
    kill(pid, signal).expect("signal zk-recipes");
}

/// Starts `zk-recipes lock [options] ROOT -- sh -c SCRIPT STARTED TERMED` (two files of
/// the scratch directory, `$0` and `$1` in the script); returns it with the first line the
/// script writes to STARTED, once it has.
pub async fn lock_running(test: &Test, options: &[&str], script: &str) -> (Child, String) {
    let started = test.scratch.file("started");
    let mut lock = test.command(&["lock"]);
    lock.args(options)
        .args([&test.root, "--", "sh", "-c", script]);
    let lock = start(lock.arg(&started).arg(test.scratch.file("termed")));
    let line = await_lines(&started, 1).await.remove(0);
    (lock, line)
}

/// Starts `command` with its stdout piped; returns it with its stdout, once it has printed
/// its first line, and that line.
pub async fn first_line(command: &mut Command) -> (Child, BufReader<ChildStdout>, String) {
    let mut child = start(command.stdout(Stdio::piped()));
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    bounded("a first line", PATIENCE, stdout.read_line(&mut line))
        .await
        .expect("read the output");
    (child, stdout, line)
}

/// Runs `command` to its end, at most [`PATIENCE`], with stdout and stderr captured;
/// returns its output and how long it took.
pub async fn output_within(command: &mut Command) -> (Output, Duration) {
    let started = Instant::now();
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = bounded("zk-recipes to exit", PATIENCE, command.output())
        .await
        .expect("run zk-recipes");
    (output, started.elapsed())
}

/// Deletes `node` as an operator would; returns when the server has confirmed it.
pub async fn delete_from_outside(hosts: &str, node: &str) -> Instant {
    let client = observer(hosts).await;
    client
        .delete(node, None)
        .await
        .expect("delete the lock node");
    Instant::now()
}

/// The write end of a pipe whose read end is closed already: writes to it fail (EPIPE), as
/// into `| head -c0` once `head` has exited.
pub fn closed_pipe() -> Stdio {
    let (read, write) = nix::unistd::pipe().expect("a pipe");
    drop(read);
    Stdio::from(write)
}

/// `/dev/full`, opened for writing: every write fails (ENOSPC).
pub fn full_device() -> Stdio {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    Stdio::from(full)
}

/// Waits until process `pid` is gone (see [`alive`]), at most `within`; fails the test
/// otherwise.
pub async fn await_dead(pid: i32, within: Duration) {
    let deadline = Instant::now() + within;
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} still runs after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether process `pid` still exists (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.contains(") Z "),
        Err(_) => false,
    }
}

/// A directory of the test's own under the system's temporary directory.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("zkr-cli-test-{}-{name}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        Scratch(dir)
    }

    /// The path of `file` in it, as CMD's argument.
    pub fn file(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Waits until `file` holds at least `lines` lines; returns them. Fails the test after
/// [`PATIENCE`].
pub async fn await_lines(file: &Path, lines: usize) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let read: Vec<String> = text.lines().map(str::to_owned).collect();
        if read.len() >= lines {
            return read;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held {lines} lines; it holds {read:?}",
            file.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The lines of `file` now (none if it does not exist).
pub fn lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}
