//! CMD as a child process, in a process group that zk-recipes controls, with a watchdog.
//!
//! * **Group.** CMD runs in a process group of its own, so that stopping it reaches what
//!   it started too (`sh -c '...'` and its commands): signals go to the whole group. The
//!   group is led by a watchdog (below) that lives until CMD has ended, so the group's name
//!   (the watchdog's pid) cannot be reused while zk-recipes signals it.
//! * **CMD's end.** When CMD exits, whatever it left running in its group (`cmd &` without
//!   `wait`) gets SIGKILL before zk-recipes goes on (releases the lock, or exits): it must
//!   not run beside the next holder. A process killed by SIGKILL runs no further
//!   instruction, though the kernel may take a moment to tear it down.
//! * **Death of zk-recipes.** If zk-recipes dies without stopping CMD (SIGKILL, a crash),
//!   the watchdog kills the whole group with SIGKILL: it holds the read end of a pipe
//!   whose only write end is zk-recipes' (close-on-exec, so CMD never inherits it), and
//!   the kernel closes that end when zk-recipes dies, however it dies. CMD itself also gets
//!   SIGKILL from Linux's parent-death signal, should the watchdog have been killed.
//!   Otherwise CMD would outlive the lock and run beside the next holder once the dead
//!   process's session expires.
//! * **Not covered:** a process that leaves CMD's group (`setsid`, `setpgid`: daemons do)
//!   is no longer reached by anything sent to the group, and cannot be found again
//!   without tracking every descendant; keep such processes out of CMD, or stop them from
//!   CMD itself.
//! * **Terminal.** CMD's group is not the terminal's foreground group: Ctrl-C reaches
//!   zk-recipes, which passes it on; a CMD that reads from the terminal is stopped
//!   (SIGTTIN).
//!
//! The watchdog is zk-recipes itself (`/proc/self/exe`) started with a hidden command: it
//! blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT (zk-recipes passes those on to the group,
//! and the watchdog must outlive CMD), reads its standard input until end of file, then
//! kills its group, itself included.

use std::ffi::OsString;
use std::io::{self, Read as _};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt as _;
use std::process::{ExitCode, ExitStatus, Stdio};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{killpg, SigSet, Signal};
use nix::unistd::{getpgrp, getpid, getppid, pipe2, Pid};
use tracing::{debug, info};

use crate::say::say;
use crate::status;

/// The hidden command that makes zk-recipes a watchdog.
pub const WATCHDOG: &str = "__watchdog";

/// The signals zk-recipes passes on to CMD's group, which the watchdog must survive.
const PASSED_ON: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// A running CMD, and its group's watchdog.
#[derive(Debug)]
pub struct Child {
    process: tokio::process::Child,
    watchdog: tokio::process::Child,
    /// The write end of the watchdog's pipe: open while zk-recipes lives.
    _alarm: OwnedFd,
    /// The process group, named by the watchdog's pid; valid until the watchdog is reaped.
    group: Option<Pid>,
}

/// Why CMD could not be started.
#[derive(Debug)]
pub enum SpawnError {
    /// The watchdog (zk-recipes itself) could not be started.
    Watchdog(io::Error),
    /// CMD could not be started: not found, or not runnable.
    Command(io::Error),
}

/// Starts `command` (program and arguments) with `env` added to zk-recipes' environment,
/// in the group of a new watchdog.
///
/// # Errors
/// The error of the spawn that failed; nothing is left running then.
pub fn spawn(command: &[OsString], env: &[(&str, String)]) -> Result<Child, SpawnError> {
    let (program, args) = command.split_first().ok_or_else(|| {
        SpawnError::Command(io::Error::new(io::ErrorKind::InvalidInput, "no command"))
    })?;
    let (watchdog, alarm) = watchdog().map_err(SpawnError::Watchdog)?;
    let group = watchdog
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let Some(group) = group else {
        return Err(SpawnError::Watchdog(io::Error::other("no pid")));
    };
    let parent = Pid::this();
    let mut builder = std::process::Command::new(program);
    builder
        .args(args)
        .envs(env.iter().cloned())
        .process_group(group.as_raw());
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (prctl, getppid), which are async-signal-safe; it allocates nothing.
    #[allow(unsafe_code)]
    unsafe {
        builder.pre_exec(move || die_with(parent));
    }
    match tokio::process::Command::from(builder).spawn() {
        Ok(process) => {
            info!(%group, "CMD started");
            Ok(Child {
                process,
                watchdog,
                _alarm: alarm,
                group: Some(group),
            })
        }
        Err(err) => {
            // Dropping the pipe's write end stops the watchdog.
            drop(alarm);
            drop(watchdog);
            Err(SpawnError::Command(err))
        }
    }
}

/// Starts the watchdog of a new process group; returns it with the write end of its pipe.
fn watchdog() -> io::Result<(tokio::process::Child, OwnedFd)> {
    let (read, write) = pipe2(OFlag::O_CLOEXEC)?;
    let blocked: SigSet = PASSED_ON.into_iter().collect();
    let mut builder = std::process::Command::new("/proc/self/exe");
    builder
        .arg0("zk-recipes")
        .arg(WATCHDOG)
        .stdin(Stdio::from(read))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only calls
    // pthread_sigmask, which is async-signal-safe; it allocates nothing. The mask is kept
    // across exec, so that no signal passed on to the group can kill the watchdog before
    // it runs.
    #[allow(unsafe_code)]
    unsafe {
        builder.pre_exec(move || blocked.thread_block().map_err(io::Error::from));
    }
    let watchdog = tokio::process::Command::from(builder).spawn()?;
    Ok((watchdog, write))
}

/// The watchdog's work (`zk-recipes __watchdog`, started by [`spawn`] only): waits for end
/// of file on stdin, then kills its own process group.
pub fn watch() -> ExitCode {
    // Only ever kill a group this process leads: one zk-recipes made for it.
    if getpgrp() != getpid() {
        say!("{WATCHDOG} is zk-recipes' own; not to be run by hand");
        return ExitCode::from(status::USAGE);
    }
    let mut stdin = io::stdin().lock();
    let mut buffer = [0; 64];
    loop {
        match stdin.read(&mut buffer) {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = killpg(getpgrp(), Signal::SIGKILL);
    ExitCode::from(status::OS_ERROR)
}

/// In the child: asks for SIGKILL when the parent dies, and fails if it already has.
fn die_with(parent: Pid) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    if getppid() != parent {
        return Err(io::Error::from_raw_os_error(Errno::ESRCH as i32));
    }
    Ok(())
}

impl Child {
    /// Waits for CMD to exit; then kills what is left in its group and reaps the watchdog.
    ///
    /// # Cancel safety
    /// Cancel safe: a call after a cancelled one goes on where it stopped.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.process.wait().await;
        self.signal(Signal::SIGKILL);
        if self.group.is_some() {
            let _ = self.watchdog.wait().await;
            // Reaped: its pid, and so the group's name, may be reused from now on.
            self.group = None;
        }
        status
    }

    /// Sends `signal` to CMD's process group (the watchdog blocks all but SIGKILL), unless
    /// it is gone.
    pub fn signal(&self, signal: Signal) {
        let Some(group) = self.group else {
            return;
        };
        match killpg(group, signal) {
            Ok(()) => debug!(?signal, %group, "signalled CMD's group"),
            Err(errno) => debug!(?signal, %group, %errno, "CMD's group is gone"),
        }
    }
}

impl Drop for Child {
    /// Nothing of CMD's group outlives the value (the watchdog is reaped by tokio).
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}
