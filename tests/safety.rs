//! Safety regressions: one test per finding of the safety review, each asserting the
//! behaviour required once the finding is fixed (the contract in the test's doc comment),
//! and two interference tests in which a nemesis deletes and writes contender nodes while
//! contenders loop.
//!
//! Every test works under its own root and ends by checking that nothing is left under it.
//! A wait that the bug turns into a hang is bounded, so that it fails with a message.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zk_harness::nemesis::{since, under_nemesis, Arena, Entrant, Leading, Rule, Tally, Waits};
use zk_harness::{
    await_count, await_empty, await_queue, await_watch, bounded, children, join_election,
    live_client, name, observer, participant_ids, session, tolerant_session, unique_root, Ensemble,
    PATIENCE, WORK,
};
use zk_recipes::{
    Candidate, DistributedLock, Error, LeaderElection, Loss, Mutex, MutexGuard, Role, Session,
    SessionEvent,
};

/// Promptness required where the bug takes seconds or forever: generous on a loaded machine.
const PROMPT: Duration = Duration::from_secs(1);
/// How long a test lets a slow operation run to report what it finally did.
const MEASURE: Duration = Duration::from_secs(10);
/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The ZooKeeper session id of `session`, as `wchp` prints it.
fn session_id(session: &Session) -> String {
    live_client(session).session_id().to_string()
}

/// The first characters of a debug print that may hold megabytes.
fn short(debug: impl std::fmt::Debug) -> String {
    let text = format!("{debug:?}");
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}… ({} bytes)", &text[..cut], text.len()),
        None => text,
    }
}

// ----- 1. a Mutex value shared by tasks -----

/// Finding 1. A `Mutex` value shared by tasks (`Arc<Mutex>`, one session) excludes them, as
/// `tokio::sync::Mutex` does: no two of its sections overlap, and a task cannot take the
/// lock while another task holds it through the same value.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shared_mutex_value_excludes_its_tasks() {
    const TASKS: usize = 8;
    const SECTIONS: usize = 20;
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("shared-value");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = observer(&ensemble.connect_string()).await;
    let mutex = Arc::new(Mutex::new(&s, &root).unwrap());
    let inside = Arc::new(AtomicUsize::new(0));
    let overlapped = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (mutex, inside, overlapped) = (mutex.clone(), inside.clone(), overlapped.clone());
            tokio::spawn(async move {
                for _ in 0..SECTIONS {
                    let guard = mutex.lock().await.expect("lock");
                    let others_at_entry = inside.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(WORK).await;
                    let others_at_exit = inside.fetch_sub(1, Ordering::SeqCst) - 1;
                    if others_at_entry + others_at_exit > 0 {
                        overlapped.fetch_add(1, Ordering::SeqCst);
                    }
                    guard.release().await.expect("release");
                }
            })
        })
        .collect();
    for task in tasks {
        bounded("the tasks' sections", PATIENCE, task)
            .await
            .expect("a task panicked");
    }
    let overlapped = overlapped.load(Ordering::SeqCst);
    assert_eq!(
        overlapped,
        0,
        "{overlapped} of {} sections through one shared Mutex value overlapped another",
        TASKS * SECTIONS
    );

    // While one task holds, another task's bounded wait through the same value times out.
    let guard = mutex.lock().await.unwrap();
    let other = {
        let mutex = mutex.clone();
        tokio::spawn(async move { mutex.try_lock_for(Duration::from_millis(300)).await })
    };
    let tried = bounded("the other task's try_lock_for(300 ms)", PATIENCE, other)
        .await
        .unwrap();
    assert!(
        matches!(tried, Ok(None)),
        "another task took the lock held through the same value: {:?}",
        tried.map(|taken| taken.map(|guard| name(guard.node()).to_owned()))
    );
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}

// ----- 2. a waiter whose node was deleted -----

/// What one contender did with the lock in one round.
#[derive(Debug)]
struct Turn {
    node: String,
    enter: Instant,
    exit: Instant,
    lost_at_entry: bool,
    released: Result<(), Error>,
}

impl Turn {
    fn overlaps(&self, other: &Turn) -> bool {
        self.enter < other.exit && other.enter < self.exit
    }
}

