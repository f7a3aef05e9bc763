//! Members as real processes (this test binary, run as [`member_process`]): each prints when
//! it starts and stops working a partition; the test turns those lines into intervals and,
//! with the history checker, counts the instants at which two members worked one partition.
//! It must be none — while a member's connection is frozen past its session, while a member
//! is SIGSTOPped past its session and then resumed, when a member is SIGKILLed, when one
//! joins and when one leaves — and after each fault every partition must be worked again
//! within a session timeout and a few round trips, balanced among the members left; a join
//! and a clean leave stop only the partitions the assignment moves.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::signal::unix::{signal as on_signal, SignalKind};
use tokio::sync::watch;
use zk_harness::history::{stretches, Faults, Mark, Pause, Printed, Stretch};
use zk_harness::{
    await_empty, child_test, now_ms, observer, session, signal, unique_root, Ensemble, Proxy,
    PATIENCE,
};
use zk_recipes::{PartitionHold, Partitioner};

/// The members' session timeout.
const TIMEOUT: Duration = Duration::from_millis(2000);

const PARTITIONS: usize = 12;

/// How long after a fault every partition must be worked again: the session timeout (the
/// servers' expiry, rounded up to their tick), then the notification, the views, the locks,
/// a few round trips each, on a machine shared with other work.
const RECOVERY: Duration = Duration::from_millis(2000 + 2000);

/// Tells the child what to be: `<hosts> <root> <id>`.
const CHILD: &str = "ZK_RECIPES_PARTITION_MEMBER";

/// A window in which no further work may stop once the members are balanced: longer than a
/// hold whose partition moved away goes on while no successor waits (1 s).
const QUIET: Duration = Duration::from_millis(1500);

/// How often a member looks at its hold while it works (a unit of work).
const UNIT: Duration = Duration::from_millis(20);

fn partitions() -> Vec<String> {
    (0..PARTITIONS).map(|i| format!("p{i:02}")).collect()
}

/// The child: a member that works each partition it is handed, one unit at a time, looking
/// at its hold before each (read from the clock: after a pause past the session it says lost
/// before any unit), until the hold is lost or moved; leaves on SIGTERM.
#[tokio::test]
#[ignore = "run by members_never_work_one_partition_at_once_through_faults_joins_and_leaves"]
async fn member_process() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    let [hosts, root, id] = what.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{what}: <hosts> <root> <id>");
    };
    let mut terminate = on_signal(SignalKind::terminate()).unwrap();
    let session = session(hosts, TIMEOUT).await;
    let partitioner = Partitioner::new(&session, root, partitions())
        .unwrap()
        .id(id)
        .unwrap();
    let worker = partitioner.join().await.unwrap();
    say("joined");
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            hold = worker.next_partition() => drop(tokio::spawn(work(hold.unwrap()))),
        }
    }
    worker.leave().await.unwrap();
    say("left");
}

async fn work(hold: PartitionHold) {
    let (name, token) = (hold.name().to_owned(), hold.fencing_token());
    say(&format!("working {name} {token}"));
    let mut units = tokio::time::interval(UNIT);
    let why = loop {
        tokio::select! {
            biased;
            _ = units.tick() => {
                if hold.is_lost() {
                    break "lost";
                }
                // One unit of work on the partition, fenced by `token`, goes here.
            }
            _ = hold.lost() => break "lost",
            () = hold.moved() => break "moved",
        }
    };
    say(&format!("stopped {name} {token} {why}"));
    let _ = hold.release().await;
}

fn say(what: &str) {
    println!("{} {what}", now_ms());
}

/// A line a member printed: who, when (ms since the epoch, one clock), what.
#[derive(Clone, Debug)]
struct Line {
    id: String,
    ms: u64,
    text: String,
}

/// A member process connected through `proxy`, its lines appended to `log`.
fn member(proxy: &Proxy, root: &str, id: &str, log: &watch::Sender<Vec<Line>>) -> Child {
    let what = format!("{} {root} {id}", proxy.address());
    let mut child = child_test(module_path!(), "member_process", CHILD, &what);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (log, id) = (log.clone(), id.to_owned());
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            // The test runner's own lines carry no time.
            let Some((ms, text)) = line.split_once(' ') else {
                continue;
            };
            let Ok(ms) = ms.parse() else { continue };
            let line = Line {
                id: id.clone(),
                ms,
                text: text.to_owned(),
            };
            log.send_modify(|log| log.push(line));
        }
    });
    child
}

