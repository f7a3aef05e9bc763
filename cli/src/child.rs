//! CMD as a child process in a process group of its own.
//!
//! * **Group.** CMD leads a new process group, so that stopping it reaches what it started
//!   too (`sh -c '...'` and its commands); signals go to the whole group.
//! * **Death of zk-recipes.** CMD gets SIGKILL if zk-recipes dies without stopping it first
//!   (SIGKILL, a crash): Linux's parent-death signal. Otherwise CMD would outlive the lock
//!   and run beside the next holder once the dead process's session expires. Processes
//!   that CMD started in turn are not reached that way.
//! * **Terminal.** CMD's group is not the terminal's foreground group: Ctrl-C reaches
//!   zk-recipes, which passes it on; a CMD that reads from the terminal is stopped
//!   (SIGTTIN).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::{getppid, Pid};
use tracing::{debug, info};

/// A running CMD.
#[derive(Debug)]
pub struct Child {
    process: tokio::process::Child,
    /// The process group, named by CMD's pid; valid until CMD is reaped.
    group: Option<Pid>,
}

/// Starts `command` (program and arguments) with `env` added to zk-recipes' environment.
///
/// # Errors
/// The error of the spawn: the program was not found, or could not be run.
pub fn spawn(command: &[OsString], env: &[(&str, String)]) -> io::Result<Child> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command"))?;
    let parent = Pid::this();
    let mut builder = std::process::Command::new(program);
    builder
        .args(args)
        .envs(env.iter().cloned())
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (prctl, getppid), which are async-signal-safe; it allocates nothing.
    #[allow(unsafe_code)]
    unsafe {
        builder.pre_exec(move || die_with(parent));
    }
    let process = tokio::process::Command::from(builder).spawn()?;
    let group = process
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    info!(?group, "CMD started");
    Ok(Child { process, group })
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
    /// Waits for CMD to exit.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.process.wait().await;
        // Reaped: its pid, and so the group's name, may be reused from now on.
        self.group = None;
        status
    }

    /// Sends `signal` to CMD's process group, unless CMD has been reaped.
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