/// Locks `root` on `session`, holds it for `hold`, releases.
fn spawn_turn(session: &Session, root: &str, hold: Duration) -> JoinHandle<Turn> {
    let mutex = Mutex::new(session, root).unwrap();
    tokio::spawn(async move {
        let guard = mutex.lock().await.expect("lock");
        let enter = Instant::now();
        let lost_at_entry = guard.is_lost();
        tokio::time::sleep(hold).await;
        let exit = Instant::now();
        let node = guard.node().to_owned();
        let released = guard.release().await;
        Turn {
            node,
            enter,
            exit,
            lost_at_entry,
            released,
        }
    })
}

/// One round's queue: H (on session `h`) holds, W (on `w`) waits behind H, X (on `x`) behind
/// W, with their watches set (W's on H and on its own node, X's on W). Returns H's guard,
/// W's node and both turns, each holding for `hold`.
async fn h_w_x(
    ensemble: &Ensemble,
    operator: &zookeeper_client::Client,
    root: &str,
    [h, w, x]: [&Session; 3],
    hold: Duration,
) -> (MutexGuard, String, JoinHandle<Turn>, JoinHandle<Turn>) {
    let holder = Mutex::new(h, root).unwrap().lock().await.unwrap();
    let w_turn = spawn_turn(w, root, hold);
    let w_node = format!("{root}/{}", await_count(operator, root, 2).await[1]);
    let x_turn = spawn_turn(x, root, hold);
    await_count(operator, root, 3).await;
    let (w_id, x_id) = (session_id(w), session_id(x));
    ensemble.await_watcher(holder.node(), &w_id).await;
    ensemble.await_watcher(&w_node, &w_id).await;
    ensemble.await_watcher(&w_node, &x_id).await;
    (holder, w_node, w_turn, x_turn)
}

/// In every round (W's deleted node, W's turn, X's turn): W never held with its deleted node,
/// and X held first, alone.
fn assert_x_alone_before_w(rounds: &[(String, Turn, Turn)]) {
    for (round, (w_node, w, x)) in rounds.iter().enumerate() {
        assert_ne!(
            &w.node, w_node,
            "round {round}: W held with its deleted node"
        );
        assert!(
            !w.overlaps(x) && x.enter < w.enter,
            "round {round}: X must take the lock before W, alone: {w:?} {x:?}"
        );
    }
}

/// Finding 2. H holds, W waits behind H, X behind W (three sessions). Someone deletes W's
/// node; X re-lists and watches H; H releases. W never holds together with X: its `lock()`
/// keeps waiting and enters the queue again, behind X, so X takes the lock first and W
/// after X released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_whose_node_was_deleted_never_takes_the_lock() {
    const ROUNDS: usize = 5;
    const HOLD: Duration = Duration::from_millis(50);
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("deleted-waiter");
    let (h, w, x) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let x_id = session_id(&x);
    let operator = observer(&hosts).await;
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let (holder, w_node, w_turn, x_turn) =
            h_w_x(ensemble, &operator, &root, [&h, &w, &x], HOLD).await;

        operator.delete(&w_node, None).await.unwrap();
        ensemble.await_watcher(holder.node(), &x_id).await;
        holder.release().await.unwrap();

        let x_turn = bounded("X's turn", PATIENCE, x_turn).await.unwrap();
        let w_turn = bounded("W's turn", PATIENCE, w_turn).await.unwrap();
        rounds.push((w_node, w_turn, x_turn));
        await_empty(&operator, &root).await;
    }
    let overlapped: Vec<String> = rounds
        .iter()
        .enumerate()
        .filter(|(_, (_, w, x))| w.overlaps(x))
        .map(|(round, (w_node, w, x))| {
            format!(
                "round {round}: W held {} (its deleted node: {}; is_lost() at entry {}) \
                 from {} to {} of X's entry; X held for {:?}",
                name(&w.node),
                w.node == *w_node,
                w.lost_at_entry,
                since(x.enter, w.enter),
                since(x.enter, w.exit),
                x.exit - x.enter
            )
        })
        .collect();
    assert!(
        overlapped.is_empty(),
        "in {} of {ROUNDS} rounds W held the lock together with X:\n{}",
        overlapped.len(),
        overlapped.join("\n")
    );
    for (w_node, w, x) in &rounds {
        assert!(
            x.enter < w.enter,
            "X must take the lock before W: {w:?} {x:?}"
        );
        assert_ne!(&w.node, w_node, "W held with its deleted node: {w:?}");
        assert!(w.released.is_ok() && x.released.is_ok(), "{w:?} {x:?}");
    }
}

