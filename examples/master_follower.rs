//! A small replicated service: replicas join a group and an election; the master deals
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
//!
//! # Why a replica also locks each partition it works on
//!
//! An assignment is only news: by the time a replica reads it, the master may have dealt
//! its partitions to others (its session expired while its process was paused, or while
//! its connection was frozen). A group membership cannot tell the replica "the servers
//! still keep my session": it is not a hold, nothing about it is fenced or read from the
//! clock. A lock is. So a replica works on partition `p` only while it holds the lock
//! `<root>/partitions/<p>` (a [`KeyedMutex`]), and stops when:
//!
//! * the lock can no longer be trusted (`lost()` resolves): the connection was suspended,
//!   the session expired or was closed, or the servers have not confirmed the session for
//!   a session timeout (`Loss::Lapsed`, read from the clock: a process that wakes from a
//!   pause longer than its session finds `is_lost()` true, and it looks before every unit
//!   of work);
//! * its membership is gone (`Presence::Absent` or `Taken`: the master deals its
//!   partitions to others);
//! * the assignment gives the partition to someone else.
//!
//! Why a lock per partition rather than one hold per replica: the lock's node lives as long
//! as the session, so the next owner gets the partition only once this replica released it
//! or its session ended, whatever assignment each of them read, and however stale. This
//! replica stops *before* its session can end on the servers: a suspension comes first,
//! and the lapse is counted from the sending of the last request the servers answered,
//! which is no later than their own count starts. The assignment says who should work on
//! what; the lock says who may. Its fencing token is for the resource the work writes to:
//! a unit of work already under way when the process was paused goes on when it wakes,
//! and only the resource, refusing a token older than one it has seen, can stop it.
//!
//! The master stops dealing as soon as its leadership is lost; a resumed master finds it
//! lost (read from the clock) before it deals again, and its writes are fenced anyway.
//!
//! Each replica prints `working on partition <p> (token <t>)` when it begins and
//! `stopped working on partition <p>: <why>` when it ends (`tests/suite/master_follower.rs` checks
//! from those lines that no two replicas ever work one partition at once).

mod common;
#[path = "common/replica.rs"]
mod replica;
#[path = "common/say.rs"]
mod say;

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinSet;
use zk_recipes::{
    Error, Group, KeyedMutex, LeaderElection, Leadership, Loss, Member, Membership, MutexGuard,
    Presence, Session, Written,
};
use zookeeper_client::CreateMode;

use replica::Replica;
use say::say;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// This replica's partitions as it last learned them (empty while it is not a member).
type Mine = BTreeSet<u32>;

/// One unit of work on a partition; trust is checked before each.
const WORK_UNIT: Duration = Duration::from_millis(100);

/// The pause before trying again after a request failed.
const RETRY: Duration = Duration::from_millis(200);

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let Replica {
        id,
        partitions,
        timeout,
        root,
    } = Replica::from_args("master_follower", 6, "/zk-recipes-demo/service")?;

    let session = common::builder()?
        .session_timeout(timeout)
        .connect(&common::hosts())
        .await?;
    let group = Group::new(&session, &format!("{root}/members"))?;
    let member = group.join(&id, id.as_bytes()).await?;
    say(&id, &format!("joined the group as {}", member.node()));
    let election = LeaderElection::new(&session, &format!("{root}/election"), id.clone())?;
    let candidate = election.join().await?;
    say(&id, "joined the election");

    // One worker per partition: it works on it while it is ours and its lock is held.
    let locks = KeyedMutex::new(&session, &format!("{root}/partitions"))?;
    let (mine_tx, mine) = watch::channel(Mine::new());
    let mut workers = JoinSet::new();
    for p in 0..partitions {
        workers.spawn(work_on(id.clone(), locks.clone(), p, mine.clone()));
    }

    let assignment = format!("{root}/assignment");
    let mut terminate = signal(SignalKind::terminate())?;
    let mut ended = None;
    tokio::select! {
        result = lead(&id, &candidate, &group, &assignment, partitions) => result?,
        result = follow(&session, &id, &member, &assignment, &mine_tx) => ended = Some(result?),
        Some(ended) = workers.join_next() => ended??,
        _ = tokio::signal::ctrl_c() => say(&id, "interrupted"),
        _ = terminate.recv() => say(&id, "terminated"),
    }
    // No partition is ours any more, and no assignment will come: every worker stops,
    // releases its lock and returns.
    mine_tx.send_replace(Mine::new());
    drop(mine_tx);
    while let Some(ended) = workers.join_next().await {
        ended??;
    }
    candidate.resign().await.ok();
    member.leave().await?;
    say(&id, "left");
    if let Some(loss) = ended {
        // Started again, it joins anew once the id is free.
        return Err(format!("the membership ended ({loss:?})").into());
    }
    Ok(())
}

