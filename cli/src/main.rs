//! `zk-recipes`: zk-recipes' locks and elections for shell work.
//!
//! * `zk-recipes lock PATH -- CMD` runs CMD while holding the lock on PATH, with the lock
//!   node and its fencing token in CMD's environment; CMD is stopped as soon as the lock
//!   is lost ([`lock`]).
//! * `zk-recipes elect PATH --id ID -- CMD` runs CMD only while leading the election on
//!   PATH, and again each time it leads ([`elect`]).
//! * `zk-recipes observe PATH` and `zk-recipes status PATH` print who holds and waits, or
//!   leads and follows, on every change or once ([`observe`]); what PATH is comes from
//!   `--kind` or from its nodes, never from a name alone ([`look`]).
//!
//! * `zk-recipes members PATH` prints a group's members, once or on every change
//!   ([`members`]); `zk-recipes join PATH --id ID -- CMD` is a member while CMD runs
//!   ([`join`]).
//!
//! What is held while CMD runs, and how CMD is stopped on loss and on signals, is one
//! piece of code for every recipe ([`held`], [`child`]). zk-recipes exits with CMD's
//! status when CMD ran to its end, else with one of its own ([`status`]). Credentials and
//! TLS settings come from files, never from the command line ([`security`]). Everything it
//! made in ZooKeeper is deleted before it exits, and its session closed ([`session`]).

// The two exceptions, code run between fork and exec (CMD's parent-death signal, the
// watchdog's signal mask), are in `child`.
#![deny(unsafe_code)]

mod args;
mod child;
mod duration;
mod elect;
mod held;
mod join;
mod lock;
mod look;
mod members;
mod observe;
mod output;
mod revoke;
mod say;
mod security;
mod session;
mod signals;
mod status;
mod view;

use std::process::ExitCode;

use clap::Parser as _;
use tracing::level_filters::LevelFilter;

use args::{Cli, Command};
use observe::Look;
use say::say;
use signals::Signals;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(match err.exit_code() {
                0 => 0,
                _ => status::USAGE,
            });
        }
    };
    if let Command::Watchdog = cli.command {
        return child::watch();
    }
    if let Err(message) = cli.command.check() {
        say!("{message}");
        return ExitCode::from(status::USAGE);
    }
    init_log(cli.verbose);
    // One thread: CMD is started from it, and its parent-death signal follows the thread
    // that started it (see `child`).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let status = match runtime {
        Ok(runtime) => runtime.block_on(run(&cli.command)),
        Err(err) => {
            say!("cannot start the runtime: {err}");
            status::OS_ERROR
        }
    };
    ExitCode::from(status)
}

/// Runs `command`; returns zk-recipes' exit status.
async fn run(command: &Command) -> u8 {
    let mut signals = match Signals::catch() {
        Ok(signals) => signals,
        Err(err) => {
            say!("cannot catch SIGINT, SIGTERM, SIGHUP and SIGQUIT: {err}");
            return status::OS_ERROR;
        }
    };
    match command {
        Command::Lock(args) => session::run(args, &mut signals).await,
        Command::Elect(args) => session::run(args, &mut signals).await,
        Command::Observe(args) => session::run(&Look { args, follow: true }, &mut signals).await,
        Command::Status(args) => {
            session::run(
                &Look {
                    args,
                    follow: false,
                },
                &mut signals,
            )
            .await
        }
        Command::Members(args) => session::run(args, &mut signals).await,
        Command::Join(args) => session::run(args, &mut signals).await,
        Command::Revoke(args) => session::run(args, &mut signals).await,
        Command::Watchdog => status::USAGE,
    }
}

/// Log on stderr, best-effort (see [`say`]): warnings, or more with `-v`.
fn init_log(verbose: u8) {
    let level = match verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    tracing_subscriber::fmt()
        .with_writer(|| say::LogWriter)
        .with_max_level(level)
        .init();
}
