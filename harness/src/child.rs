//! A test that runs a part of itself in a child process, to stop that process as a whole
//! (SIGSTOP past a session timeout) or to kill it: the child is the same test binary, asked
//! to run one ignored test, which finds its arguments in an environment variable.

use std::process::Stdio;

use tokio::process::{Child, Command};

/// Starts this test binary again, running only the ignored test `test`, with `env` set to
/// `value` (the child's arguments), its stdin and stdout piped; killed when dropped.
pub fn child_test(test: &str, env: &str, value: &str) -> Child {
    Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", test, "--include-ignored", "--nocapture"])
        .args(["--test-threads", "1", "--quiet"])
        .env(env, value)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the child process")
}

/// Sends `signal` to the process `pid` (a child of the test's own).
pub fn signal(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid of our own child and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {pid} {signal}");
}
