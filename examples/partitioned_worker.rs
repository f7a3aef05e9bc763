//! A replicated worker on a [`Partitioner`]: replicas share a fixed set of partitions, each
//! partition worked by exactly one live replica under its own fenced hold. Start a few with
//! different ids; start another and watch it take its share (only the partitions the
//! assignment moves are handed over, each once its next owner waits for it); kill one with
//! SIGKILL and watch the others take its partitions once its session expired; stop one with
//! Ctrl-C or SIGTERM and watch its partitions move at once.
//!
//! ```text
//! cargo run --example partitioned_worker -- <id> [partitions] [session timeout ms]
//! ```
//! `ZK_HOSTS` overrides the ensemble (see `examples/common/mod.rs`); `DEMO_ROOT` the
//! partitioner's path (default `/zk-recipes-demo/partitioned`). Every replica must be given the
//! same number of partitions: one with another is refused.
//!
//! Each replica prints `working on <partition> (token <t>)` when a partition is handed to it
//! and `stopped working on <partition>: <why>` when it stops: `moved` (the assignment gave it
//! to another replica: it finished its unit of work and let go) or `lost` (its hold can no
//! longer be trusted: the connection was suspended, the session expired, or the process was
//! paused past its session — it looks before every unit of work, read from the clock, so it
//! never works a partition another replica may hold).

mod common;
#[path = "common/replica.rs"]
mod replica;
#[path = "common/say.rs"]
mod say;

use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use zk_recipes::{PartitionHold, Partitioner, Worker};

use replica::Replica;
use say::say;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One unit of work on a partition; the hold is looked at before each.
const WORK_UNIT: Duration = Duration::from_millis(100);

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let Replica {
        id,
        partitions: count,
        timeout,
        root,
    } = Replica::from_args("partitioned_worker", 12, "/zk-recipes-demo/partitioned")?;

    let session = common::builder()?
        .session_timeout(timeout)
        .connect(&common::hosts())
        .await?;
    let partitions = (0..count).map(|p| format!("p{p:02}"));
    let worker = Partitioner::new(&session, &root, partitions)?
        .id(&id)?
        .join()
        .await?;
    say(&id, &format!("joined as {}", worker.node()));

    let mut terminate = signal(SignalKind::terminate())?;
    let ended = tokio::select! {
        ended = deal(&id, &worker) => Some(ended),
        () = follow(&id, &worker) => None,
        _ = tokio::signal::ctrl_c() => None,
        _ = terminate.recv() => None,
    };
    say(&id, "leaving: my partitions go to the others");
    worker.leave().await?;
    session.close().await;
    say(&id, "left");
    match ended {
        Some(err) => Err(err.into()),
        None => Ok(()),
    }
}

/// Works each partition handed to this replica, in a task of its own; returns why the worker
/// ended (its id taken, the session closed).
async fn deal(id: &str, worker: &Worker) -> zk_recipes::Error {
    loop {
        match worker.next_partition().await {
            Ok(hold) => drop(tokio::spawn(work(id.to_owned(), hold))),
            Err(err) => return err,
        }
    }
}

/// Prints what this replica's view of the group gives it, whenever that changes.
async fn follow(id: &str, worker: &Worker) {
    let mut states = worker.states();
    let mut shown = String::new();
    loop {
        let now = {
            let state = states.borrow_and_update();
            let assigned: Vec<&str> = state.assigned.iter().map(String::as_str).collect();
            let members = state.members.join(",");
            format!(
                "members {members}; the assignment gives me {}",
                assigned.join(",")
            )
        };
        if now != shown {
            say(id, &now);
            shown = now;
        }
        if states.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Works on the partition `hold` holds, one unit at a time, until it is lost or moved;
/// then lets go.
async fn work(id: String, hold: PartitionHold) {
    let (name, token) = (hold.name().to_owned(), hold.fencing_token());
    say(&id, &format!("working on {name} (token {token:#x})"));
    let mut units = tokio::time::interval(WORK_UNIT);
    let why = loop {
        tokio::select! {
            biased;
            loss = hold.lost() => break format!("lost ({loss:?})"),
            () = hold.moved() => break "moved".to_owned(),
            _ = units.tick() => {
                // Read from the clock: after a pause past the session it says lost before
                // any reply could.
                if hold.is_lost() {
                    break format!("lost ({:?})", hold.lost().await);
                }
                // One unit of work on the partition goes here: pass `token` to the resource
                // it writes to, so that it can refuse a replica whose hold was lost.
            }
        }
    };
    say(&id, &format!("stopped working on {name}: {why}"));
    // A lost hold's release answers `Error::Lost`: its node is deleted all the same.
    hold.release().await.ok();
}
