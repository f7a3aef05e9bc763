//! A contender reports holding (or leading) only while its own node is known to exist: a
//! waiter whose node someone deleted never takes the lock; it enters the queue again, at
//! its end.
//!
//! * A waiter whose node is deleted queues again at once.
//! * A waiter whose node was deleted never takes the lock: while it waits, while it is cut
//!   off, and when the deletion is in its blocker's own transaction (`zkCli deleteall`).
//! * A candidate whose node was deleted never leads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use zk_harness::nemesis::since;
use zk_harness::{
    await_count, await_empty, await_queue, await_watch, bounded, join_election, live_client, name,
    observer, participant_ids, session, session_id, unique_root, Ensemble, Fixture, PATIENCE,
};
use zk_recipes::{
    Candidate, Error, LeaderElection, Mutex, MutexGuard, Role, Session, SessionEvent,
};

/// Session timeout of the contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Session timeout of the sessions of the tests that need a shorter one.
const SHORT_SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// A waiter hears its own node's deletion (it watches its own node): it enters the queue
/// again at once, behind the holder, instead of waiting for the holder to leave first.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_whose_node_is_deleted_queues_again_at_once() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("requeue");
    let holder_session = session(&ensemble.connect_string(), SHORT_SESSION_TIMEOUT).await;
    let observer = live_client(&holder_session);
    let holder = Mutex::new(&holder_session, &root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let waiting = session(&ensemble.connect_string(), SHORT_SESSION_TIMEOUT).await;
    let waiter_id = live_client(&waiting).session_id().to_string();
    let mutex = Mutex::new(&waiting, &root).unwrap();
    let waiter = tokio::spawn(async move {
        let guard = mutex.lock().await.unwrap();
        let node = guard.node().to_owned();
        guard.release().await.unwrap();
        node
    });
    let deleted = format!("{root}/{}", await_count(&observer, &root, 2).await[1]);
    ensemble.await_watcher(&deleted, &waiter_id).await;
    observer.delete(&deleted, None).await.unwrap();

    let queue = await_queue(&observer, &root, "the waiter queued again", |names| {
        names.len() == 2 && format!("{root}/{}", names[1]) != deleted
    })
    .await;
    assert_eq!(format!("{root}/{}", queue[0]), holder.node());
    assert!(!holder.is_lost());
    holder.release().await.unwrap();
    let held = bounded("the waiter acquires", PATIENCE, waiter)
        .await
        .unwrap();
    assert_eq!(held, format!("{root}/{}", queue[1]));
    await_empty(&observer, &root).await;
}

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

/// H holds, W waits behind H, X behind W (three sessions). Someone deletes W's
/// node; X re-lists and watches H; H releases. W never holds together with X: its `lock()`
/// keeps waiting and enters the queue again, behind X, so X takes the lock first and W
/// after X released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_whose_node_was_deleted_never_takes_the_lock() {
    const ROUNDS: usize = 5;
    const HOLD: Duration = Duration::from_millis(50);
    let ensemble = Ensemble::shared(1).await;
    let fx = Fixture::new(ensemble, "deleted-waiter", 3, SESSION_TIMEOUT).await;
    let (root, operator) = (&fx.root, &fx.observer);
    let [h, w, x] = [&fx.sessions[0], &fx.sessions[1], &fx.sessions[2]];
    let x_id = session_id(x);
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let (holder, w_node, w_turn, x_turn) =
            h_w_x(ensemble, operator, root, [h, w, x], HOLD).await;

        operator.delete(&w_node, None).await.unwrap();
        ensemble.await_watcher(holder.node(), &x_id).await;
        holder.release().await.unwrap();

        let x_turn = bounded("X's turn", PATIENCE, x_turn).await.unwrap();
        let w_turn = bounded("W's turn", PATIENCE, w_turn).await.unwrap();
        rounds.push((w_node, w_turn, x_turn));
        await_empty(operator, root).await;
    }
    fx.nothing_left().await;
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

/// Candidates A (leader), B, C on one path, separate sessions. Someone deletes
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