/// Every member's stretches of work on partitions, from the lines it printed.
fn intervals(log: &[Line]) -> Vec<Stretch> {
    stretches(log.iter().filter_map(|line| {
        let mark = match line.text.split(' ').collect::<Vec<_>>()[..] {
            ["working", partition, token] => Mark::Started {
                what: partition.to_owned(),
                token: token.parse().unwrap(),
            },
            ["stopped", partition, _, why] => Mark::Stopped {
                what: partition.to_owned(),
                why: why.to_owned(),
            },
            _ => return None,
        };
        Some((line.id.clone(), line.ms, mark))
    }))
}

/// The members' lines, and the faults done to them.
struct Run {
    log: watch::Receiver<Vec<Line>>,
    faults: Faults,
}

impl Run {
    /// Waits until the members `ids` work every partition, each ⌊P/N⌋ or ⌈P/N⌉ of
    /// them, and `fresh` (a member and an instant) only partitions it began after then;
    /// fails, with the overlaps so far, after `within`. The partitions each works.
    async fn await_balanced(
        &mut self,
        ids: &[&str],
        fresh: Option<(&str, u64)>,
        within: Duration,
        what: &str,
    ) -> BTreeMap<String, Stretch> {
        let (floor, ceil) = (PARTITIONS / ids.len(), PARTITIONS.div_ceil(ids.len()));
        let working = |log: &Vec<Line>| -> Option<BTreeMap<String, Stretch>> {
            // A member stopped, cut off or killed cannot say that it stopped: only the
            // intervals of `ids` count.
            let open: Vec<Stretch> = (intervals(log).into_iter())
                .filter(|i| i.exit.is_none() && ids.contains(&i.who.as_str()))
                .collect();
            let stale =
                |i: &Stretch| fresh.is_some_and(|(id, since)| i.who == id && i.enter < since);
            let counts_ok = ids.iter().all(|id| {
                let n = open.iter().filter(|i| i.who == *id).count();
                n == floor || n == ceil
            });
            let by_partition: BTreeMap<String, Stretch> =
                (open.iter()).map(|i| (i.what.clone(), i.clone())).collect();
            let covered = open.len() == PARTITIONS && by_partition.len() == PARTITIONS;
            (counts_ok && covered && !open.iter().any(stale)).then_some(by_partition)
        };
        let waited = tokio::time::timeout(within, self.log.wait_for(|log| working(log).is_some()))
            .await
            .map(|log| log.map(|log| working(&log)));
        if let Ok(Ok(Some(working))) = waited {
            return working;
        }
        let overlapping = self.overlaps();
        panic!(
            "{what}: not within {within:?}; {} overlaps so far: {overlapping:#?}",
            overlapping.len()
        )
    }

    /// The pairs of intervals of one partition, of two members, that overlap (see
    /// [`Faults::overlaps`]: a member looks at its hold before every unit of work).
    fn overlaps(&self) -> Vec<String> {
        let printed: Vec<Printed> = (intervals(&self.log.borrow()).into_iter())
            .map(|stretch| stretch.printed("lost"))
            .collect();
        self.faults.overlaps(&printed)
    }

    /// The partitions whose work stopped at or after `since` (ms), by why.
    fn stopped_since(&self, since: u64) -> Vec<(String, String)> {
        let mut stopped: Vec<(String, String)> = intervals(&self.log.borrow())
            .into_iter()
            .filter_map(|i| {
                i.exit
                    .filter(|(ms, _)| *ms >= since)
                    .map(|(_, why)| (i.what, why))
            })
            .collect();
        stopped.sort();
        stopped
    }
}

/// The partitions a change of members to `after` moves from the owners `before`, as
/// `(partition, "moved")`, sorted.
fn moved_by(
    partitioner: &Partitioner,
    before: &BTreeMap<String, Stretch>,
    after: &[&str],
) -> Vec<(String, String)> {
    let before: BTreeMap<String, String> = (before.iter())
        .map(|(partition, interval)| (partition.clone(), interval.who.clone()))
        .collect();
    let after = partitioner.assignment(after, &before);
    (before.iter())
        .filter(|(partition, member)| after.get(*partition) != Some(*member))
        .map(|(partition, _)| (partition.clone(), "moved".to_owned()))
        .collect()
}

