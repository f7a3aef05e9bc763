//! Work assignment (`Partitioner`) against real ZooKeeper servers: partitions dealt to the live
//! members, balanced (each of N owns ⌊P/N⌋ or ⌈P/N⌉), handed off cooperatively (a join or a
//! clean leave moves exactly the partitions the assignment moves, each released once by its
//! owner when told, and held by the next owner within a few round trips; partitions that do
//! not move are never released), never worked by two members at once (the history checker,
//! in process under churn and, in `partition/processes.rs`, across member processes killed,
//! paused and cut off past their session); who owns what, with tokens; and nothing left in
//! ZooKeeper after each test. The edges (another set of partitions refused, bad input, a
//! taken id, a closed session) are in `partition/edges.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use zk_harness::history::{History, Section};
use zk_harness::{await_empty, await_watch, bounded, Ensemble, Fixture, PATIENCE};
use zk_recipes::{Error, PartitionHold, Partitioner, Session, Worker};
use zookeeper_client::Client;

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// A window in which no further hold may end once the members settled: longer than a hold
/// whose partition moved away goes on while no successor waits (1 s).
const QUIET: Duration = Duration::from_millis(1500);

/// What the fixture keeps under its root: the group and the locks' parent.
const KEPT: &[&str] = &["members", "partitions"];

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("p{i:02}")).collect()
}

async fn fixture(name: &str, sessions: usize) -> Fixture {
    let zk = Ensemble::shared(1).await;
    Fixture::new(zk, name, sessions, SESSION_TIMEOUT)
        .await
        .keeping(KEPT)
}

/// Waits until no lock of `partitions` has a contender, deletes their (empty) container
/// nodes, and checks that nothing else is left.
async fn nothing_left(fx: Fixture, partitions: &[String]) {
    for name in partitions {
        let lock = format!("{}/partitions/{name}", fx.root);
        await_empty(&fx.observer, &lock).await;
        match fx.observer.delete(&lock, None).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(err) => panic!("cannot delete {lock}: {err}"),
        }
    }
    fx.nothing_left().await;
}

/// Why a member stopped working a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    Moved,
    Lost,
}

/// What happened to holds, in order: granted, or ended (and why).
#[derive(Clone, Debug)]
struct Step {
    who: String,
    partition: String,
    token: u64,
    at: Instant,
    ended: Option<Why>,
    /// For a hold asked to let go: how many other contenders waited in its lock's queue
    /// then (read from outside before the release).
    waiting: usize,
}

/// Every member's holds, as steps and as sections for the history checker.
#[derive(Clone)]
struct Log {
    steps: Arc<watch::Sender<Vec<Step>>>,
    history: History,
    /// Looks at the lock queues from outside.
    observer: Client,
}

impl Log {
    fn new(fx: &Fixture) -> Log {
        Log {
            steps: Arc::new(watch::channel(Vec::new()).0),
            history: History::new(),
            observer: fx.observer.clone(),
        }
    }

    /// How many contenders other than `node` wait in its lock's queue.
    async fn waiting_behind(&self, node: &str) -> usize {
        let (lock, ours) = node.rsplit_once('/').unwrap();
        let children = self.observer.list_children(lock).await.unwrap();
        children.iter().filter(|c| *c != ours).count()
    }

    fn steps(&self) -> Vec<Step> {
        self.steps.borrow().clone()
    }

    fn push(&self, step: Step) {
        self.steps.send_modify(|steps| steps.push(step));
    }

    /// Waits until `who` began working each of `owned` (a partition and its token).
    async fn await_working(&self, who: &str, owned: &BTreeMap<String, u64>) {
        let mut steps = self.steps.subscribe();
        let began = |steps: &Vec<Step>| {
            owned.iter().all(|(partition, token)| {
                (steps.iter())
                    .any(|s| s.who == who && s.partition == *partition && s.token == *token)
            })
        };
        await_watch(&format!("{who} works {owned:?}"), &mut steps, began).await;
    }

    /// The holds ended since `since`.
    fn ended_since(&self, since: Instant) -> Vec<Step> {
        (self.steps().into_iter())
            .filter(|s| s.at >= since && s.ended.is_some())
            .collect()
    }

    /// Pairs of trusted sections of one partition that overlap: must be none.
    fn overlaps(&self) -> Vec<(Section, Section)> {
        self.history
            .trusted_overlaps_where(|a, b| a.node == b.node && a.who != b.who)
    }

    /// Asserts that each partition's tokens grow in order of entry.
    fn check_tokens(&self) {
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        for section in self.history.sections() {
            let before = last.insert(section.node.clone(), section.token);
            assert!(
                before.is_none_or(|before| before < section.token),
                "tokens of {} not growing: {before:?} then {section:?}",
                section.node
            );
        }
    }
}