/// The hand-off heard, not read, after a reconnection. H holds, W waits behind H through a
/// proxy, X behind W. W's connection is cut; meanwhile someone deletes W's node and H
/// releases, so X takes the lock. Once W is back, its client sets its watches again and the
/// server answers them in no particular order: W may hear that H is gone before it hears
/// that its own node is. W never holds with its deleted node nor together with X: it enters
/// again, behind X. (W's connection trickles as it comes back, so that W acts on each
/// notification before the next arrives.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_cut_off_while_its_node_is_deleted_never_takes_the_lock() {
    const ROUNDS: usize = 12;
    const HOLD: Duration = Duration::from_millis(50);
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("cut-waiter");
    let (h, w, x) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&proxy.address(), SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let operator = observer(&hosts).await;
    let mut w_events = w.events();
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let (holder, w_node, w_turn, x_turn) =
            h_w_x(ensemble, &operator, &root, [&h, &w, &x], HOLD).await;

        proxy.cut();
        await_watch("W's session is suspended", &mut w_events, |e| {
            *e == SessionEvent::Suspended
        })
        .await;
        operator.delete(&w_node, None).await.unwrap();
        holder.release().await.unwrap();
        proxy.trickle();

        let x_turn = bounded("X's turn", PATIENCE, x_turn).await.unwrap();
        let w_turn = bounded("W's turn", PATIENCE, w_turn).await.unwrap();
        proxy.restore();
        rounds.push((w_node, w_turn, x_turn));
        await_empty(&operator, &root).await;
    }
    assert_x_alone_before_w(&rounds);
    for (_, w, x) in &rounds {
        assert!(w.released.is_ok() && x.released.is_ok(), "{w:?} {x:?}");
    }
}

/// The hand-off heard, not read, when one transaction deletes both. H holds, W waits behind
/// H (H was first when W listed), X behind W. Someone deletes H's node and W's node in one
/// transaction, H's first (as `zkCli deleteall` may, in the listing's order). W's connection
/// trickles, so that W acts on "H deleted" before it receives "W deleted": hearing nothing
/// about its own node proves nothing here; only H's left-first signal, which comes from a
/// release that deletes no one else's node, would. W never holds with its deleted node nor
/// together with X: it enters again, behind X.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_deleted_in_its_blockers_transaction_never_takes_the_lock() {
    const ROUNDS: usize = 5;
    const HOLD: Duration = Duration::from_millis(50);
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let proxy = ensemble.proxy(0).await;
    let root = unique_root("one-transaction");
    let (h, w, x) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&proxy.address(), SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let operator = observer(&hosts).await;
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let (holder, w_node, w_turn, x_turn) =
            h_w_x(ensemble, &operator, &root, [&h, &w, &x], HOLD).await;

        proxy.trickle();
        let mut both = operator.new_multi_writer();
        both.add_delete(holder.node(), None).unwrap();
        both.add_delete(&w_node, None).unwrap();
        both.commit().await.unwrap();

        let x_turn = bounded("X's turn", PATIENCE, x_turn).await.unwrap();
        let w_turn = bounded("W's turn", PATIENCE, w_turn).await.unwrap();
        proxy.restore();
        drop(holder);
        rounds.push((w_node, w_turn, x_turn));
        await_empty(&operator, &root).await;
    }
    assert_x_alone_before_w(&rounds);
}

// ----- 3. the same in an election -----

/// A role a candidate reported: who, the role, when, and who else reported `Leader` then.
type Report = (&'static str, Role, Instant, Vec<&'static str>);

