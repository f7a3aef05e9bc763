//! `examples/master_follower.rs` run as real processes against a real ZooKeeper server.
//!
//! Each replica prints when it starts and stops working on a partition; the test turns
//! those lines into intervals and, with the history checker, counts the instants at which
//! two replicas worked on one partition. It must be none — while a follower's connection
//! is frozen past its session, while a follower and then the master are SIGSTOPped past
//! their session and then resumed, and when the master is SIGKILLed — and after each fault
//! every partition must be worked on again within a session timeout and a few round trips.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use zk_harness::history::{stretches, Faults, Mark, Pause, Printed, Stretch};
use zk_harness::{await_empty, now_ms, observer, unique_root, Ensemble, Proxy, PATIENCE};
use zookeeper_client::{Acls, CreateMode};

/// The replicas' session timeout, in ms: a killed replica is noticed once it expired.
const SESSION_TIMEOUT_MS: u64 = 2000;
const PARTITIONS: u32 = 6;

/// How long after a fault every partition must be worked on again: the session timeout
/// (the servers' expiry, rounded up to their 200 ms tick), then the notification, the new
/// assignment and the lock, a few round trips each, on a machine shared with other work.
const RECOVERY: Duration = Duration::from_millis(SESSION_TIMEOUT_MS + 2000);

/// The example's binary, built once per test binary (with the features of the tests).
fn example() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        let status = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "--all-features",
                "--example",
                "master_follower",
            ])
            .args(["--manifest-path", manifest])
            .status()
            .expect("run cargo");
        assert!(status.success(), "cannot build the example");
        let target = std::env::var("CARGO_TARGET_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target").into());
        PathBuf::from(target).join("debug/examples/master_follower")
    })
}

/// A line a replica printed: who, when (its own clock, ms since the epoch), what.
#[derive(Clone, Debug)]
struct Line {
    id: String,
    ms: u64,
    text: String,
}

type Log = watch::Receiver<Vec<Line>>;

/// A replica connected through `proxy`, its output lines appended to `log`.
fn replica(proxy: &Proxy, root: &str, id: &str, log: &watch::Sender<Vec<Line>>) -> Child {
    let mut child = Command::new(example())
        .args([id, &PARTITIONS.to_string(), &SESSION_TIMEOUT_MS.to_string()])
        .env("ZK_HOSTS", proxy.address())
        .env("DEMO_ROOT", root)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start a replica");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (log, id) = (log.clone(), id.to_owned());
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let (ms, text) = line.split_once(' ').expect("<ms> [id] text");
            let text = text.split_once("] ").map_or(text, |(_, text)| text);
            let line = Line {
                id: id.clone(),
                ms: ms.parse().expect("ms"),
                text: text.to_owned(),
            };
            log.send_modify(|log| log.push(line));
        }
    });
    child
}

/// What a line says about the work on a partition: why `lock lost` if the replica noticed
/// itself that its lock was lost.
fn work(text: &str) -> Option<Mark> {
    let number = |s: &str| {
        s.split([' ', ':'])
            .next()
            .and_then(|p| p.parse::<u32>().ok())
    };
    if let Some(rest) = text.strip_prefix("working on partition ") {
        let what = number(rest)?.to_string();
        return Some(Mark::Started { what, token: 0 });
    }
    let rest = text.strip_prefix("stopped working on partition ")?;
    let why = match rest.contains(": lock lost") {
        true => "lock lost",
        false => "",
    };
    let what = number(rest)?.to_string();
    Some(Mark::Stopped {
        what,
        why: why.to_owned(),
    })
}

/// Every replica's stretches of work on partitions, in the order their lines were printed.
fn intervals(log: &[Line]) -> Vec<Stretch> {
    stretches((log.iter()).filter_map(|line| Some((line.id.clone(), line.ms, work(&line.text)?))))
}

/// The id of the replica whose latest role line says MASTER.
fn master(log: &[Line]) -> Option<String> {
    let mut roles: BTreeMap<&str, bool> = BTreeMap::new();
    for line in log.iter().filter(|l| l.text.starts_with("role: ")) {
        roles.insert(&line.id, line.text.contains("MASTER"));
    }
    let mut masters = roles.into_iter().filter(|(_, m)| *m);
    let (id, _) = masters.next()?;
    masters.next().is_none().then(|| id.to_owned())
}

/// The replicas' output and the faults done to them so far.
struct Run {
    log: Log,
    faults: Faults,
}