/// The partitions `id` works in `working`, as `moved_by` lists them.
fn taken_by(working: &BTreeMap<String, Stretch>, id: &str) -> Vec<(String, String)> {
    (working.iter())
        .filter(|(_, interval)| interval.who == id)
        .map(|(partition, _)| (partition.clone(), "moved".to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn members_never_work_one_partition_at_once_through_faults_joins_and_leaves() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("partition-processes");
    let outside = session(&zk.connect_string(), TIMEOUT).await;
    let partitioner = Partitioner::new(&outside, &root, partitions()).unwrap();
    let (log_tx, log) = watch::channel(Vec::new());
    let mut run = Run {
        log,
        faults: Faults::default(),
    };
    let mut proxies = BTreeMap::new();
    let mut members = BTreeMap::new();
    for id in ["r1", "r2", "r3"] {
        let proxy = zk.proxy(0).await;
        members.insert(id, member(&proxy, &root, id, &log_tx));
        proxies.insert(id, proxy);
    }
    let all = ["r1", "r2", "r3"];
    run.await_balanced(&all, None, PATIENCE, "three work").await;

    // (a) r1's connection frozen past its session: it stops on its own; the others take its
    // partitions once its session expired; thawed, it joins again and gets its share back.
    proxies["r1"].freeze();
    let frozen = Instant::now();
    run.await_balanced(&["r2", "r3"], None, RECOVERY, "r1 frozen: the others work")
        .await;
    eprintln!(
        "frozen member's partitions worked again after {:?}",
        frozen.elapsed()
    );
    let thawed = now_ms();
    proxies["r1"].restore();
    run.await_balanced(&all, Some(("r1", thawed)), PATIENCE, "r1 thawed: all work")
        .await;

    // (b) r2 SIGSTOPped past its session, then resumed: it finds its holds lost before any
    // unit of work, and gets its share back.
    let pid = |child: &Child| libc::pid_t::try_from(child.id().expect("running")).unwrap();
    let stop = now_ms();
    signal(pid(&members["r2"]), libc::SIGSTOP);
    run.await_balanced(&["r1", "r3"], None, RECOVERY, "r2 stopped: the others work")
        .await;
    let cont = now_ms();
    signal(pid(&members["r2"]), libc::SIGCONT);
    run.faults.pauses.push(Pause {
        who: "r2".into(),
        stop,
        cont,
    });
    run.await_balanced(&all, Some(("r2", cont)), PATIENCE, "r2 resumed: all work")
        .await;

    // (c) r3 SIGKILLed: the others take its partitions once its session expired.
    let killed = Instant::now();
    run.faults.kills.insert("r3".into(), now_ms());
    let mut r3 = members.remove("r3").unwrap();
    r3.start_kill().unwrap();
    let _ = r3.wait().await;
    let two = ["r1", "r2"];
    let working = run
        .await_balanced(&two, None, RECOVERY, "r3 killed: the others work")
        .await;
    eprintln!(
        "killed member's partitions worked again after {:?}",
        killed.elapsed()
    );

    // (d) r4 joins: only the partitions it takes stop, each once.
    let joined = now_ms();
    let proxy = zk.proxy(0).await;
    members.insert("r4", member(&proxy, &root, "r4", &log_tx));
    proxies.insert("r4", proxy);
    let three = ["r1", "r2", "r4"];
    let joined_working = run
        .await_balanced(&three, None, PATIENCE, "r4 joined: all work")
        .await;
    tokio::time::sleep(QUIET).await;
    let moved = moved_by(&partitioner, &working, &three);
    assert_eq!(run.stopped_since(joined), moved, "on the join");
    assert_eq!(
        moved,
        taken_by(&joined_working, "r4"),
        "r4 takes its share only"
    );

    // (e) r1 leaves cleanly: only its partitions stop, each once, and are worked again
    // within a few round trips, long before any session could expire.
    let left = (now_ms(), Instant::now());
    let mut r1 = members.remove("r1").unwrap();
    signal(pid(&r1), libc::SIGTERM);
    let after = ["r2", "r4"];
    run.await_balanced(&after, None, TIMEOUT, "r1 left: the others work")
        .await;
    eprintln!(
        "a leaver's partitions worked again after {:?}",
        left.1.elapsed()
    );
    assert!(r1.wait().await.unwrap().success());
    tokio::time::sleep(QUIET).await;
    let moved = moved_by(&partitioner, &joined_working, &after);
    assert_eq!(run.stopped_since(left.0), moved, "on the leave");
    assert_eq!(
        moved,
        taken_by(&joined_working, "r1"),
        "only r1's partitions move"
    );

    let overlapping = run.overlaps();
    assert!(
        overlapping.is_empty(),
        "{} overlaps: {overlapping:#?}",
        overlapping.len()
    );

    for (id, mut child) in members {
        signal(pid(&child), libc::SIGTERM);
        let status = tokio::time::timeout(PATIENCE, child.wait()).await;
        assert!(
            matches!(&status, Ok(Ok(exit)) if exit.success()),
            "{id}: {status:?}"
        );
    }
    let client = observer(&zk.connect_string()).await;
    await_empty(&client, &format!("{root}/members")).await;
    for name in partitions() {
        let lock = format!("{root}/partitions/{name}");
        await_empty(&client, &lock).await;
        let _ = client.delete(&lock, None).await;
    }
    for path in [
        format!("{root}/members"),
        format!("{root}/partitions"),
        root.clone(),
    ] {
        match client.delete(&path, None).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(err) => panic!("{path}: {err}"),
        }
    }
}