/// Records every role `who` reports until its campaign ends; with each `Leader`, the other
/// `candidates` that report `Leader` at that moment. (A leader steps down before its node
/// goes, so a correct successor never sees its predecessor still leading.)
fn record_roles(
    who: &'static str,
    candidates: &[(&'static str, &Candidate)],
    log: &Arc<std::sync::Mutex<Vec<Report>>>,
) -> JoinHandle<()> {
    let mut roles = candidates
        .iter()
        .find(|(id, _)| *id == who)
        .expect("who is a candidate")
        .1
        .roles();
    let others: Vec<_> = candidates
        .iter()
        .filter(|(id, _)| *id != who)
        .map(|(id, candidate)| (*id, candidate.roles()))
        .collect();
    let log = log.clone();
    tokio::spawn(async move {
        loop {
            let role = *roles.borrow_and_update();
            let leading = others
                .iter()
                .filter(|(_, roles)| role == Role::Leader && *roles.borrow() == Role::Leader)
                .map(|(id, _)| *id)
                .collect();
            log.lock()
                .unwrap()
                .push((who, role, Instant::now(), leading));
            if roles.changed().await.is_err() {
                return;
            }
        }
    })
}

/// Finding 3. Candidates A (leader), B, C on one path, separate sessions. Someone deletes
/// B's node; C re-lists and watches A; A resigns. C leads; B never reports `Leader` nor
/// returns a `Leadership` (no two leaders at any time); B joins again behind C.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_candidate_whose_node_was_deleted_never_leads() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("deleted-candidate");
    let (sa, sb, sc) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let operator = observer(&hosts).await;
    let a = join_election(&sa, &root, "A").await;
    let a_node = bounded("A leads", PATIENCE, a.leadership())
        .await
        .unwrap()
        .node()
        .to_owned();
    let b = Arc::new(join_election(&sb, &root, "B").await);
    await_count(&operator, &root, 2).await;
    let c = join_election(&sc, &root, "C").await;
    let queue = await_count(&operator, &root, 3).await;
    let b_node = format!("{root}/{}", queue[1]);
    let log = Arc::default();
    let candidates = [("A", &a), ("B", &*b), ("C", &c)];
    let recorders = ["A", "B", "C"].map(|who| record_roles(who, &candidates, &log));
    let b_leadership = {
        let b = b.clone();
        tokio::spawn(async move { b.leadership().await.map(|led| (led.term(), Instant::now())) })
    };
    ensemble.await_watcher(&a_node, &session_id(&sb)).await;
    ensemble.await_watcher(&b_node, &session_id(&sc)).await;

    operator.delete(&b_node, None).await.unwrap();
    ensemble.await_watcher(&a_node, &session_id(&sc)).await;
    a.resign().await.unwrap();
    let resigned = Instant::now();
    let c_led = bounded("C leads", PATIENCE, c.leadership()).await.unwrap();
    // B has had its chance to misbehave once it is back in the queue, behind C.
    await_queue(&operator, &root, "B's new node behind C", |now| {
        now.len() == 2 && now[0] == name(c_led.node()) && now[1] != name(&b_node)
    })
    .await;
    let observer = LeaderElection::new(&sa, &root, "observer").unwrap();
    let ids = participant_ids(&observer).await;
    assert_eq!(ids, ["C", "B"], "B must join again behind C");

    let log = log.lock().unwrap().clone();
    let show = |reports: &[&Report]| {
        let shown: Vec<_> = reports
            .iter()
            .map(|(who, role, at, others)| {
                format!(
                    "{who} {role:?} at {} (also Leader: {others:?})",
                    since(resigned, *at)
                )
            })
            .collect();
        shown.join("; ")
    };
    let b_led: Vec<_> = log
        .iter()
        .filter(|(who, role, ..)| *who == "B" && *role == Role::Leader)
        .collect();
    assert!(
        b_led.is_empty(),
        "B reported Leader with its node deleted (times from A's resign() returning): {}",
        show(&log.iter().collect::<Vec<_>>())
    );
    let clashes: Vec<_> = log
        .iter()
        .filter(|(.., others)| !others.is_empty())
        .collect();
    assert!(
        clashes.is_empty(),
        "two candidates reported Leader at once: {}",
        show(&clashes)
    );

    b_leadership.abort();
    if let Ok(Ok((term, at))) = b_leadership.await {
        panic!(
            "B returned a Leadership (term {term}) with its node deleted, at {} from A's \
             resign() returning",
            since(resigned, at)
        );
    }
    c.resign().await.unwrap();
    Arc::try_unwrap(b).unwrap().resign().await.unwrap();
    for recorder in recorders {
        bounded("role recorders end", PATIENCE, recorder)
            .await
            .unwrap();
    }
    await_empty(&operator, &root).await;
}

// ----- 4. a data write to the holder's node -----

/// Finding 4. H holds, W waits. Someone writes `__REVOKE__` into H's node, as Curator's
/// Revoker does. W does not take the lock while H holds; H's lock is not lost (a write is
/// not a loss); `H.release()` returns `Ok(())` and deletes H's node; then W acquires, and
/// after W released a third contender gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_data_write_to_the_holder_neither_lets_the_next_in_nor_leaks_the_node() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("revoke");
    let (h, w, t) = (
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
        session(&hosts, SESSION_TIMEOUT).await,
    );
    let revoker = observer(&hosts).await;
    let holder = Mutex::new(&h, &root).unwrap().lock().await.unwrap();
    let mut waiter = {
        let mutex = Mutex::new(&w, &root).unwrap();
        tokio::spawn(async move { mutex.lock().await })
    };
    await_count(&revoker, &root, 2).await;
    ensemble.await_watcher(holder.node(), &session_id(&w)).await;

    let (_, _, written) = revoker.get_and_watch_data(holder.node()).await.unwrap();
    revoker
        .set_data(holder.node(), b"__REVOKE__", None)
        .await
        .unwrap();
    written.changed().await;
    // The waiter and the holder's loss watch have heard of the write by now: W gets a
    // bounded chance to take over, then H's loss is looked at.
    let w_took_over = tokio::time::timeout(PROMPT, &mut waiter).await.is_ok();
    let h_loss = tokio::time::timeout(Duration::ZERO, holder.lost())
        .await
        .ok();
    assert!(
        !w_took_over && h_loss.is_none() && !holder.is_lost(),
        "after a data write to H's node: W's lock() returned while H holds: {w_took_over}; \
         H's lost(): {h_loss:?}, is_lost(): {}",
        holder.is_lost()
    );

    let h_node = holder.node().to_owned();
    let released = holder.release().await;
    assert!(
        released.is_ok(),
        "H's release after a data write: {released:?}"
    );
    let left = children(&revoker, &root).await;
    assert!(
        !left.iter().any(|n| n == name(&h_node)),
        "H's node outlived its release: {left:?}"
    );
    let w_guard = bounded("W acquires once H released", PATIENCE, waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(!w_guard.is_lost());
    w_guard.release().await.unwrap();
    let third = Mutex::new(&t, &root).unwrap();
    let taken = third.try_lock_for(Duration::from_secs(3)).await.unwrap();
    let Some(third_guard) = taken else {
        panic!(
            "a third contender could not take the free lock within 3 s; the root holds {:?}",
            children(&revoker, &root).await
        );
    };
    third_guard.release().await.unwrap();
    await_empty(&revoker, &root).await;
}

// ----- 5. oversized input -----

/// Finding 5. A 2 MB participant id and a 1.1 MB path are refused at once with
/// `InvalidArgument` / `InvalidPath`; nothing is sent, and the session is untouched: a
/// guard held on it is not lost and it publishes no event (no `Suspended`).
#[tokio::test(flavor = "multi_thread")]
async fn oversized_input_is_refused_at_once_and_leaves_the_session_alone() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let held_root = unique_root("oversized-held");
    let root = unique_root("oversized");
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let observer = observer(&hosts).await;
    let guard = Mutex::new(&s, &held_root).unwrap().lock().await.unwrap();
    let events = s.events();

    let refused = bounded("refusing a 2 MB participant id", PROMPT, async {
        match LeaderElection::new(&s, &root, "x".repeat(2_000_000)) {
            Err(err) => err,
            Ok(election) => match election.join().await {
                Err(err) => err,
                Ok(candidate) => panic!("a 2 MB id joined, as {:?}", candidate.role()),
            },
        }
    })
    .await;
    assert!(
        matches!(refused, Error::InvalidArgument(_)),
        "2 MB id: {}",
        short(&refused)
    );
    let long_path = format!("/{}", "a".repeat(1_100_000));
    match Mutex::new(&s, &long_path) {
        Err(Error::InvalidPath { .. }) => {}
        other => panic!("1.1 MB path: {}", short(other.map(|m| m.path().len()))),
    }
    assert!(
        !events.has_changed().unwrap(),
        "the session published {:?}",
        *events.borrow()
    );
    assert!(!guard.is_lost(), "the guard on the same session was lost");
    assert_eq!(
        observer.check_stat(&root).await.unwrap(),
        None,
        "nothing may be created for refused input"
    );
    guard.release().await.unwrap();
    await_empty(&observer, &held_root).await;
    await_empty(&observer, &root).await;
}

