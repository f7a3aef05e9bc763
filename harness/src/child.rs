//! A test that runs a part of itself in a child process, to stop that process as a whole
//! (SIGSTOP past a session timeout) or to kill it: the child is the same test binary, asked
//! to run one ignored test, which finds its arguments in an environment variable.

use std::process::Stdio;

use tokio::process::{Child, Command};

/// Starts this test binary again, running only the ignored test `test` of the module
/// `module` (the caller's `module_path!()`), with `env` set to `value` (the child's
/// arguments), its stdin and stdout piped; killed when dropped.
///
/// The module path names the test wherever its file sits: a test `paused_holder` in the
/// module `suite::loss_after_pause` is `loss_after_pause::paused_holder` to the test binary
/// `suite`, and `paused_holder` in a test binary of its own.
pub fn child_test(module: &str, test: &str, env: &str, value: &str) -> Child {
    Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            &test_name(module, test),
            "--include-ignored",
            "--nocapture",
        ])
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

/// The name the test harness knows `test` of `module` by: its module path less the crate's
/// name, then the test's.
fn test_name(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{test}"),
        None => test.to_owned(),
    }
}
