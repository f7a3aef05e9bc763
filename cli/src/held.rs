//! Holding something in ZooKeeper (a lock, a lease, a leadership, a group membership)
//! while CMD runs, and stopping CMD as soon as it is lost.
//!
//! * CMD starts only while what is held is still trusted; it gets the holding's
//!   variables ([`Kind`]) in its environment.
//! * **Loss.** When the holding is lost, CMD's process group gets SIGTERM, then SIGKILL
//!   after `--kill-after`; the outcome is [`Outcome::Lost`] however CMD then exits.
//! * **Signals.** SIGINT sent to zk-recipes is passed on to CMD's group, SIGTERM, SIGHUP
//!   and SIGQUIT as SIGTERM; zk-recipes waits for CMD to exit (and stops it as above if
//!   the holding is lost meanwhile).
//! * **CMD's group.** What CMD leaves running in its group gets SIGKILL when CMD exits;
//!   the whole group gets it if zk-recipes dies ([`child`]).
//! * **Without CMD** the variables are printed, one `NAME=value` line each, and the holding
//!   is kept until a signal or its loss.
//!
//! The caller releases what it held once this returns: CMD has exited by then.

use std::future::Future;
use std::io::{self, Write as _};
use std::process::ExitStatus;

use nix::sys::signal::Signal;
use tokio::time::Instant;
use tracing::{info_span, warn, Instrument};
use zk_recipes::{Hold, Loss, Membership, Result};

use crate::args::{OnRevoke, Run};
use crate::child::{self, Child, SpawnError};
use crate::say::say;
use crate::signals::Signals;
use crate::status;

/// What CMD is told about a hold: what it is called in messages, and the names of the
/// variables that carry its node and its fencing token.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    what: &'static str,
    node: &'static str,
    token: &'static str,
}

/// A lock: `ZK_LOCK_NODE`, `ZK_FENCING_TOKEN`.
pub const LOCK: Kind = Kind {
    what: "lock",
    node: "ZK_LOCK_NODE",
    token: "ZK_FENCING_TOKEN",
};

/// A semaphore lease, with the variables of a lock.
pub const LEASE: Kind = Kind {
    what: "semaphore lease",
    ..LOCK
};

/// A leadership: `ZK_LEADER_NODE`, `ZK_LEADER_TERM`.
pub const LEADERSHIP: Kind = Kind {
    what: "leadership",
    node: "ZK_LEADER_NODE",
    token: "ZK_LEADER_TERM",
};

/// A group membership: `ZK_MEMBER_NODE`, `ZK_MEMBER_ZXID` (the zxid that created it).
pub const MEMBERSHIP: Kind = Kind {
    what: "membership",
    node: "ZK_MEMBER_NODE",
    token: "ZK_MEMBER_ZXID",
};

impl Kind {
    /// CMD's variables for `held`.
    fn env(self, held: &impl Held) -> Vec<(&'static str, String)> {
        vec![
            (self.node, held.node().to_owned()),
            (self.token, held.token().to_string()),
        ]
    }
}

/// What CMD runs under: a [`Hold`] (a lock, a lease, a leadership), or a group
/// membership ([`Member`]), which is no `Hold` (it offers no fenced writes).
pub trait Held: Send + Sync {
    /// Full path of its node.
    fn node(&self) -> &str;
    /// What CMD gets as its token: a hold's fencing token, a member's zxid.
    fn token(&self) -> u64;
    /// Resolves once it can no longer be trusted (cancel safe).
    fn lost(&self) -> impl Future<Output = Loss> + Send;
    /// Resolves once someone asked the holder to let go; never for a member, whom nobody
    /// asks (cancel safe).
    fn revocation_requested(&self) -> impl Future<Output = Result<()>> + Send;
    /// Lets go and returns once its node is gone.
    fn release(self) -> impl Future<Output = Result<()>> + Send;
}

impl<H: Hold + 'static> Held for H {
    fn node(&self) -> &str {
        Hold::node(self)
    }

    fn token(&self) -> u64 {
        self.fencing_token()
    }

    fn lost(&self) -> impl Future<Output = Loss> + Send {
        Hold::lost(self)
    }

    fn revocation_requested(&self) -> impl Future<Output = Result<()>> + Send {
        Hold::revocation_requested(self)
    }

    fn release(self) -> impl Future<Output = Result<()>> + Send {
        Hold::release(Box::new(self))
    }
}

/// A group membership that CMD runs under.
#[derive(Debug)]
pub struct Member(pub Membership);

impl Held for Member {
    fn node(&self) -> &str {
        self.0.node()
    }

    fn token(&self) -> u64 {
        self.0.created()
    }

    fn lost(&self) -> impl Future<Output = Loss> + Send {
        self.0.lost()
    }

    fn revocation_requested(&self) -> impl Future<Output = Result<()>> + Send {
        std::future::pending()
    }

    fn release(self) -> impl Future<Output = Result<()>> + Send {
        self.0.leave()
    }
}

/// How holding ended.
#[derive(Debug)]
pub enum Outcome {
    /// CMD ran to its end.
    Finished(ExitStatus),
    /// A signal came: CMD got it and ended with this status (`None`: no CMD).
    Stopped(Option<ExitStatus>),
    /// The holding was lost; CMD, if it ran, was stopped.
    Lost,
    /// Someone asked the holder to let go (`--on-revoke=release`); CMD, if it ran, was
    /// stopped.
    Revoked,
    /// CMD could not be started.
    NotStarted(io::Error),
    /// CMD could not be waited for, or its watchdog not started.
    Unknown,
}

