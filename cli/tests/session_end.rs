//! `elect` and `observe` when the session ends for good: after expiry, a new session the
//! servers refuse (here: SASL credentials they do not know) ends zk-recipes with 69 and
//! the reason, instead of retrying forever.

mod support;

use std::process::Stdio;

use support::{exit_within, start, zk_recipes, Scratch};
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

fn port(ensemble: &Ensemble) -> u16 {
    let address = ensemble.address(0);
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// `zk-recipes SUBCOMMAND --sasl --auth-file F --session-timeout 4s ARGS` through
/// `forwarder`.
fn command(forwarder: &Forwarder, scratch: &Scratch, subcommand: &str, args: &[&str]) -> Command {
    let auth = scratch.file("auth");
    std::fs::write(&auth, format!("{USER}:{PASSWORD}")).unwrap();
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