// ----- 6. try_lock_for(Duration::MAX) -----

/// Runs `work` in a task; fails the test, with the panic's message, if it panics.
async fn no_panic<T: Send + 'static>(
    what: &str,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    match bounded(what, PATIENCE, tokio::spawn(work)).await {
        Ok(done) => done,
        Err(err) if err.is_panic() => {
            let panic = err.into_panic();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            panic!("{what} panicked: {message}")
        }
        Err(err) => panic!("{what}: {err}"),
    }
}

/// Finding 6. `try_lock_for(Duration::MAX)` does not panic: on a free lock it returns the
/// guard, through `Mutex` and through `Arc<dyn DistributedLock>`.
#[tokio::test(flavor = "multi_thread")]
async fn try_lock_for_the_longest_duration_takes_a_free_lock() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("duration-max");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let observer = observer(&ensemble.connect_string()).await;

    let mutex = Mutex::new(&s, &root).unwrap();
    let taken = no_panic("Mutex::try_lock_for(Duration::MAX)", async move {
        mutex.try_lock_for(Duration::MAX).await
    })
    .await;
    let guard: MutexGuard = taken.unwrap().expect("a free lock is taken");
    guard.release().await.unwrap();

    let dynamic: Arc<dyn DistributedLock> = Arc::new(Mutex::new(&s, &root).unwrap());
    let taken = no_panic("DistributedLock::try_lock_for(Duration::MAX)", async move {
        dynamic.try_lock_for(Duration::MAX).await
    })
    .await;
    let guard = taken.unwrap().expect("a free lock is taken");
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
}

