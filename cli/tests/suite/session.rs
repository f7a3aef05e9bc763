//! Sessions the servers refuse: SASL asked of a server without SASL (exit 69, CMD not
//! run), and, for `elect` and `observe`, a new session after expiry that the servers refuse
//! (here: SASL credentials they do not know), which ends zk-recipes with 69 and the reason
//! instead of retrying forever.

use crate::support;

use std::process::Stdio;

use support::{exit_within, start, zk_recipes, Scratch, Test};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use zk_harness::{
    await_count, bounded, observer, unique_root, Ensemble, Forwarder, ServerConfig, PATIENCE,
};

const USER: &str = "orders-svc";
const PASSWORD: &str = "correct horse battery staple";

/// A server with SASL DIGEST-MD5 user `USER` whose password is `password`.
async fn sasl_server(password: &str) -> Ensemble {
    Ensemble::start_with(1, &ServerConfig::default().sasl_users(&[(USER, password)])).await
}

/// Writes `user:password` to `path`, readable by its owner only.
fn write_auth(path: &std::path::Path, password: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, format!("{USER}:{password}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn port(ensemble: &Ensemble) -> u16 {
    let address = ensemble.address(0);
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// `zk-recipes SUBCOMMAND --sasl --auth-file F --session-timeout 4s ARGS` through
/// `forwarder`.
fn command(forwarder: &Forwarder, scratch: &Scratch, subcommand: &str, args: &[&str]) -> Command {
    let auth = scratch.file("auth");
    write_auth(&auth, PASSWORD);
    let mut command = zk_recipes(&forwarder.address());
    command
        .arg(subcommand)
        .arg("--sasl")
        .arg("--auth-file")
        .arg(&auth)
        .args(["--session-timeout", "4s"])
        .args(args)
        .stderr(Stdio::piped());
    command
}

#[tokio::test(flavor = "multi_thread")]
async fn elect_and_observe_exit_69_when_a_new_session_is_refused() {
    let (first, second) = tokio::join!(sasl_server(PASSWORD), sasl_server("another password"));
    let scratch = Scratch::new("refused-renewal");
    let root = unique_root("cli-refused-renewal");
    let forwarder = Forwarder::start(port(&first)).await;
    let mut elect = start(&mut command(
        &forwarder,
        &scratch,
        "elect",
        &[&root, "--id", "a", "--", "sleep", "1000"],
    ));
    let mut observe = command(&forwarder, &scratch, "observe", &[&root]);
    let mut observe = start(observe.stdout(Stdio::piped()));
    let mut lines = BufReader::new(observe.stdout.take().unwrap()).lines();
    bounded("observe's first line", PATIENCE, lines.next_line())
        .await
        .unwrap();
    await_count(&observer(&first.connect_string()).await, &root, 1).await;
    // Their next connection reaches a server that knows neither their sessions nor USER's
    // password.
    forwarder.retarget(port(&second));
    for (what, child) in [("elect", &mut elect), ("observe", &mut observe)] {
        let status = exit_within(child, PATIENCE).await;
        let mut stderr = String::new();
        let mut pipe = child.stderr.take().unwrap();
        tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut stderr)
            .await
            .unwrap();
        assert_eq!(status.code(), Some(69), "{what}: {stderr}");
        assert!(
            stderr.contains("refused the credentials"),
            "{what}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sasl_against_a_server_without_sasl_exits_69_without_running_cmd() {
    let test = Test::new("sasl-without-sasl").await;
    let auth = test.scratch.file("auth");
    write_auth(&auth, "not the password");
    let marker = test.scratch.file("ran");
    let mut lock = test.command(&["lock", "--sasl", "--auth-file"]);
    lock.arg(&auth)
        .args([&test.root, "--", "touch"])
        .arg(&marker)
        .stderr(Stdio::piped());
    let output = bounded("zk-recipes to exit", PATIENCE, lock.output())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("did not authenticate"), "{stderr}");
    assert!(!marker.exists(), "CMD ran unauthenticated");
    assert!(test.children().await.is_empty());
}
