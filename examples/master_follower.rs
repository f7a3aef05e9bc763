//! A small replicated service: replicas join a group and an election; the master assigns
//! partitions `0..N` to the live members and publishes the assignment with a fenced write
//! (it commits only while its leadership node exists: a deposed master cannot overwrite
//! its successor's assignment); every replica watches the assignment and works only on its
//! own part. Kill the master (or a follower) and the assignment is redone once the dead
//! replica's session expires (about one session timeout). Every step is printed.
//!
//! ```text
//! cargo run --example master_follower -- <id> [partitions] [session timeout ms]
//! ```
//! `ZK_HOSTS` overrides the ensemble (see `examples/common/mod.rs`); `DEMO_ROOT` the
//! service's path (default `/zk-recipes-demo/service`). Ctrl-C or SIGTERM leaves cleanly;
//! SIGKILL leaves it to session expiry.
//!
//! The assignment node holds `term=<term> <id>:<p>,<p> <id>:<p> ...`: each partition is
//! named once, so no two members are given one partition by one assignment.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::signal::unix::{signal, SignalKind};
use zk_recipes::{Error, Group, LeaderElection, Leadership, Member, Session, Written};
use zookeeper_client::{Acls, CreateMode};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let id = args
        .next()
        .ok_or("usage: master_follower <id> [partitions] [timeout ms]")?;
    let partitions: u32 = args.next().map_or(Ok(6), |n| n.parse())?;
    let timeout: u64 = args.next().map_or(Ok(4000), |ms| ms.parse())?;
    let root = std::env::var("DEMO_ROOT").unwrap_or_else(|_| "/zk-recipes-demo/service".into());

    let session = common::builder()?
        .session_timeout(Duration::from_millis(timeout))
        .connect(&common::hosts())
        .await?;
    let group = Group::new(&session, &format!("{root}/members"))?;
    let member = group.join(&id, id.as_bytes()).await?;
    say(&id, &format!("joined the group as {}", member.node()));
    let election = LeaderElection::new(&session, &format!("{root}/election"), id.clone())?;
    let candidate = election.join().await?;
    say(&id, "joined the election");

    let assignment = format!("{root}/assignment");
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::select! {
        result = lead(&session, &id, &candidate, &group, &assignment, partitions) => result?,
        result = follow(&session, &id, &assignment) => result?,
        _ = tokio::signal::ctrl_c() => say(&id, "interrupted"),
        _ = terminate.recv() => say(&id, "terminated"),
    }
    candidate.resign().await.ok();
    member.leave().await?;
    say(&id, "left");
    Ok(())
}

/// Whenever this replica leads: assigns the partitions to the live members, again on every
/// change of the members, until the leadership is lost.
async fn lead(
    session: &Session,
    id: &str,
    candidate: &zk_recipes::Candidate,
    group: &Group,
    assignment: &str,
    partitions: u32,
) -> Result<(), BoxError> {
    loop {
        let leadership = candidate.leadership().await?;
        say(id, &format!("role: MASTER (term {:#x})", leadership.term()));
        let mut members = group.watch_members().await?;
        loop {
            let text = assign(leadership.term(), &members.borrow_and_update(), partitions);
            match publish(session, &leadership, assignment, &text).await? {
                Some(version) => say(id, &format!("published v{version}: {text}")),
                None => say(id, "not published: the leadership is gone (fenced)"),
            }
            tokio::select! {
                changed = members.changed() => changed?,
                loss = leadership.lost() => {
                    say(id, &format!("role: follower (leadership lost: {loss:?})"));
                    break;
                }
            }
        }
    }
}

/// `term=<term> <id>:<p>,<p> ...`: the partitions dealt round-robin to the members by id.
fn assign(term: u64, members: &[Member], partitions: u32) -> String {
    let mut parts: Vec<Vec<String>> = vec![Vec::new(); members.len()];
    for (p, owner) in (0..partitions).zip((0..members.len().max(1)).cycle()) {
        if let Some(part) = parts.get_mut(owner) {
            part.push(p.to_string());
        }
    }
    let dealt = members
        .iter()
        .zip(parts)
        .map(|(member, part)| format!(" {}:{}", member.id, part.join(",")));
    format!("term={term:#x}{}", dealt.collect::<String>())
}

/// Writes `text` into the assignment node with a write fenced by `leadership`: it commits
/// only while the leadership holds; the node's new version, or `None` if the leadership is
/// gone.
async fn publish(
    session: &Session,
    leadership: &Leadership,
    assignment: &str,
    text: &str,
) -> Result<Option<i32>, BoxError> {
    loop {
        let write = leadership
            .fenced()
            .set_data(assignment, text.as_bytes(), None);
        match write.commit().await {
            Ok(written) => {
                return Ok(written.iter().find_map(|written| match written {
                    Written::DataSet { version } => Some(*version),
                    _ => None,
                }))
            }
            Err(Error::Lost { .. }) => return Ok(None),
            Err(Error::FencedOpFailed {
                reason: zookeeper_client::Error::NoNode,
                ..
            }) => {
                // No assignment yet: an empty one (it assigns nothing), then the fenced write.
                let Some(client) = session.client() else {
                    return Ok(None);
                };
                let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
                match client.create(assignment, &[], &persistent).await {
                    Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                    Err(err) => return Err(err.into()),
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// Watches the assignment and works on this replica's part of it.
async fn follow(session: &Session, id: &str, assignment: &str) -> Result<(), BoxError> {
    let mut mine: Option<String> = None;
    loop {
        let Some(client) = session.client() else {
            session.events().changed().await?;
            continue;
        };
        let (text, version, changed) = match client.get_and_watch_data(assignment).await {
            Ok((data, stat, watcher)) => (data, stat.version, watcher),
            Err(zookeeper_client::Error::NoNode) => {
                match client.check_and_watch_stat(assignment).await {
                    Ok((_, watcher)) => (Vec::new(), -1, watcher),
                    Err(err) => return Err(err.into()),
                }
            }
            Err(err) => {
                say(id, &format!("cannot read the assignment ({err}); again"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        drop(client);
        let text = String::from_utf8_lossy(&text).into_owned();
        let part = part_of(&text, id);
        if part != mine {
            let shown = part.as_deref().unwrap_or("-");
            say(id, &format!("my partitions: {shown} (v{version}: {text})"));
            say(id, &format!("working on partitions {shown} only"));
            mine = part;
        }
        changed.changed().await;
    }
}

/// This member's partitions in an assignment, if it has any.
fn part_of(assignment: &str, id: &str) -> Option<String> {
    assignment
        .split_whitespace()
        .filter_map(|entry| entry.split_once(':'))
        .find(|(member, _)| *member == id)
        .map(|(_, part)| part.to_owned())
        .filter(|part| !part.is_empty())
}

fn say(id: &str, what: &str) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    println!("{now} [{id}] {what}");
}