// ----- 7. Session::close() -----

/// Finding 7. `Session::close()` stops what runs on the session, within a second: a
/// waiting `lock()` returns `Err(Closed)`, a held guard is lost with `Loss::Closed`, a
/// leader steps down and its leadership is lost with `Loss::Closed`; the ZooKeeper session
/// is closed, so its nodes go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_the_session_stops_what_runs_on_it() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let lock_root = unique_root("close-lock");
    let election_root = unique_root("close-election");
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let observer = observer(&hosts).await;
    let guard = Mutex::new(&s, &lock_root).unwrap().lock().await.unwrap();
    let waiter = {
        let mutex = Mutex::new(&s, &lock_root).unwrap();
        tokio::spawn(async move { mutex.lock().await })
    };
    await_count(&observer, &lock_root, 2).await;
    let candidate = join_election(&s, &election_root, "leader").await;
    let leadership = bounded("the candidate leads", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    let mut roles = candidate.roles();

    s.close();
    let deadline = tokio::time::Instant::now() + PROMPT;
    match tokio::time::timeout_at(deadline, waiter).await {
        Ok(Ok(Err(Error::Closed))) => {}
        Ok(Ok(Ok(acquired))) => panic!(
            "the waiting lock() acquired after close(), is_lost() == {}",
            acquired.is_lost()
        ),
        Ok(other) => panic!("the waiting lock() after close(): {other:?}"),
        Err(_) => panic!("the waiting lock() did not return within {PROMPT:?} of close()"),
    }
    let loss = tokio::time::timeout_at(deadline, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("guard.lost() did not resolve within {PROMPT:?} of close()"));
    assert_eq!(loss, Loss::Closed);
    assert!(guard.is_lost());
    tokio::time::timeout_at(deadline, roles.wait_for(|role| *role == Role::Follower))
        .await
        .unwrap_or_else(|_| panic!("the leader still leads {PROMPT:?} after close()"))
        .unwrap();
    let loss = tokio::time::timeout_at(deadline, leadership.lost())
        .await
        .unwrap_or_else(|_| panic!("leadership.lost() did not resolve within {PROMPT:?}"));
    assert_eq!(loss, Loss::Closed);

    bounded("the closed session's nodes go", 2 * PROMPT, async {
        await_empty(&observer, &lock_root).await;
        await_empty(&observer, &election_root).await;
    })
    .await;
}

// ----- 8. no server reachable -----

