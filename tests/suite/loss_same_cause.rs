//! One event, one cause: holds on one session that one event ends (a lock guard, a
//! leadership and a semaphore lease) all report the same `Loss`, whoever looks first and
//! however the tasks that watch them are scheduled.
//!
//! * The process is stopped past its session timeout (a child process, SIGSTOP).
//! * The connection goes silent (a frozen proxy) until the session lapses.
//! * The servers expire the session.
//!
//! Each hold's loss is read twice: by a task that awaited it before the event, and once
//! more after every hold settled. All six readings are equal.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::ChildStdout;
use tokio::task::JoinHandle;
use zk_harness::semaphore::await_nothing_left;
use zk_harness::{
    await_empty, bounded, child_test, expire_session, live_client, observer, session, signal,
    tolerant_session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{
    Candidate, LeaderElection, Leadership, Lease, Loss, Mutex, MutexGuard, Semaphore, Session,
};

/// Session timeout of the stopped holder's session.
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// Session timeout of the holders' sessions in this process: long enough that a loaded
/// machine does not lapse a session before the event.
const LONGER_SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Tells the child process what to hold: `<hosts> <root>`.
const CHILD: &str = "ZK_RECIPES_SAME_CAUSE_HOLDER";

/// A lock guard, a leadership and a semaphore lease on one session, each under its own
/// path below one root.
struct Holds {
    guard: Arc<MutexGuard>,
    candidate: Candidate,
    leadership: Leadership,
    lease: Arc<Lease>,
}

impl Holds {
    async fn take(s: &Session, root: &str) -> Holds {
        let guard = Mutex::new(s, &format!("{root}/lock")).unwrap();
        let guard = Arc::new(guard.lock().await.unwrap());
        let election = LeaderElection::new(s, &format!("{root}/election"), "a").unwrap();
        let candidate = election.join().await.unwrap();
        let leadership = bounded("leads", PATIENCE, candidate.leadership())
            .await
            .unwrap();
        let semaphore = Semaphore::new(s, &format!("{root}/semaphore"), 1).unwrap();
        let lease = Arc::new(semaphore.acquire().await.unwrap());
        Holds {
            guard,
            candidate,
            leadership,
            lease,
        }
    }

    /// Tasks that each await one hold's loss, from now on.
    fn watch(&self) -> [JoinHandle<Loss>; 3] {
        let guard = self.guard.clone();
        let leadership = self.leadership.clone();
        let lease = self.lease.clone();
        [
            tokio::spawn(async move { guard.lost().await }),
            tokio::spawn(async move { leadership.lost().await }),
            tokio::spawn(async move { lease.lost().await }),
        ]
    }

    /// Each hold's loss, read now.
    async fn losses(&self) -> [Loss; 3] {
        let read = async {
            [
                self.guard.lost().await,
                self.leadership.lost().await,
                self.lease.lost().await,
            ]
        };
        bounded("every hold is lost", PATIENCE, read).await
    }

    /// Lets everything go (each release may say it was lost).
    async fn release(self) {
        drop(self.leadership);
        let _ = self.candidate.resign().await;
        let _ = Arc::into_inner(self.guard).unwrap().release().await;
        let _ = Arc::into_inner(self.lease).unwrap().release().await;
    }
}

/// What the watching tasks saw, then what every hold says once all settled.
async fn readings(watching: [JoinHandle<Loss>; 3], holds: &Holds) -> Vec<Loss> {
    let mut seen = Vec::new();
    for task in watching {
        seen.push(
            bounded("a watcher hears the loss", PATIENCE, task)
                .await
                .unwrap(),
        );
    }
    seen.extend(holds.losses().await);
    seen
}

fn assert_one_cause(event: &str, seen: &[Loss]) {
    assert!(
        seen.iter().all(|loss| *loss == seen[0]),
        "{event}: guard, leadership, lease (as awaited, then read again): {seen:?}"
    );
}

async fn assert_nothing_left(hosts: &str, root: &str) {
    let admin = observer(hosts).await;
    await_empty(&admin, &format!("{root}/lock")).await;
    await_empty(&admin, &format!("{root}/election")).await;
    await_nothing_left(&admin, &format!("{root}/semaphore")).await;
}

/// The child: takes the holds on the given root, watches them, prints `held`, and once
/// told on its standard input prints the readings, one line.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by holds_of_a_process_stopped_past_its_session_report_one_cause"]
async fn stopped_holder() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    let (hosts, root) = what.split_once(' ').expect("hosts and root");
    let s = session(hosts, SESSION_TIMEOUT).await;
    let holds = Holds::take(&s, root).await;
    let watching = holds.watch();
    println!("held");
    let mut asked = BufReader::new(tokio::io::stdin()).lines();
    let _ = asked.next_line().await;
    let seen = readings(watching, &holds).await;
    println!("seen {seen:?}");
    holds.release().await;
    s.close().await;
}