impl Run {
    /// Waits until the replicas `ids` work on every partition, each on at least one, and
    /// `fresh` (if any: a replica and an instant) only on partitions it began after that
    /// instant; fails, with the overlaps so far, if it takes longer than `within`.
    async fn await_worked(
        &mut self,
        ids: &[&str],
        fresh: Option<(&str, u64)>,
        within: Duration,
        what: &str,
    ) {
        let all: BTreeSet<String> = (0..PARTITIONS).map(|p| p.to_string()).collect();
        let done = |log: &Vec<Line>| {
            let open: Vec<Stretch> = intervals(log)
                .into_iter()
                .filter(|i| i.exit.is_none() && ids.contains(&i.who.as_str()))
                .collect();
            let stale =
                |i: &Stretch| fresh.is_some_and(|(id, since)| i.who == id && i.enter < since);
            open.iter().map(|i| i.what.clone()).collect::<BTreeSet<_>>() == all
                && ids.iter().all(|id| open.iter().any(|i| i.who == *id))
                && !open.iter().any(stale)
        };
        if tokio::time::timeout(within, self.log.wait_for(done))
            .await
            .is_err()
        {
            let overlapping = self.overlaps();
            panic!(
                "{what}: not within {within:?}; {} overlaps so far: {overlapping:#?}",
                overlapping.len()
            );
        }
    }

    /// The overlapping pairs of intervals of one partition worked on by two replicas (see
    /// [`Faults::overlaps`]: the example looks at its lock, read from the clock, before every
    /// unit of work).
    fn overlaps(&self) -> Vec<String> {
        let printed: Vec<Printed> = (intervals(&self.log.borrow()).into_iter())
            .map(|stretch| stretch.printed("lock lost"))
            .collect();
        self.faults.overlaps(&printed)
    }

    /// SIGSTOPs replica `id` until the others work on every partition, then resumes it
    /// and waits until all of `ids` work again, `id` on partitions it took since.
    async fn pause_past_session(
        &mut self,
        replicas: &BTreeMap<&str, Child>,
        id: &str,
        ids: &[&str],
    ) {
        let others: Vec<&str> = ids.iter().copied().filter(|o| *o != id).collect();
        let stop = now_ms();
        signal(&replicas[id], libc::SIGSTOP);
        let what = format!("{id} stopped: the others work");
        self.await_worked(&others, None, RECOVERY, &what).await;
        let cont = now_ms();
        signal(&replicas[id], libc::SIGCONT);
        let id = id.to_owned();
        self.faults.pauses.push(Pause {
            who: id.clone(),
            stop,
            cont,
        });
        let what = format!("{id} resumed: all work");
        self.await_worked(ids, Some((&id, cont)), PATIENCE, &what)
            .await;
    }
}

/// Sends `signal` to `child`.
fn signal(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id().expect("running")).unwrap();
    // SAFETY: a signal to our own child, which has not been waited for.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_two_replicas_work_one_partition_through_freeze_pause_and_kill() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("master-follower");
    let (log_tx, log) = watch::channel(Vec::new());
    let mut run = Run {
        log,
        faults: Faults::default(),
    };
    let ids = ["r1", "r2", "r3"];
    let mut proxies = BTreeMap::new();
    let mut replicas = BTreeMap::new();
    for id in ids {
        let proxy = zk.proxy(0).await;
        replicas.insert(id, replica(&proxy, &root, id, &log_tx));
        proxies.insert(id, proxy);
    }
    run.await_worked(&ids, None, PATIENCE, "all three work")
        .await;
    let first_master = master(&run.log.borrow()).expect("one master");
    let follower = *ids.iter().find(|id| **id != first_master).unwrap();

    // (a) A follower's connection frozen past its session: it stops on its own, the
    // others take its partitions once its session expired; thawed, it works again.
    let frozen = now_ms();
    proxies[follower].freeze();
    let others: Vec<&str> = ids.iter().copied().filter(|id| *id != follower).collect();
    run.await_worked(&others, None, RECOVERY, "frozen: the others work")
        .await;
    // It stopped before the master dealt its partitions to the others.
    let log = run.log.borrow().clone();
    let redealt = (log.iter())
        .filter(|l| l.ms >= frozen && l.text.starts_with("published v"))
        .find(|l| !l.text.contains(&format!(" {follower}:")))
        .expect("a deal without the frozen follower")
        .ms;
    let late: Vec<Stretch> = (intervals(&log).into_iter())
        .filter(|i| i.who == follower && i.enter <= frozen)
        .filter(|i| i.exit.as_ref().is_none_or(|(exit, _)| *exit > redealt))
        .collect();
    assert!(
        late.is_empty(),
        "worked on after the deal at {redealt}: {late:#?}"
    );
    let thawed = (follower, now_ms());
    proxies[follower].restore();
    run.await_worked(&ids, Some(thawed), PATIENCE, "thawed: all work")
        .await;

    // (b) A follower, then the master, SIGSTOPped past the session, then resumed.
    run.pause_past_session(&replicas, follower, &ids).await;
    let paused_master = master(&run.log.borrow()).expect("one master");
    run.pause_past_session(&replicas, &paused_master, &ids)
        .await;
    // The resumed master stopped being master before it published anything.
    let resumed = run.faults.pauses[1].cont;
    let after: Vec<Line> = (run.log.borrow().iter())
        .filter(|l| l.id == paused_master && l.ms >= resumed)
        .filter(|l| l.text.contains("published v") || l.text.starts_with("role: "))
        .cloned()
        .collect();
    assert!(
        after
            .first()
            .is_some_and(|l| l.text.contains("leadership lost")),
        "the resumed master's first word: {after:?}"
    );

    // (c) The master SIGKILLed: the others take its partitions once its session expired.
    let killed = master(&run.log.borrow()).expect("one master");
    run.faults.kills.insert(killed.clone(), now_ms());
    let replica = replicas.get_mut(killed.as_str()).unwrap();
    replica.start_kill().unwrap();
    let left: Vec<&str> = ids.iter().copied().filter(|id| *id != killed).collect();
    run.await_worked(&left, None, RECOVERY, "killed: the others work")
        .await;

    let overlapping = run.overlaps();
    assert!(
        overlapping.is_empty(),
        "{} overlaps: {overlapping:#?}",
        overlapping.len()
    );

    // Every assignment names each partition once.
    for line in run.log.borrow().iter() {
        let published = line.text.strip_prefix("published v");
        let Some((_, text)) = published.and_then(|rest| rest.split_once(": term=")) else {
            continue;
        };
        let mut dealt: Vec<u32> = (text.split_whitespace())
            .filter_map(|entry| entry.split_once(':'))
            .flat_map(|(_, part)| part.split(',').filter_map(|p| p.parse().ok()))
            .collect();
        dealt.sort_unstable();
        assert_eq!(dealt, (0..PARTITIONS).collect::<Vec<_>>(), "{line:?}");
    }

    // The rest leave cleanly, and leave nothing behind.
    for id in left {
        let mut replica = replicas.remove(id).unwrap();
        let since = now_ms();
        signal(&replica, libc::SIGTERM);
        let status = tokio::time::timeout(PATIENCE, replica.wait()).await;
        let said: Vec<Line> = (run.log.borrow().iter())
            .filter(|l| l.id == id && l.ms >= since)
            .cloned()
            .collect();
        assert!(
            matches!(&status, Ok(Ok(exit)) if exit.success()),
            "{id} after SIGTERM: {status:?}, said {said:#?}"
        );
    }
    let client = observer(&zk.connect_string()).await;
    await_empty(&client, &format!("{root}/members")).await;
    await_empty(&client, &format!("{root}/election")).await;
    for p in 0..PARTITIONS {
        await_empty(&client, &format!("{root}/partitions/{p}")).await;
    }
    client
        .delete(&format!("{root}/assignment"), None)
        .await
        .unwrap();
}