impl Outcome {
    /// zk-recipes' exit status for this outcome.
    pub fn status(&self) -> u8 {
        match self {
            Outcome::Finished(exit) | Outcome::Stopped(Some(exit)) => status::of_exit(*exit),
            Outcome::Stopped(None) => 0,
            Outcome::Lost => status::LOST,
            Outcome::Revoked => status::REVOKED,
            Outcome::NotStarted(err) => status::of_spawn_error(err),
            Outcome::Unknown => status::OS_ERROR,
        }
    }
}

/// Resolves once `held` should be let go because someone asked and `on_revoke` says to
/// release; never otherwise (cancel safe).
pub async fn revoked(held: &impl Held, on_revoke: OnRevoke) {
    if on_revoke == OnRevoke::Release && held.revocation_requested().await.is_ok() {
        return;
    }
    std::future::pending().await
}

/// Waits for `acquiring`; if it gives something to hold, runs CMD while holding it (see
/// [`hold`]), then releases it. Returns zk-recipes' exit status.
///
/// `acquiring` gives `None` when it gave up in time (`--timeout`).
pub async fn acquire_and_run<H: Held>(
    acquiring: impl Future<Output = Result<Option<H>>>,
    kind: Kind,
    run: &Run,
    signals: &mut Signals,
) -> u8 {
    let held = match signals.or(acquiring).await {
        Err(signal) => return status::of_signal(signal),
        Ok(Err(err)) => return status::report(&err),
        Ok(Ok(None)) => {
            say!("{} not acquired within --timeout", kind.what);
            return status::TIMED_OUT;
        }
        Ok(Ok(Some(held))) => held,
    };
    let outcome = hold(&held, kind, run, signals).await;
    match (held.release().await, &outcome) {
        (Ok(()), _) | (Err(_), Outcome::Lost) => {}
        // Only a delete the servers refuse: the node stays until the session ends.
        (Err(err), _) => warn!(%err, "release refused; the node goes with the session"),
    }
    outcome.status()
}

/// Runs CMD (or, without one, waits for a signal) while `held` is trusted; stops CMD when
/// it is lost.
pub async fn hold(held: &impl Held, kind: Kind, run: &Run, signals: &mut Signals) -> Outcome {
    let env = kind.env(held);
    // Lost since it was acquired: CMD must not start.
    if let Some(loss) = already(held.lost()).await {
        report_loss(kind, loss);
        return Outcome::Lost;
    }
    if run.command.is_empty() {
        print_env(&env);
        return tokio::select! {
            loss = held.lost() => {
                report_loss(kind, loss);
                Outcome::Lost
            }
            () = revoked(held, run.on_revoke) => {
                say!("{} revoked: asked to let go", kind.what);
                Outcome::Revoked
            }
            _ = signals.recv() => Outcome::Stopped(None),
        };
    }
    let child = match child::spawn(&run.command, &env) {
        Ok(child) => child,
        Err(SpawnError::Command(err)) => {
            say!("cannot run {:?}: {err}", run.command[0]);
            return Outcome::NotStarted(err);
        }
        Err(SpawnError::Watchdog(err)) => {
            say!("cannot start the watchdog of CMD (/proc/self/exe): {err}");
            return Outcome::Unknown;
        }
    };
    supervise(held, kind, child, run, signals)
        .instrument(info_span!("cmd", what = kind.what))
        .await
}

/// Waits for CMD, passing signals on, and stops it if `held` is lost.
async fn supervise(
    held: &impl Held,
    kind: Kind,
    mut child: Child,
    run: &Run,
    signals: &mut Signals,
) -> Outcome {
    let mut lost = false;
    let mut asked = false;
    let mut kill_at = None;
    let mut stopped = false;
    loop {
        tokio::select! {
            exit = child.wait() => {
                return match (exit, lost, stopped) {
                    (Err(err), _, _) => {
                        say!("cannot wait for CMD: {err}");
                        Outcome::Unknown
                    }
                    (Ok(_), true, _) => Outcome::Lost,
                    (Ok(_), false, _) if asked => Outcome::Revoked,
                    (Ok(exit), false, true) => Outcome::Stopped(Some(exit)),
                    (Ok(exit), false, false) => Outcome::Finished(exit),
                };
            }
            loss = held.lost(), if !lost => {
                report_loss(kind, loss);
                say!("stopping CMD: SIGTERM, SIGKILL after {:?}", run.kill_after);
                child.signal(Signal::SIGTERM);
                lost = true;
                kill_at = Some(Instant::now() + run.kill_after);
            }
            () = revoked(held, run.on_revoke), if !lost && !asked => {
                say!("{} revoked: asked to let go; stopping CMD: SIGTERM, SIGKILL after {:?}", kind.what, run.kill_after);
                child.signal(Signal::SIGTERM);
                asked = true;
                kill_at = Some(Instant::now() + run.kill_after);
            }
            () = at(kill_at) => {
                child.signal(Signal::SIGKILL);
                kill_at = None;
            }
            signal = signals.recv() => {
                child.signal(Signals::for_cmd(signal));
                stopped = true;
            }
        }
    }
}

/// What `future` gives without waiting, if anything.
async fn already<T>(future: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        output = future => Some(output),
        () = std::future::ready(()) => None,
    }
}

/// Resolves at `deadline`; never without one.
async fn at(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn report_loss(kind: Kind, loss: Loss) {
    say!("{} lost: {loss:?}", kind.what);
}

/// Prints `NAME=value` lines on stdout (a closed stdout is no reason to let go).
fn print_env(env: &[(&str, String)]) {
    let mut out = io::stdout().lock();
    for (name, value) in env {
        let _ = writeln!(out, "{name}={value}");
    }
    let _ = out.flush();
}
