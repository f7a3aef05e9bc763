//! The two sides as processes: members of zk-recipes' `Partitioner` (this bench binary run
//! again as a member) and of kazoo's `SetPartitioner` (`kazoo_member.py`), both printing
//! `<ms> working <partition>` and `<ms> stopped <partition>` on the clock every process
//! shares; and what the bench reads of them: who works what, and when that was balanced.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use zk_harness::{now_ms, signal};
use zk_recipes::{PartitionHold, Partitioner, Session};

/// Tells the bench binary to be one of our members: `<hosts> <root> <id>`.
pub const MEMBER: &str = "ZK_RECIPES_PARTITION_BENCH_MEMBER";

/// The members' session timeout, both sides.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// How long kazoo's party must be at rest before it allocates (its `time_boundary`; its
/// default is 30 s).
pub const TIME_BOUNDARY: Duration = Duration::from_millis(500);

/// The partitions: `p00` … `p99`.
pub const PARTITIONS: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Ours,
    Kazoo,
}

impl Kind {
    /// Where the side's members make their group nodes.
    pub fn group(self, root: &str) -> String {
        match self {
            Kind::Ours => format!("{root}/members"),
            Kind::Kazoo => format!("{root}/party"),
        }
    }
}

/// A line a member printed.
#[derive(Clone, Debug)]
pub struct Line {
    pub id: String,
    pub ms: u64,
    pub working: bool,
    pub partition: String,
}

/// One side's members, and every line they printed.
pub struct Side {
    pub kind: Kind,
    hosts: String,
    pub root: String,
    pub log: watch::Receiver<Vec<Line>>,
    log_tx: watch::Sender<Vec<Line>>,
    members: BTreeMap<String, Child>,
    /// Members told to end, waited for at the end.
    ended: Vec<Child>,
}

impl Side {
    pub fn new(kind: Kind, hosts: &str, root: &str) -> Side {
        let (log_tx, log) = watch::channel(Vec::new());
        Side {
            kind,
            hosts: hosts.to_owned(),
            root: root.to_owned(),
            log,
            log_tx,
            members: BTreeMap::new(),
            ended: Vec::new(),
        }
    }

    /// Starts member `id`.
    pub fn start(&mut self, id: &str) {
        let mut command = match self.kind {
            Kind::Ours => {
                let mut command = Command::new(std::env::current_exe().expect("the bench"));
                command.env(MEMBER, format!("{} {} {id}", self.hosts, self.root));
                command
            }
            Kind::Kazoo => {
                let python =
                    std::env::var("KAZOO_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
                let script =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/partition/kazoo_member.py");
                let mut command = Command::new(python);
                command.arg(script).args([
                    &self.hosts,
                    &self.root,
                    id,
                    &PARTITIONS.to_string(),
                    &SESSION_TIMEOUT.as_secs_f64().to_string(),
                    &TIME_BOUNDARY.as_secs_f64().to_string(),
                ]);
                command
            }
        };
        let mut child = command
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?} member {id}: {e}", self.kind));
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let (log, id_owned) = (self.log_tx.clone(), id.to_owned());
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(line) = parse(&id_owned, &line) {
                    log.send_modify(|log| log.push(line));
                }
            }
        });
        self.members.insert(id.to_owned(), child);
    }

    /// Ends member `id` with `sig` (SIGTERM: it leaves; SIGKILL): it no longer counts among
    /// the members; it is waited for at the end.
    pub fn end(&mut self, id: &str, sig: libc::c_int) {
        let child = self.members.remove(id).expect("a member");
        signal(pid(&child), sig);
        self.ended.push(child);
    }

    /// The ids of the members running.
    pub fn ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// Waits until the members running work every partition, each ⌊P/N⌋ or ⌈P/N⌉, at most
    /// `within`; when that was (the line that made it so), `None` if it was not.
    pub async fn await_balanced(&mut self, within: Duration) -> Option<u64> {
        let ids = self.ids();
        let balanced = |log: &Vec<Line>| balanced_at(log, &ids);
        let waited = tokio::time::timeout(within, self.log.wait_for(|log| balanced(log).is_some()));
        let log = waited.await.ok()?.ok()?;
        balanced(&log)
    }

    /// How many partitions were stopped at or after `since` (ms).
    pub fn stopped_since(&self, since: u64) -> usize {
        (self.log.borrow().iter())
            .filter(|line| !line.working && line.ms >= since)
            .count()
    }

    /// When the members running began to work every partition, balanced, if they do now.
    pub fn balanced_since(&self) -> Option<u64> {
        balanced_at(&self.log.borrow(), &self.ids())
    }

    /// Ends every member (SIGTERM) and waits for each to exit.
    pub async fn stop_all(&mut self) {
        for id in self.ids() {
            self.end(&id, libc::SIGTERM);
        }
        for mut child in self.ended.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
        }
    }
}

fn pid(child: &Child) -> libc::pid_t {
    libc::pid_t::try_from(child.id().expect("running")).expect("a pid")
}

fn parse(id: &str, line: &str) -> Option<Line> {
    let mut words = line.split(' ');
    let ms = words.next()?.parse().ok()?;
    let working = match words.next()? {
        "working" => true,
        "stopped" => false,
        _ => return None,
    };
    Some(Line {
        id: id.to_owned(),
        ms,
        working,
        partition: words.next()?.to_owned(),
    })
}

/// When the log first shows `ids` working every partition, balanced, with nobody else: the
/// time of the line that made it so, if it does now.
fn balanced_at(log: &[Line], ids: &[String]) -> Option<u64> {
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    let (floor, ceil) = (PARTITIONS / ids.len(), PARTITIONS.div_ceil(ids.len()));
    let mut at = None;
    for line in log {
        let partition = line.partition.as_str();
        if line.working {
            owner.insert(partition, &line.id);
        } else if owner.get(partition) == Some(&line.id.as_str()) {
            owner.remove(partition);
        }
        let counts_ok = ids.iter().all(|id| {
            let n = owner.values().filter(|o| **o == id.as_str()).count();
            n == floor || n == ceil
        });
        let ok = owner.len() == PARTITIONS && counts_ok;
        at = match (ok, at) {
            (true, None) => Some(line.ms),
            (true, at) => at,
            (false, _) => None,
        };
    }
    at
}

/// The bench run as one of our members (see [`MEMBER`]).
pub async fn member(what: &str) {
    let [hosts, root, id] = what.split(' ').collect::<Vec<_>>()[..] else {
        panic!("{MEMBER}={what}: <hosts> <root> <id>");
    };
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    let session = Session::builder()
        .session_timeout(SESSION_TIMEOUT)
        .connect(hosts)
        .await
        .expect("a session");
    let names = (0..PARTITIONS).map(|p| format!("p{p:02}"));
    let partitioner = Partitioner::new(&session, root, names)
        .unwrap()
        .id(id)
        .unwrap();
    let worker = partitioner.join().await.expect("join");
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            hold = worker.next_partition() => drop(tokio::spawn(work(hold.expect("a partition")))),
        }
    }
    worker.leave().await.expect("leave");
    session.close().await;
}

/// Works the partition until its hold is lost or moved, then lets go.
async fn work(hold: PartitionHold) {
    let name = hold.name().to_owned();
    println!("{} working {name}", now_ms());
    tokio::select! {
        _ = hold.lost() => {}
        () = hold.moved() => {}
    }
    println!("{} stopped {name}", now_ms());
    let _ = hold.release().await;
}