/// A replica whose id another session took (its member node deleted and made again as the
/// other session's, in one multi) has stopped all work when it says so, and exits with an
/// error, leaving nothing of its own behind; the taker's node stays as it was made.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_whose_id_was_taken_stops_and_exits() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("master-follower-taken");
    let (log_tx, log) = watch::channel(Vec::new());
    let mut run = Run {
        log,
        faults: Faults::default(),
    };
    let proxy = zk.proxy(0).await;
    let mut taken = replica(&proxy, &root, "r1", &log_tx);
    run.await_worked(&["r1"], None, PATIENCE, "r1 works").await;

    let taker = observer(&zk.connect_string()).await;
    let node = format!("{root}/members/r1");
    let mut multi = taker.new_multi_writer();
    multi.add_delete(&node, None).unwrap();
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    multi.add_create(&node, b"taker", &ephemeral).unwrap();
    multi.commit().await.unwrap();

    let status = tokio::time::timeout(PATIENCE, taken.wait()).await;
    // Its last line: printed once every worker stopped and the rest was left.
    let left = |log: &Vec<Line>| log.iter().any(|l| l.text == "left");
    let _ = tokio::time::timeout(PATIENCE, run.log.wait_for(left)).await;
    let log = run.log.borrow().clone();
    assert!(
        matches!(&status, Ok(Ok(exit)) if !exit.success()) && left(&log),
        "the replica whose id was taken: {status:?}, said {log:#?}"
    );
    assert!(
        log.iter()
            .any(|l| l.text.starts_with("my membership ended")),
        "{log:#?}"
    );
    let working: Vec<Stretch> = intervals(&log)
        .into_iter()
        .filter(|i| i.exit.is_none())
        .collect();
    assert!(working.is_empty(), "still working: {working:#?}");

    let (data, stat) = taker.get_data(&node).await.unwrap();
    assert_eq!(
        (data.as_slice(), stat.ephemeral_owner),
        (&b"taker"[..], taker.session_id().0)
    );
    taker.delete(&node, None).await.unwrap();
    await_empty(&taker, &format!("{root}/members")).await;
    await_empty(&taker, &format!("{root}/election")).await;
    for p in 0..PARTITIONS {
        await_empty(&taker, &format!("{root}/partitions/{p}")).await;
    }
    taker
        .delete(&format!("{root}/assignment"), None)
        .await
        .unwrap();
}