/// Works `hold` until it is lost or moved, then releases it; logs both ends.
async fn work(who: String, hold: PartitionHold, log: Log) {
    let (partition, token) = (hold.name().to_owned(), hold.fencing_token());
    let enter = Instant::now();
    log.history.entered();
    log.push(Step {
        who: who.clone(),
        partition: partition.clone(),
        token,
        at: enter,
        ended: None,
        waiting: 0,
    });
    let why = tokio::select! {
        biased;
        _ = hold.lost() => Why::Lost,
        asked = hold.revocation_requested() => match asked {
            Ok(()) => Why::Moved,
            Err(_) => Why::Lost,
        },
    };
    let waiting = match why {
        Why::Moved => log.waiting_behind(hold.node()).await,
        Why::Lost => 0,
    };
    let exit = Instant::now();
    let trusted = !hold.is_lost();
    log.history.record(Section {
        who: who.clone(),
        token,
        node: partition.clone(),
        enter,
        exit,
        trusted,
        told: Some(exit),
    });
    log.push(Step {
        who,
        partition,
        token,
        at: exit,
        ended: Some(why),
        waiting,
    });
    let _ = hold.release().await;
}

/// A member working in this process: each partition it is handed is worked by a task of its
/// own until it is lost or moved.
struct Member {
    id: String,
    /// How many partitions there are.
    partitions: usize,
    worker: Arc<Worker>,
    log: Log,
    /// Ends with the error `next_partition` ended with.
    dealing: JoinHandle<Error>,
}

impl Member {
    async fn join(
        session: &Session,
        root: &str,
        partitions: &[String],
        id: &str,
        log: &Log,
    ) -> Member {
        let partitioner = Partitioner::new(session, root, partitions.iter().cloned())
            .unwrap()
            .id(id)
            .unwrap();
        let worker = Arc::new(bounded("join", PATIENCE, partitioner.join()).await.unwrap());
        let (dealt, work_log, who) = (worker.clone(), log.clone(), id.to_owned());
        let dealing = tokio::spawn(async move {
            loop {
                match dealt.next_partition().await {
                    Ok(hold) => drop(tokio::spawn(work(who.clone(), hold, work_log.clone()))),
                    Err(err) => return err,
                }
            }
        });
        Member {
            id: id.to_owned(),
            partitions: partitions.len(),
            worker,
            log: log.clone(),
            dealing,
        }
    }

    /// Waits until this member sees `ids` and holds what the assignment gives it.
    async fn await_settled(&self, ids: &[&str]) {
        let mut states = self.worker.states();
        let what = format!("{} settled among {ids:?}", self.id);
        await_watch(&what, &mut states, |s| {
            s.members == ids && s.owned.keys().eq(s.assigned.iter())
        })
        .await;
    }

    /// Leaves, once the dealing task gave up its share of the worker.
    async fn leave(self) {
        self.dealing.abort();
        let _ = self.dealing.await;
        let worker = Arc::into_inner(self.worker).expect("the only handle left");
        bounded("leave", PATIENCE, worker.leave()).await.unwrap();
    }
}

/// Waits until `members` (with `ids`) each hold what the assignment gives them, all at once,
/// and their holds cover the partitions without overlap; the partitions each holds, with
/// their tokens. Each member's view trails the others' nodes, so a member settled on its own
/// may still be moving: only a moment at which all are settled together is the settled deal.
async fn settled(members: &[&Member], ids: &[&str]) -> BTreeMap<String, (String, u64)> {
    let changed = Arc::new(Notify::new());
    let watching: Vec<JoinHandle<()>> = (members.iter())
        .map(|member| {
            let (mut states, changed) = (member.worker.states(), changed.clone());
            tokio::spawn(async move {
                while states.changed().await.is_ok() {
                    changed.notify_one();
                }
            })
        })
        .collect();
    let what = format!("{ids:?} settled together");
    let owners = bounded(&what, PATIENCE, async {
        loop {
            if let Some(owners) = settled_now(members, ids) {
                break owners;
            }
            changed.notified().await;
        }
    })
    .await;
    watching.iter().for_each(JoinHandle::abort);
    for member in members {
        let owned = (owners.iter())
            .filter(|(_, (owner, _))| *owner == member.id)
            .map(|(partition, (_, token))| (partition.clone(), *token))
            .collect();
        member.log.await_working(&member.id, &owned).await;
    }
    owners
}

