//! `examples/master_follower.rs` run as real processes against a real ZooKeeper server:
//! the assignment follows the live members when a follower and then the master are
//! SIGKILLed, and no assignment gives one partition to two members.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use zk_harness::{await_empty, await_watch, bounded, observer, unique_root, Ensemble, PATIENCE};

/// The replicas' session timeout, in ms: a killed replica is noticed once it expired.
const SESSION_TIMEOUT_MS: u64 = 2000;
const PARTITIONS: u32 = 6;

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

/// A replica, its output lines appended to `log` as `(id, line)`.
fn replica(hosts: &str, root: &str, id: &str, log: &watch::Sender<Vec<(String, String)>>) -> Child {
    let mut child = Command::new(example())
        .args([id, &PARTITIONS.to_string(), &SESSION_TIMEOUT_MS.to_string()])
        .env("ZK_HOSTS", hosts)
        .env("DEMO_ROOT", root)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start a replica");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let (log, id) = (log.clone(), id.to_owned());
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            log.send_modify(|log| log.push((id.clone(), line)));
        }
    });
    child
}

/// An assignment as published: version, and member → partitions.
type Assignment = (i32, BTreeMap<String, Vec<u32>>);

/// The assignments published so far, in the order printed.
fn published(log: &[(String, String)]) -> Vec<Assignment> {
    log.iter()
        .filter_map(|(_, line)| line.split_once("published v"))
        .map(|(_, rest)| {
            let (version, text) = rest.split_once(": ").expect("v<version>: <assignment>");
            let owners = text
                .split_whitespace()
                .filter_map(|entry| entry.split_once(':'))
                .map(|(id, part)| {
                    let part = part.split(',').filter(|p| !p.is_empty());
                    (
                        id.to_owned(),
                        part.map(|p| p.parse().expect("a partition")).collect(),
                    )
                })
                .collect();
            (version.parse().expect("a version"), owners)
        })
        .collect()
}

/// Waits until an assignment to exactly `members` is published; returns its publisher.
async fn await_assignment(
    log: &mut watch::Receiver<Vec<(String, String)>>,
    members: &[&str],
    within: Duration,
) -> String {
    let wanted: BTreeSet<&str> = members.iter().copied().collect();
    let is_wanted = |(_, owners): &Assignment| {
        owners.keys().map(String::as_str).collect::<BTreeSet<_>>() == wanted
    };
    bounded(
        &format!("an assignment to {members:?}"),
        within,
        log.wait_for(|log| published(log).iter().any(is_wanted)),
    )
    .await
    .expect("the replicas' output");
    let log = log.borrow();
    let (_, line) = log
        .iter()
        .find(|(_, line)| {
            line.contains("published v")
                && published(&[(String::new(), line.clone())])
                    .iter()
                    .any(is_wanted)
        })
        .expect("the line");
    line.split_once("] ")
        .and_then(|(head, _)| head.rsplit_once('['))
        .map(|(_, id)| id.to_owned())
        .expect("[id]")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_assignment_follows_the_live_members_and_never_gives_a_partition_twice() {
    let zk = Ensemble::shared(1).await;
    let (hosts, root) = (zk.connect_string(), unique_root("master-follower"));
    let (log_tx, mut log) = watch::channel(Vec::new());
    let mut replicas: BTreeMap<&str, Child> = ["r1", "r2", "r3"]
        .into_iter()
        .map(|id| (id, replica(&hosts, &root, id, &log_tx)))
        .collect();
    let master = await_assignment(&mut log, &["r1", "r2", "r3"], PATIENCE).await;

    // Kill a follower: the master deals its partitions to the others once it expired.
    let within = Duration::from_millis(SESSION_TIMEOUT_MS * 3);
    let follower = *replicas
        .keys()
        .find(|id| **id != master)
        .expect("a follower");
    replicas.get_mut(follower).unwrap().start_kill().unwrap();
    let left: Vec<&str> = replicas
        .keys()
        .copied()
        .filter(|id| *id != follower)
        .collect();
    assert_eq!(await_assignment(&mut log, &left, within).await, master);

    // Kill the master: the last replica leads and takes every partition.
    replicas
        .get_mut(master.as_str())
        .unwrap()
        .start_kill()
        .unwrap();
    let last = *left.iter().find(|id| **id != master).expect("the last");
    assert_eq!(await_assignment(&mut log, &[last], within).await, last);
    await_watch("the last works on all", &mut log, |log| {
        log.iter()
            .any(|(id, line)| id == last && line.contains("working on partitions 0,1,2,3,4,5"))
    })
    .await;

    // Every assignment names each partition once; replicas claim disjoint parts of each.
    let log_now = log.borrow().clone();
    for (version, owners) in published(&log_now) {
        let mut dealt: Vec<u32> = owners.values().flatten().copied().collect();
        dealt.sort_unstable();
        assert_eq!(
            dealt,
            (0..PARTITIONS).collect::<Vec<_>>(),
            "v{version}: {owners:?}"
        );
    }
    let mut claims: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (_, line) in &log_now {
        let Some((_, rest)) = line.split_once("my partitions: ") else {
            continue;
        };
        let (part, version) = rest.split_once(" (v").expect("(v<version>");
        let version = version.split(':').next().expect("a version").to_owned();
        let part = part.split(',').filter_map(|p| p.parse::<u32>().ok());
        let claimed = claims.entry(version.clone()).or_default();
        for p in part {
            assert!(
                !claimed.contains(&p),
                "partition {p} claimed twice in v{version}"
            );
            claimed.push(p);
        }
    }

    let mut last_replica = replicas.remove(last).unwrap();
    let pid = i32::try_from(last_replica.id().unwrap()).unwrap();
    // SAFETY: a signal to our own child, which has not been waited for.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = bounded("the last replica to exit", PATIENCE, last_replica.wait()).await;
    assert!(status.unwrap().success());
    let client = observer(&hosts).await;
    await_empty(&client, &format!("{root}/members")).await;
    await_empty(&client, &format!("{root}/election")).await;
    client
        .delete(&format!("{root}/assignment"), None)
        .await
        .unwrap();
}