fn stopped_holder_process(hosts: &str, root: &str) -> tokio::process::Child {
    child_test(
        module_path!(),
        "stopped_holder",
        CHILD,
        &format!("{hosts} {root}"),
    )
}

/// The child's next line that starts with `prefix` (the test runner's own lines skipped).
async fn line(lines: &mut Lines<BufReader<ChildStdout>>, prefix: &str) -> String {
    loop {
        let line = bounded("the holder answers", PATIENCE, lines.next_line())
            .await
            .expect("the holder's output")
            .expect("the holder ended without answering");
        if line.starts_with(prefix) {
            return line;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn holds_of_a_process_stopped_past_its_session_report_one_cause() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("same-cause-stopped");
    let mut child = stopped_holder_process(&hosts, &root);
    let pid = child.id().expect("a pid") as libc::pid_t;
    let mut ask = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    line(&mut lines, "held").await;

    signal(pid, libc::SIGSTOP);
    tokio::time::sleep(2 * SESSION_TIMEOUT).await;
    signal(pid, libc::SIGCONT);
    ask.write_all(b"report\n").await.unwrap();
    let seen = line(&mut lines, "seen").await;
    let seen = &seen["seen ".len()..];
    let first = seen.trim_matches(['[', ']']).split(", ").next().unwrap();
    assert!(
        seen.trim_matches(['[', ']'])
            .split(", ")
            .all(|loss| loss == first),
        "stopped: guard, leadership, lease (as awaited, then read again): {seen}"
    );
    bounded("the holder ends", PATIENCE, child.wait())
        .await
        .unwrap();
    assert_nothing_left(&hosts, &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn holds_on_a_frozen_connection_report_one_cause() {
    let ensemble = Ensemble::shared(1).await;
    // Suspension tolerated or not: the connection's loss comes at once, or close to the
    // clock's.
    for tolerant in [false, true] {
        let proxy = ensemble.proxy(0).await;
        let root = unique_root("same-cause-frozen");
        let s = match tolerant {
            false => session(&proxy.address(), LONGER_SESSION_TIMEOUT).await,
            true => tolerant_session(&proxy.address(), LONGER_SESSION_TIMEOUT).await,
        };
        let holds = Holds::take(&s, &root).await;
        let watching = holds.watch();
        proxy.freeze();
        let seen = readings(watching, &holds).await;
        proxy.restore();
        assert_one_cause(&format!("frozen (tolerant: {tolerant})"), &seen);
        holds.release().await;
        assert_nothing_left(&ensemble.connect_string(), &root).await;
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn holds_of_an_expired_session_report_one_cause() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("same-cause-expired");
    let s = session(&hosts, LONGER_SESSION_TIMEOUT).await;
    let holds = Holds::take(&s, &root).await;
    let watching = holds.watch();
    expire_session(&hosts, live_client(&s).session()).await;
    let seen = readings(watching, &holds).await;
    assert_one_cause("expired", &seen);
    holds.release().await;
    assert_nothing_left(&hosts, &root).await;
    s.close().await;
}