/// Who holds each partition, if every member in `members` sees `ids` and holds exactly what
/// its assignment gives it, and their holds are every partition, each once.
fn settled_now(members: &[&Member], ids: &[&str]) -> Option<BTreeMap<String, (String, u64)>> {
    let mut owners = BTreeMap::new();
    for member in members {
        let state = member.worker.states().borrow().clone();
        if state.members != ids || !state.owned.keys().eq(state.assigned.iter()) {
            return None;
        }
        for (partition, token) in state.owned {
            if owners
                .insert(partition, (member.id.clone(), token))
                .is_some()
            {
                return None;
            }
        }
    }
    (owners.len() == members[0].partitions).then_some(owners)
}

#[tokio::test(flavor = "multi_thread")]
async fn partitions_are_dealt_balanced_and_owners_show_who_holds_with_tokens() {
    let fx = fixture("partition-balance", 3).await;
    let partitions = names(10);
    let log = Log::new(&fx);
    let ids = ["a", "b", "c"];
    let mut members = Vec::new();
    for (session, id) in fx.sessions.iter().zip(ids) {
        members.push(Member::join(session, &fx.root, &partitions, id, &log).await);
    }
    let owners = settled(&members.iter().collect::<Vec<_>>(), &ids).await;

    let partitioner = Partitioner::new(&fx.sessions[0], &fx.root, partitions.clone()).unwrap();
    // Where the members settled is what the assignment deals, given those owners.
    let dealt = partitioner.assignment(&ids, &owner_ids(&owners));
    assert_eq!(dealt, owner_ids(&owners));
    assert_eq!(dealt.len(), 10);
    let mut counts: Vec<usize> = ids
        .iter()
        .map(|id| dealt.values().filter(|m| m == id).count())
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, [3, 3, 4]);

    // Seen from outside: each lock held by its member, with the member's token.
    for owner in partitioner.owners().await.unwrap() {
        let holder = owner.holder.expect("held");
        let (member, token) = &owners[&owner.partition];
        assert_eq!(
            (holder.id.as_deref(), holder.token),
            (Some(member.as_str()), *token)
        );
        assert!(owner.waiting.is_empty(), "{:?}", owner.waiting);
    }
    let listed: Vec<String> = partitioner
        .members()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(listed, ids);

    for member in members {
        member.leave().await;
    }
    assert!(log.overlaps().is_empty(), "{:#?}", log.overlaps());
    nothing_left(fx, &partitions).await;
}

/// Each partition's owner, without the token.
fn owner_ids(owners: &BTreeMap<String, (String, u64)>) -> BTreeMap<String, String> {
    (owners.iter())
        .map(|(partition, (owner, _))| (partition.clone(), owner.clone()))
        .collect()
}

/// The partitions a change of members to `after` moves from the owners `before`: those
/// whose member differs.
fn moved_by(
    partitioner: &Partitioner,
    before: &BTreeMap<String, (String, u64)>,
    after: &[&str],
) -> BTreeSet<String> {
    let before = owner_ids(before);
    let after = partitioner.assignment(after, &before);
    before
        .iter()
        .filter(|(partition, member)| after.get(*partition) != Some(*member))
        .map(|(partition, _)| partition.clone())
        .collect()
}

/// The partitions `member` owns.
fn owned_by(owners: &BTreeMap<String, (String, u64)>, member: &str) -> BTreeSet<String> {
    (owners.iter())
        .filter(|(_, (owner, _))| owner == member)
        .map(|(partition, _)| partition.clone())
        .collect()
}