/// Finding 8. With no server reachable, `try_lock()` and `participants()` fail with
/// `Disconnected` (nothing was sent) within a second; a tolerant session's `release()` while cut off for
/// good waits, at most until the session would have expired, and returns `Ok` with the
/// node gone with its session (never `ConnectionLoss`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_waits_while_no_server_is_reachable() {
    let ensemble = Ensemble::start(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root("unreachable");
    let s = session(&hosts, Duration::from_secs(4)).await;
    let mutex = Mutex::new(&s, &root).unwrap();
    let election = LeaderElection::new(&s, &root, "observer").unwrap();
    let mut events = s.events();
    ensemble.stop(0);
    await_watch("the session is suspended", &mut events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;

    let started = Instant::now();
    let tried = tokio::time::timeout(MEASURE, mutex.try_lock()).await;
    let took = started.elapsed();
    assert!(
        matches!(tried, Ok(Err(Error::Disconnected))) && took <= PROMPT,
        "try_lock() with no server: {:?} after {took:?}; \
         required Err(Disconnected) within {PROMPT:?}",
        tried.map(|tried| tried.map(|taken| taken.map(|guard| guard.node().to_owned())))
    );
    let started = Instant::now();
    let listed = tokio::time::timeout(MEASURE, election.participants()).await;
    let took = started.elapsed();
    assert!(
        matches!(listed, Ok(Err(Error::Disconnected))) && took <= PROMPT,
        "participants() with no server: {listed:?} after {took:?}; \
         required Err(Disconnected) within {PROMPT:?}"
    );

    // A session that tolerates suspension, cut off for less than its timeout.
    ensemble.restart(0).await;
    let observer = observer(&hosts).await;
    let proxy = ensemble.proxy(0).await;
    const TOLERANT_TIMEOUT: Duration = Duration::from_secs(6);
    let tolerant = tolerant_session(&proxy.address(), TOLERANT_TIMEOUT).await;
    let mut events = tolerant.events();
    let guard = Mutex::new(&tolerant, &root).unwrap().lock().await.unwrap();
    proxy.cut();
    await_watch("the tolerant session is suspended", &mut events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;
    let started = Instant::now();
    let within = TOLERANT_TIMEOUT * 3 / 2 + PROMPT;
    let released = tokio::time::timeout(within, guard.release()).await;
    let took = started.elapsed();
    assert!(
        matches!(released, Ok(Ok(()))),
        "release() while cut off: {released:?} after {took:?}; required Ok within {within:?}"
    );
    await_empty(&observer, &root).await;
    proxy.restore();
}

// ----- found in the review of the fixes -----

/// How long acquisitions started on a cut connection get to take the session's entry
/// turns (16) before the test goes on: nothing outside the session shows that they did.
const SETTLE: Duration = Duration::from_millis(300);

/// A session whose connection is cut (it is suspended), with `n` `lock()`s started on it
/// after the cut, each in its task, given [`SETTLE`] to take their entry turns.
struct CutWithWaiters {
    ensemble: Ensemble,
    proxy: zk_harness::Proxy,
    root: String,
    session: Session,
    mutex: Mutex,
    waiters: Vec<JoinHandle<zk_recipes::Result<String>>>,
}

async fn cut_with_waiters(name_: &str, n: usize) -> CutWithWaiters {
    let ensemble = Ensemble::start(1).await;
    let proxy = ensemble.proxy(0).await;
    let root = unique_root(name_);
    let session = session(&proxy.address(), Duration::from_secs(8)).await;
    let mutex = Mutex::new(&session, &root).unwrap();
    let mut events = session.events();
    proxy.cut();
    await_watch("the session is suspended", &mut events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;
    let waiters = (0..n)
        .map(|_| {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.lock().await.map(|guard| guard.node().to_owned()) })
        })
        .collect();
    tokio::time::sleep(SETTLE).await;
    CutWithWaiters {
        ensemble,
        proxy,
        root,
        session,
        mutex,
        waiters,
    }
}

/// Sixteen `lock()`s started while the connection is down take every entry turn of the
/// session, and their creates wait in the client for the connection. `try_lock()` must
/// still answer at once with `Disconnected`, not wait for a turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn try_lock_never_waits_behind_entries_while_disconnected() {
    let cut = cut_with_waiters("behind-entries", 16).await;
    let started = Instant::now();
    let tried = tokio::time::timeout(MEASURE, cut.mutex.try_lock()).await;
    let took = started.elapsed();
    assert!(
        matches!(tried, Ok(Err(Error::Disconnected))) && took <= PROMPT,
        "try_lock() behind 16 entries on a cut connection: {:?} after {took:?}; \
         required Err(Disconnected) within {PROMPT:?}",
        tried.map(|tried| tried.map(|taken| taken.map(|guard| guard.node().to_owned())))
    );
    cut.session.close();
    cut.proxy.restore();
    for waiter in cut.waiters {
        let _ = bounded("a waiter ends after close()", PATIENCE, waiter).await;
    }
    await_empty(&observer(&cut.ensemble.connect_string()).await, &cut.root).await;
}

