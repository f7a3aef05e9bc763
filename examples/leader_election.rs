//! One candidate of a master election. Run several (different ids); exactly one is master.
//! The master does visible work: every 500 ms it writes `id term counter` to a znode, and
//! refuses to write if the znode holds a newer term than its own (fencing: a deposed master
//! that has not noticed yet cannot overwrite its successor's work). Kill the master and a
//! follower takes over.
//!
//! ```text
//! cargo run --example leader_election -- <id> [seconds]   # ZK_HOSTS overrides the ensemble
//! ```
//! Ctrl-C (SIGINT) or SIGTERM resigns gracefully; SIGKILL leaves it to session expiry.
//! Against a secured ensemble, see `examples/common/mod.rs` (`ZK_AUTH_FILE`, `ZK_TLS_*`).

mod common;
#[path = "common/say.rs"]
mod say;

use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};
use zk_recipes::{LeaderElection, Leadership, Role, Session};
use zookeeper_client::{Acls, Client, CreateMode};

use say::say;

const ELECTION: &str = "/zk-recipes-demo/election";
const WORK: &str = "/zk-recipes-demo/master-work";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let hosts = common::hosts();
    let mut args = std::env::args().skip(1);
    let id = args.next().ok_or("usage: leader_election <id> [seconds]")?;
    let seconds: Option<u64> = args.next().map(|s| s.parse()).transpose()?;

    let session = common::builder()?
        .session_timeout(Duration::from_secs(4))
        .connect(&hosts)
        .await?;
    let election = LeaderElection::new(&session, ELECTION, id.clone())?;
    let candidate = election.join().await?;
    say(&id, "joined the election");

    let mut terminate = signal(SignalKind::terminate())?;
    let deadline = async {
        match seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        result = campaign(&session, &id, &candidate) => result?,
        _ = tokio::signal::ctrl_c() => say(&id, "interrupted"),
        _ = terminate.recv() => say(&id, "terminated"),
        () = deadline => say(&id, "time is up"),
    }
    candidate.resign().await.ok();
    say(&id, "resigned");
    Ok(())
}

/// Follows, and works while leading, until an error.
async fn campaign(
    session: &Session,
    id: &str,
    candidate: &zk_recipes::Candidate,
) -> Result<(), BoxError> {
    let mut roles = candidate.roles();
    loop {
        let leadership = candidate.leadership().await?;
        let became = Instant::now();
        say(id, &format!("role: MASTER (term {:#x})", leadership.term()));
        tokio::select! {
            result = work(session, id, &leadership) => result?,
            loss = leadership.lost() => say(id, &format!("leadership lost: {loss:?}")),
        }
        roles.wait_for(|role| *role == Role::Follower).await?;
        say(
            id,
            &format!(
                "role: follower (led for {:.1} s)",
                became.elapsed().as_secs_f64()
            ),
        );
    }
}

/// The master's work: a fenced write every 500 ms.
async fn work(session: &Session, id: &str, leadership: &Leadership) -> Result<(), BoxError> {
    let term = leadership.term();
    for counter in 1.. {
        let client = session.client().ok_or("no live session")?;
        match fenced_write(&client, id, term, counter).await? {
            true => say(id, &format!("wrote \"{id} {term:#x} {counter}\" to {WORK}")),
            false => {
                say(id, "a newer term owns the work: write refused (fencing)");
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// Writes `id term counter` unless the znode holds a newer term; compare-and-set on the
/// znode version so two writers cannot interleave.
async fn fenced_write(
    client: &Client,
    id: &str,
    term: u64,
    counter: u64,
) -> Result<bool, BoxError> {
    let data = format!("{id} {term:#x} {counter}");
    loop {
        match client.get_data(WORK).await {
            Ok((current, stat)) => {
                let text = String::from_utf8_lossy(&current);
                let stored = text
                    .split_whitespace()
                    .nth(1)
                    .and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
                    .unwrap_or(0);
                if stored > term {
                    return Ok(false);
                }
                match client
                    .set_data(WORK, data.as_bytes(), Some(stat.version))
                    .await
                {
                    Ok(_) => return Ok(true),
                    Err(zookeeper_client::Error::BadVersion) => continue,
                    Err(err) => return Err(err.into()),
                }
            }
            Err(zookeeper_client::Error::NoNode) => {
                let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
                match client.mkdir("/zk-recipes-demo", &persistent).await {
                    Ok(()) | Err(zookeeper_client::Error::NodeExists) => {}
                    Err(err) => return Err(err.into()),
                }
                match client.create(WORK, data.as_bytes(), &persistent).await {
                    Ok(_) => return Ok(true),
                    Err(zookeeper_client::Error::NodeExists) => continue,
                    Err(err) => return Err(err.into()),
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
}