/// Whenever this replica leads: deals the partitions to the live members, again on every
/// change of the members, and stops the moment the leadership is lost.
async fn lead(
    id: &str,
    candidate: &zk_recipes::Candidate,
    group: &Group,
    assignment: &str,
    partitions: u32,
) -> Result<(), BoxError> {
    loop {
        let leadership = candidate.leadership().await?;
        say(id, &format!("role: MASTER (term {:#x})", leadership.term()));
        tokio::select! {
            // `biased`: a leadership found lost wins over dealing that is ready at once.
            biased;
            _ = leadership.lost() => {}
            result = deal(id, &leadership, group, assignment, partitions) => result?,
        }
        let loss = leadership.lost().await;
        say(id, &format!("role: follower (leadership lost: {loss:?})"));
    }
}

/// Publishes an assignment of the partitions to the live members, and again on every
/// change of the members; returns once it finds the leadership lost.
async fn deal(
    id: &str,
    leadership: &Leadership,
    group: &Group,
    assignment: &str,
    partitions: u32,
) -> Result<(), BoxError> {
    let mut members = group.watch_members().await?;
    loop {
        // Look before each deal: after a pause past the session, `is_lost()` (read from
        // the clock) is true before any reply could say so. The write is fenced anyway.
        if leadership.is_lost() {
            return Ok(());
        }
        let text = assign(leadership.term(), &members.borrow_and_update(), partitions);
        match publish(leadership, assignment, &text).await? {
            Some(version) => say(id, &format!("published v{version}: {text}")),
            None => say(id, "not published: the leadership is gone (fenced)"),
        }
        members.changed().await?;
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
/// gone. The first assignment creates the node, with its parents, by a write fenced alike.
async fn publish(
    leadership: &Leadership,
    assignment: &str,
    text: &str,
) -> Result<Option<i32>, BoxError> {
    loop {
        let set = leadership
            .fenced()
            .set_data(assignment, text.as_bytes(), None);
        match set.commit().await {
            Ok(written) => return Ok(version(&written)),
            Err(Error::Lost { .. }) => return Ok(None),
            Err(Error::FencedOpFailed {
                reason: zookeeper_client::Error::NoNode,
                ..
            }) => {}
            Err(err) => return Err(err.into()),
        }
        let create = leadership.fenced().create_with_parents(
            assignment,
            text.as_bytes(),
            CreateMode::Persistent,
        );
        match create.commit().await {
            Ok(_) => return Ok(Some(0)),
            Err(Error::Lost { .. }) => return Ok(None),
            // Made meanwhile (by an operator: a deposed master's write is fenced): set it.
            Err(Error::FencedOpFailed {
                reason: zookeeper_client::Error::NodeExists,
                ..
            }) => {}
            Err(err) => return Err(err.into()),
        }
    }
}

/// The data version a fenced `set_data` wrote.
fn version(written: &[Written]) -> Option<i32> {
    written.iter().find_map(|written| match written {
        Written::DataSet { version } => Some(*version),
        _ => None,
    })
}

/// Watches the assignment and this replica's membership, and tells the workers which
/// partitions are this replica's: those the assignment gives it while it is a member, none
/// while its node is absent or taken (the master deals its partitions to others then).
/// Returns once the membership ended (its id was taken, or its node cannot be made again),
/// with how its node went, having told the workers that nothing is theirs.
async fn follow(
    session: &Session,
    id: &str,
    member: &Membership,
    assignment: &str,
    mine: &watch::Sender<Mine>,
) -> Result<Loss, BoxError> {
    let mut presence = member.presences();
    loop {
        let (text, version, changed) = read_assignment(session, id, assignment).await?;
        let changed = changed.changed();
        tokio::pin!(changed);
        loop {
            let present = *presence.borrow_and_update() == Presence::Present;
            let part = if present { part_of(&text, id) } else { None };
            let new = partitions_in(part.as_deref());
            // The workers hear of it only when the set changes.
            if mine.send_if_modified(|mine| std::mem::replace(mine, new.clone()) != new) {
                let shown = part.as_deref().unwrap_or("-");
                let why = if present { "" } else { " (not a member now)" };
                say(
                    id,
                    &format!("my partitions: {shown}{why} (v{version}: {text})"),
                );
            }
            // The membership ends only once its id was taken (or it failed): this
            // replica works on nothing from then on; it exits, to be started again. A
            // taken presence changes no more: its end is what says so.
            if member.is_lost() {
                let loss = member.lost().await;
                mine.send_replace(Mine::new());
                say(id, &format!("my membership ended ({loss:?}): leaving"));
                return Ok(loss);
            }
            tokio::select! {
                _ = &mut changed => break,
                seen = presence.changed() => seen.map_err(|_| "the membership ended")?,
                _ = member.lost() => {}
            }
        }
    }
}

/// The assignment's text, its version (-1: no assignment yet) and a watch on it.
async fn read_assignment(
    session: &Session,
    id: &str,
    assignment: &str,
) -> Result<(String, i32, zookeeper_client::OneshotWatcher), BoxError> {
    loop {
        let Some(client) = session.client() else {
            session.events().changed().await?;
            continue;
        };
        match client.get_and_watch_data(assignment).await {
            Ok((data, stat, watcher)) => {
                return Ok((
                    String::from_utf8_lossy(&data).into_owned(),
                    stat.version,
                    watcher,
                ))
            }
            Err(zookeeper_client::Error::NoNode) => {
                match client.check_and_watch_stat(assignment).await {
                    Ok((_, watcher)) => return Ok((String::new(), -1, watcher)),
                    Err(err) => say(id, &format!("cannot read the assignment ({err}); again")),
                }
            }
            Err(err) => say(id, &format!("cannot read the assignment ({err}); again")),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Works on partition `p` whenever it is this replica's and this replica holds its lock;
/// returns once there are no more assignments (the replica is leaving).
async fn work_on(
    id: String,
    locks: KeyedMutex,
    p: u32,
    mut mine: watch::Receiver<Mine>,
) -> Result<(), Error> {
    loop {
        // 1. Wait until the assignment gives `p` to this replica.
        if mine.wait_for(|mine| mine.contains(&p)).await.is_err() {
            return Ok(());
        }
        // 2. Take its lock: the previous owner may still hold it (until it notices that
        //    `p` went elsewhere, or until its session ends). Give up if `p` goes meanwhile.
        let key = p.to_string();
        let guard = tokio::select! {
            guard = locks.lock(&key) => guard,
            () = given_away(&mut mine, p) => continue,
        };
        let guard = match guard {
            Ok(guard) => guard,
            Err(err @ Error::Closed) => return Err(err),
            Err(err) => {
                say(&id, &format!("cannot lock partition {p} ({err}); again"));
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        // 3. Work while the lock can be trusted and `p` stays ours.
        let token = guard.fencing_token();
        say(&id, &format!("working on partition {p} (token {token:#x})"));
        let why = tokio::select! {
            biased;
            loss = guard.lost() => format!("lock lost: {loss:?}"),
            () = given_away(&mut mine, p) => "no longer mine".to_owned(),
            loss = work(&guard) => format!("lock lost: {loss:?}"),
        };
        say(&id, &format!("stopped working on partition {p}: {why}"));
        // A lost lock's release answers `Error::Lost`: its node is deleted all the same.
        guard.release().await.ok();
    }
}

/// Resolves once `p` is no longer this replica's (or there are no more assignments).
async fn given_away(mine: &mut watch::Receiver<Mine>, p: u32) {
    let _ = mine.wait_for(|mine| !mine.contains(&p)).await;
}

/// The work on the partition `guard` locks, one unit at a time; each unit begins only
/// after a look at the lock (read from the clock: after a pause past the session it says
/// `Lapsed` before any I/O). Returns why the lock was lost.
async fn work(guard: &MutexGuard) -> Loss {
    let mut units = tokio::time::interval(WORK_UNIT);
    loop {
        units.tick().await;
        if guard.is_lost() {
            return guard.lost().await;
        }
        // One unit of work on the partition goes here: pass `guard.fencing_token()` to the
        // resource it writes to, so that it can refuse a worker whose lock has been lost.
    }
}

/// The partitions named in `part` (`2,5`).
fn partitions_in(part: Option<&str>) -> Mine {
    part.unwrap_or_default()
        .split(',')
        .filter_map(|p| p.parse().ok())
        .collect()
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