/// `lock()`s entering on a cut connection when the session is closed fail with
/// `Error::Closed` within a second, and never return a guard once the connection is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn close_fails_acquisitions_entering_on_a_cut_connection() {
    let cut = cut_with_waiters("close-entering", 4).await;
    cut.session.close();
    let closed = Instant::now();
    let mut outcomes = Vec::new();
    for waiter in cut.waiters {
        let left = PROMPT.saturating_sub(closed.elapsed());
        outcomes.push(match tokio::time::timeout(left, waiter).await {
            Ok(joined) => format!("{:?}", joined.expect("waiter task")),
            Err(_) => "still waiting".to_owned(),
        });
    }
    cut.proxy.restore();
    assert!(
        outcomes.iter().all(|o| o == "Err(Closed)"),
        "lock()s entering when the session was closed, {PROMPT:?} later: {outcomes:?}"
    );
    await_empty(&observer(&cut.ensemble.connect_string()).await, &cut.root).await;
}

/// `close()` ends at once a waiter whose hand-off request is in flight on a connection
/// that answers nothing (its proxy holds back what it sends): the waiting `lock()` fails
/// with `Closed` within a second, and the node goes with the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn close_ends_a_waiter_whose_request_is_in_flight() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("close-in-flight");
    let observer = observer(&ensemble.connect_string()).await;
    let holding = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let proxy = ensemble.proxy(0).await;
    let waiting = session(&proxy.address(), Duration::from_secs(4)).await;
    let guard = Mutex::new(&holding, &root).unwrap().lock().await.unwrap();
    let waiter = tokio::spawn({
        let mutex = Mutex::new(&waiting, &root).unwrap();
        async move { mutex.lock().await.map(|guard| guard.node().to_owned()) }
    });
    await_count(&observer, &root, 2).await;
    ensemble
        .await_watcher(guard.node(), &session_id(&waiting))
        .await;
    // The waiter hears the holder's node deleted by someone (no left-first signal), and
    // asks the servers: its request never reaches them.
    proxy.mute();
    observer.delete(guard.node(), None).await.unwrap();
    drop(guard); // its node is gone already
                 // Nothing outside the client shows that it sent its request: give it the time.
    tokio::time::sleep(SETTLE).await;
    let closed_at = Instant::now();
    waiting.close();
    let ended = bounded("the waiter ends", PROMPT, waiter).await.unwrap();
    assert!(matches!(ended, Err(Error::Closed)), "lock(): {ended:?}");
    assert!(closed_at.elapsed() <= PROMPT);
    proxy.restore();
    await_empty(&observer, &root).await;
}

// ----- interference: a nemesis deletes and writes contender nodes -----

/// Locks, works, releases, `rounds` times or until `stop`; a `lock()` that fails is retried.
fn lock_loop(entrant: Entrant<'_>) -> JoinHandle<Tally> {
    let mutex = Mutex::new(entrant.session, entrant.root).unwrap();
    entrant.run(move || {
        let mutex = mutex.clone();
        async move { mutex.lock().await }
    })
}

/// Joins, leads a moment, resigns, `rounds` times or until `stop`; failures are retried.
fn election_loop(entrant: Entrant<'_>) -> JoinHandle<Tally> {
    let election = LeaderElection::new(entrant.session, entrant.root, entrant.who.clone()).unwrap();
    entrant.run(move || {
        let election = election.clone();
        async move {
            let candidate = election.join().await?;
            let leadership = candidate.leadership().await?;
            Ok(Leading(candidate, leadership))
        }
    })
}

/// The nemesis attacks the root: every contender but the first waits.
const QUEUE: &[Arena] = &[Arena {
    child: "",
    waits: Waits::BehindAny,
}];

/// Interference: 8 contenders on 4 sessions, 25 sections each, while the nemesis deletes
/// waiters' nodes and writes into any contender node: no two trusted sections overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutex_keeps_exclusion_under_a_nemesis() {
    under_nemesis("nemesis-lock", lock_loop, 2, 25, QUEUE, Rule::Exclusive).await;
}

/// Interference: 4 candidates on 4 sessions, 15 short leaderships each, under the same
/// nemesis: no two trusted leaderships overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn election_keeps_one_leader_under_a_nemesis() {
    under_nemesis(
        "nemesis-election",
        election_loop,
        1,
        15,
        QUEUE,
        Rule::Exclusive,
    )
    .await;
}