/// Asserts that since `since` exactly the partitions `moved` were released, each once, when
/// told it moved, and each then held by its new owner (with a greater token); that every
/// other partition kept its token; and that nothing overlapped. The hand-off times, from the
/// release to the new grant.
fn check_hand_off(
    log: &Log,
    since: Instant,
    moved: &BTreeSet<String>,
    before: &BTreeMap<String, (String, u64)>,
    after: &BTreeMap<String, (String, u64)>,
) -> Vec<Duration> {
    let ended = log.ended_since(since);
    let released: Vec<&str> = ended.iter().map(|s| s.partition.as_str()).collect();
    let expected: Vec<&str> = moved.iter().map(String::as_str).collect();
    let mut sorted = released.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, expected, "released: {ended:#?}");
    assert!(
        ended.iter().all(|s| s.ended == Some(Why::Moved)),
        "{ended:#?}"
    );
    // Each was asked to let go once its next owner waited for it.
    assert!(ended.iter().all(|s| s.waiting == 1), "{ended:#?}");
    for (partition, (owner, token)) in after {
        let (was, old) = &before[partition];
        match moved.contains(partition) {
            true => assert!(
                owner != was && token > old,
                "{partition}: {was} {old:#x} -> {owner} {token:#x}"
            ),
            false => assert_eq!((owner, token), (was, old), "{partition} kept"),
        }
    }
    assert!(log.overlaps().is_empty(), "{:#?}", log.overlaps());
    log.check_tokens();
    let steps = log.steps();
    ended
        .iter()
        .map(|release| {
            let grant = steps
                .iter()
                .find(|s| {
                    s.partition == release.partition && s.ended.is_none() && s.at >= release.at
                })
                .expect("granted after the release");
            grant.at - release.at
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_join_and_a_clean_leave_move_only_what_the_assignment_moves_each_released_once() {
    let fx = fixture("partition-handoff", 4).await;
    let partitions = names(30);
    let partitioner = Partitioner::new(&fx.sessions[0], &fx.root, partitions.clone()).unwrap();
    let log = Log::new(&fx);
    let mut members = Vec::new();
    for (session, id) in fx.sessions[..3].iter().zip(["a", "b", "c"]) {
        members.push(Member::join(session, &fx.root, &partitions, id, &log).await);
    }
    let three = ["a", "b", "c"];
    let before = settled(&members.iter().collect::<Vec<_>>(), &three).await;

    // A join: "d" takes its share, and nothing else moves.
    let since = Instant::now();
    members.push(Member::join(&fx.sessions[3], &fx.root, &partitions, "d", &log).await);
    let four = ["a", "b", "c", "d"];
    let after = settled(&members.iter().collect::<Vec<_>>(), &four).await;
    tokio::time::sleep(QUIET).await;
    let moved = moved_by(&partitioner, &before, &four);
    let taken = after.values().filter(|(owner, _)| owner == "d").count();
    assert!(taken == 7 || taken == 8, "d took {taken}");
    assert_eq!(moved, owned_by(&after, "d"), "only d's share moves");
    let handoffs = check_hand_off(&log, since, &moved, &before, &after);
    eprintln!(
        "join: {} moved ({taken} to d), hand-offs {handoffs:?}",
        moved.len()
    );

    // A clean leave of "b": its partitions move, and no other, each within a few round
    // trips, long before any session could expire.
    let since = Instant::now();
    let b = members.remove(1);
    bounded("b leaves", PATIENCE, b.leave()).await;
    let three = ["a", "c", "d"];
    let settled_after = settled(&members.iter().collect::<Vec<_>>(), &three).await;
    let recovered = since.elapsed();
    tokio::time::sleep(QUIET).await;
    let moved = moved_by(&partitioner, &after, &three);
    assert_eq!(moved, owned_by(&after, "b"), "only b's partitions move");
    let handoffs = check_hand_off(&log, since, &moved, &after, &settled_after);
    eprintln!(
        "leave: {} moved, all owned again after {recovered:?}, hand-offs {handoffs:?}",
        moved.len()
    );
    assert!(
        recovered < SESSION_TIMEOUT / 2,
        "{recovered:?}: as slow as an expiry"
    );

    for member in members {
        member.leave().await;
    }
    nothing_left(fx, &partitions).await;
}

/// Members joining and leaving every few hundred ms: no partition is ever trusted by two
/// members at once, each partition's tokens grow, and once the churn stops every partition
/// is held by the member the assignment names.
#[tokio::test(flavor = "multi_thread")]
async fn churn_never_lets_two_members_work_one_partition() {
    let fx = fixture("partition-churn", 4).await;
    let partitions = names(12);
    let log = Log::new(&fx);
    let ids = ["a", "b", "c", "d"];
    let mut members: Vec<Option<Member>> = Vec::new();
    for (session, id) in fx.sessions.iter().zip(ids).take(2) {
        members.push(Some(
            Member::join(session, &fx.root, &partitions, id, &log).await,
        ));
    }
    members.extend([None, None]);
    for round in 0..12 {
        let i = (round * 3 + 2) % 4;
        match members[i].take() {
            Some(member) => member.leave().await,
            None => {
                let member =
                    Member::join(&fx.sessions[i], &fx.root, &partitions, ids[i], &log).await;
                members[i] = Some(member);
            }
        }
        tokio::time::sleep(Duration::from_millis(200 + 50 * (round % 4) as u64)).await;
    }
    let live: Vec<&Member> = members.iter().flatten().collect();
    let live_ids: Vec<&str> = live.iter().map(|m| m.id.as_str()).collect();
    let owners = settled(&live, &live_ids).await;
    assert_eq!(owners.len(), 12);
    assert!(log.overlaps().is_empty(), "{:#?}", log.overlaps());
    log.check_tokens();
    let lost: Vec<Step> = log
        .steps()
        .into_iter()
        .filter(|s| s.ended == Some(Why::Lost))
        .collect();
    assert!(lost.is_empty(), "{lost:#?}");
    eprintln!("churn: {} holds granted", log.history.entries());
    for member in members.into_iter().flatten() {
        member.leave().await;
    }
    nothing_left(fx, &partitions).await;
}

#[path = "partition/edges.rs"]
mod edges;
#[path = "partition/processes.rs"]
mod processes;
