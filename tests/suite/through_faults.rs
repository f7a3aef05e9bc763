//! Through server faults, on real 3-server ensembles, the recipes keep their promises:
//!
//! * **Exclusion and progress** when the leader server is killed: no two trusted holders,
//!   and every contender keeps acquiring.
//! * **Loss is told before the next holder enters** when a holder's server is paused, and
//!   when a holder is cut off until its session expires; the session renews, and the old
//!   holder's late release harms nobody.
//! * **Nothing is left behind** when the connection is cut right after a create.
//! * **Bounded waits return in time** while the quorum is lost, and everything recovers.
//! * **One leader at a time** in an election under the same faults.
//! * **`lock()` rides out connection faults and expiry**: a connection that dies with the
//!   create in flight, an expiry while it waits, an expiry before its create is sent.
//!
//! Every critical section (and every leadership) is recorded in a [`History`] with instants
//! of one process clock; the checker asserts that trusted sections never overlap, that a
//! holder overlapped by a later one had been told of its loss before the later one
//! entered, and that fencing tokens (terms) grow in order of entry.
//!
//! Each scenario runs on its own ensemble. The scenarios run one at a time (see
//! [`own_ensemble`]): three JVMs per scenario are all a 2-core machine can carry reliably,
//! which is why these promises share one test binary instead of joining the files named by
//! them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_harness::history::{critical_section, History, Section};
use zk_harness::{
    await_children, await_count, await_empty, await_events, await_one_leader, await_watch, bounded,
    join_election, leaders, name, observe, observer, record_events, session, unique_root,
    unless_stopped, Ensemble, PATIENCE, WORK,
};
use zk_recipes::{Candidate, Error, Leadership, Mutex, MutexGuard, Role, Session, SessionEvent};
use zookeeper_client::SessionState;

/// Slack allowed past a caller's own bound on a noisy 2-core machine.
const SLACK: Duration = Duration::from_secs(2);

/// A scenario's own 3-server ensemble, started once the scenario before it is done: the
/// scenarios run one after another, whatever `--test-threads` says. Dropping it kills its
/// servers, then lets the next scenario start.
struct OwnEnsemble {
    ensemble: Ensemble,
    /// When the scenario's turn came, before its servers started.
    started: Instant,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl std::ops::Deref for OwnEnsemble {
    type Target = Ensemble;

    fn deref(&self) -> &Ensemble {
        &self.ensemble
    }
}

/// Waits for this scenario's turn, then starts its own ensemble.
async fn own_ensemble() -> OwnEnsemble {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let turn = TURN.lock().await;
    let started = Instant::now();
    OwnEnsemble {
        ensemble: Ensemble::start(3).await,
        started,
        _turn: turn,
    }
}

/// A server that does not lead the ensemble (when asked).
async fn a_follower(ensemble: &Ensemble) -> usize {
    let leader = ensemble.leader().await.expect("a leader server");
    (leader + 1) % 3
}

/// What one contender saw.
#[derive(Debug, Default)]
struct Tally {
    sections: usize,
    untrusted: usize,
    lock_errors: Vec<String>,
    release_errors: Vec<String>,
}

/// Waits until `session` has a connected client (after an error from a recipe).
async fn usable(session: &Session) {
    let wait = async {
        loop {
            let mut events = session.events();
            if let Some(client) = session.client() {
                if client.state() == SessionState::SyncConnected {
                    return;
                }
            }
            if events.changed().await.is_err() {
                return;
            }
        }
    };
    bounded("session usable again", PATIENCE, wait).await;
}

/// Locks, works, releases, until `stop`; a waiting `lock()` is cancelled by `stop`.
fn spawn_contender(
    who: String,
    session: Session,
    root: &str,
    history: History,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<Tally> {
    let mutex = Mutex::new(&session, root).unwrap();
    tokio::spawn(async move {
        let mut tally = Tally::default();
        loop {
            let Some(acquired) = unless_stopped(&mut stop, mutex.lock()).await else {
                break;
            };
            let guard = match acquired {
                Ok(guard) => guard,
                Err(err) => {
                    tally.lock_errors.push(err.to_string());
                    usable(&session).await;
                    continue;
                }
            };
            let section = critical_section(&history, &who, &guard, Some(WORK)).await;
            tally.sections += 1;
            match guard.release().await {
                Ok(()) => assert!(
                    section.trusted,
                    "{who}: release of a lock lost at exit succeeded: {section:?}"
                ),
                Err(Error::Lost { .. }) => tally.untrusted += 1,
                Err(err) => tally.release_errors.push(err.to_string()),
            }
            if *stop.borrow() {
                break;
            }
        }
        tally
    })
}

/// Stops the contenders and collects what they saw.
async fn stop_contenders(stop: &watch::Sender<bool>, tasks: Vec<JoinHandle<Tally>>) -> Vec<Tally> {
    stop.send_replace(true);
    let mut tallies = Vec::new();
    for task in tasks {
        let tally = bounded("contender stops", PATIENCE, task)
            .await
            .expect("contender panicked");
        tallies.push(tally);
    }
    tallies
}

/// `per_session` looping contenders (see [`spawn_contender`]) on each of `sessions` new
/// sessions on `hosts`, named `s<session>c<contender>`; returns the sessions and the tasks.
async fn spawn_contenders(
    hosts: &str,
    timeout: Duration,
    sessions: usize,
    per_session: usize,
    root: &str,
    history: &History,
    stop: &watch::Receiver<bool>,
) -> (Vec<Session>, Vec<JoinHandle<Tally>>) {
    let mut opened = Vec::new();
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let session = session(hosts, timeout).await;
        for c in 0..per_session {
            tasks.push(spawn_contender(
                format!("s{s}c{c}"),
                session.clone(),
                root,
                history.clone(),
                stop.clone(),
            ));
        }
        opened.push(session);
    }
    (opened, tasks)
}

/// Holds `guard` in a critical section recorded as `who` until the lock is lost; the task
/// returns the guard and the section.
fn spawn_holder(
    who: &'static str,
    guard: MutexGuard,
    history: &History,
) -> JoinHandle<(MutexGuard, Section)> {
    let history = history.clone();
    tokio::spawn(async move {
        let section = critical_section(&history, who, &guard, None).await;
        (guard, section)
    })
}

fn summary(tallies: &[Tally]) -> (usize, usize, Vec<String>, Vec<String>) {
    let sections = tallies.iter().map(|t| t.sections).sum();
    let untrusted = tallies.iter().map(|t| t.untrusted).sum();
    let lock_errors = tallies.iter().flat_map(|t| t.lock_errors.clone()).collect();
    let release_errors = tallies
        .iter()
        .flat_map(|t| t.release_errors.clone())
        .collect();
    (sections, untrusted, lock_errors, release_errors)
}

// ----- exclusion and progress: the leader server is killed -----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_leader_server_keeps_exclusion_and_progress() {
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("kill-leader");
    let history = History::new();
    let (stop, stopped) = watch::channel(false);
    let timeout = Duration::from_secs(4);
    let (_sessions, tasks) =
        spawn_contenders(&hosts, timeout, 4, 2, &root, &history, &stopped).await;
    history.await_entries(20, PATIENCE).await;

    let leader = ensemble.leader().await.expect("a leader server");
    let killed_at = Instant::now();
    ensemble.kill(leader);
    let new_leader = ensemble.wait_for_leader(PATIENCE).await;
    let elected_at = Instant::now();
    assert_ne!(new_leader, leader);
    let before = history.entries();
    history.await_entries(before + 10, PATIENCE).await;
    let progress_after = elected_at.elapsed();
    ensemble.restart(leader).await;
    let restarted = history.entries();
    history.await_entries(restarted + 10, PATIENCE).await;

    let tallies = stop_contenders(&stop, tasks).await;
    let all = history.check(false);
    let after_fault = all.iter().filter(|s| s.enter > elected_at).count();
    assert!(
        after_fault >= 20,
        "{after_fault} acquisitions after the fault"
    );
    let (sections, untrusted, lock_errors, release_errors) = summary(&tallies);
    assert_eq!(sections, all.len());
    assert!(
        lock_errors.is_empty(),
        "lock() failed under a killed server: {lock_errors:?}"
    );
    let observer = observer(&hosts).await;
    await_empty(&observer, &root).await;
    eprintln!(
        "kill-leader: {sections} sections ({after_fault} after the new leader, first progress \
         {progress_after:?} after election; election took {:?}), {untrusted} lost at exit, \
         release errors {release_errors:?}; {:?} in all",
        elected_at - killed_at,
        ensemble.started.elapsed()
    );
}

// ----- loss is told: the server of a holder is paused -----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paused_server_holder_is_told_before_the_next_enters() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let ensemble = own_ensemble().await;
    let paused = a_follower(&ensemble).await;
    let others = (0..3)
        .filter(|&i| i != paused)
        .map(|i| ensemble.address(i))
        .collect::<Vec<_>>()
        .join(",");
    let root = unique_root("pause");
    let observer = observer(&others).await;
    let history = History::new();

    // The holder talks to the server that will be paused, and only to it.
    let holder_session = session(&ensemble.address(paused), TIMEOUT).await;
    let mut holder_events = record_events(&holder_session);
    let holder_mutex = Mutex::new(&holder_session, &root).unwrap();
    let holder = spawn_holder("holder", holder_mutex.lock().await.unwrap(), &history);
    // Its section is entered in its task: counted before the contenders come.
    history.await_entries(1, PATIENCE).await;

    let (stop, stopped) = watch::channel(false);
    let (_sessions, tasks) =
        spawn_contenders(&others, TIMEOUT, 2, 2, &root, &history, &stopped).await;
    await_count(&observer, &root, 5).await;
    assert_eq!(history.entries(), 1, "a contender entered past the holder");

    let paused_at = Instant::now();
    ensemble.pause(paused);
    history.await_entries(2, PATIENCE).await;
    let handed_over = paused_at.elapsed();
    // Keep the server paused for longer than the session timeout in any case.
    let long_enough = TIMEOUT + Duration::from_millis(500);
    if handed_over < long_enough {
        tokio::time::sleep(long_enough - handed_over).await;
    }
    ensemble.resume(paused);

    let (guard, held) = bounded("holder told", PATIENCE, holder).await.unwrap();
    assert!(!held.trusted, "the holder still trusted its lock: {held:?}");
    let told = held.told.expect("holder told");
    // The holder's session is renewed by itself once its server is back.
    await_events(
        &mut holder_events,
        &[SessionEvent::Expired, SessionEvent::Connected],
        PATIENCE,
    )
    .await;
    match guard.release().await {
        Err(Error::Lost { .. }) => {}
        other => panic!("late release after expiry: {other:?}"),
    }
    let resumed = history.entries();
    history.await_entries(resumed + 10, PATIENCE).await;
    let tallies = stop_contenders(&stop, tasks).await;
    let all = history.check(false);
    let next = all
        .iter()
        .find(|s| s.who != "holder")
        .expect("another contender entered");
    assert!(
        told <= next.enter,
        "the holder learned of its loss {:?} after {} entered",
        told - next.enter,
        next.who
    );
    let (sections, untrusted, lock_errors, release_errors) = summary(&tallies);
    assert!(lock_errors.is_empty(), "lock() failed: {lock_errors:?}");
    assert!(
        release_errors.is_empty(),
        "release failed: {release_errors:?}"
    );
    await_empty(&observer, &root).await;
    eprintln!(
        "pause: holder told {:?} after the pause, next holder entered {handed_over:?} after it; \
         {} sections ({sections} by the others, {untrusted} lost at exit); {:?} in all",
        told - paused_at,
        all.len(),
        ensemble.started.elapsed()
    );
}

// ----- loss is told: a holder is cut off until its session expires -----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cut_off_holder_is_told_renews_and_its_late_release_harms_nobody() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("cut");
    let observer = observer(&hosts).await;
    let history = History::new();
    let proxy = ensemble.proxy(0).await;

    let cut_session = session(&proxy.address(), TIMEOUT).await;
    let old_session_id = cut_session.client().unwrap().session_id();
    let mut cut_events = record_events(&cut_session);
    let cut_mutex = Mutex::new(&cut_session, &root).unwrap();
    let holder = spawn_holder("cut", cut_mutex.lock().await.unwrap(), &history);
    history.await_entries(1, PATIENCE).await;

    let other_session = session(&hosts, TIMEOUT).await;
    let other = {
        let mutex = Mutex::new(&other_session, &root).unwrap();
        let history = history.clone();
        tokio::spawn(async move {
            let guard = mutex.lock().await.expect("the other contender locks");
            let enter = Instant::now();
            history.entered();
            (mutex, guard, enter)
        })
    };
    await_count(&observer, &root, 2).await;

    let cut_at = Instant::now();
    proxy.cut();
    let (other_mutex, other_guard, other_enter) =
        bounded("the other contender acquires", PATIENCE, other)
            .await
            .unwrap();
    let handed_over = cut_at.elapsed();
    // The client itself declares the session expired while still cut off.
    await_events(&mut cut_events, &[SessionEvent::Expired], PATIENCE).await;
    proxy.restore();
    let (guard, held) = bounded("cut holder told", PATIENCE, holder).await.unwrap();
    let told = held.told.expect("the cut holder was told");
    assert!(!held.trusted);
    assert!(
        told <= other_enter,
        "the cut holder learned of its loss {:?} after the other entered",
        told - other_enter
    );
    assert!(other_guard.fencing_token() > guard.fencing_token());

    // A new session, made by itself.
    await_events(
        &mut cut_events,
        &[SessionEvent::Expired, SessionEvent::Connected],
        PATIENCE,
    )
    .await;
    let new_session_id = cut_session.client().expect("a live session").session_id();
    assert_ne!(new_session_id, old_session_id);

    // The late release fails and deletes nothing of the other holder's.
    match bounded("late release", PATIENCE, guard.release()).await {
        Err(Error::Lost { node }) => assert_eq!(node, held.node),
        other => panic!("late release after expiry: {other:?}"),
    }
    let other_node = other_guard.node().to_owned();
    assert!(
        observe(&observer, || observer.check_stat(&other_node))
            .await
            .unwrap()
            .is_some(),
        "the other holder's node was deleted"
    );
    await_children(&observer, &root, &[name(&other_node)]).await;
    assert!(!other_guard.is_lost(), "the other holder lost its lock");

    // The cut-off client can lock again (behind the other holder).
    let again = tokio::spawn(async move {
        let guard = cut_mutex.lock().await.expect("lock again after renewal");
        (cut_mutex, guard)
    });
    await_count(&observer, &root, 2).await;
    let section = Section {
        who: "other".into(),
        token: other_guard.fencing_token(),
        node: other_node.clone(),
        enter: other_enter,
        exit: Instant::now(),
        trusted: !other_guard.is_lost(),
        told: None,
    };
    history.record(section);
    other_guard.release().await.unwrap();
    let (_cut_mutex, guard) = bounded("lock again", PATIENCE, again).await.unwrap();
    let section = critical_section(&history, "cut-again", &guard, Some(WORK)).await;
    assert!(section.trusted);
    guard.release().await.unwrap();
    drop(other_mutex);
    history.check(false);
    await_empty(&observer, &root).await;
    eprintln!(
        "cut: told {:?} after the cut, other entered {handed_over:?} after it; {:?} in all",
        told - cut_at,
        ensemble.started.elapsed()
    );
}

// ----- nothing left behind: the connection is cut right after a create -----

/// Cuts the proxy, waits until the client noticed, restores, waits until reconnected.
async fn blip(proxy: &zk_harness::Proxy, events: &mut watch::Receiver<SessionEvent>) {
    events.borrow_and_update();
    proxy.cut();
    await_watch("client notices the cut", events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;
    proxy.restore();
    await_watch("client reconnects", events, |e| {
        matches!(e, SessionEvent::Reconnected | SessionEvent::Connected)
    })
    .await;
}

/// Cuts the proxy until the client declares its session expired, restores it, and waits
/// until the client has a new session.
async fn expire_through(proxy: &zk_harness::Proxy, events: &mut watch::Receiver<SessionEvent>) {
    events.borrow_and_update();
    proxy.cut();
    await_watch("client declares expiry", events, |e| {
        *e == SessionEvent::Expired
    })
    .await;
    proxy.restore();
    await_watch("a new session", events, |e| *e == SessionEvent::Connected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cut_during_a_create_leaves_no_node_behind() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("cut-create");
    let observer = observer(&hosts).await;
    let holder_session = session(&hosts, TIMEOUT).await;
    let holder = Mutex::new(&holder_session, &root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let holder_name = name(holder.node()).to_owned();
    let proxy = ensemble.proxy(1).await;
    let cut_session = session(&proxy.address(), TIMEOUT).await;
    let mut events = cut_session.events();
    let delays_us = [0u64, 100, 300, 600, 1000, 2000, 4000, 8000];
    let mut outcomes = Vec::new();

    // A waiting lock(): the session survives the cut; the attempt is then cancelled.
    for &delay in &delays_us {
        let mutex = Mutex::new(&cut_session, &root).unwrap();
        let attempt = tokio::spawn(async move { mutex.lock().await.map(|g| g.node().to_owned()) });
        tokio::time::sleep(Duration::from_micros(delay)).await;
        blip(&proxy, &mut events).await;
        // The attempt recovers its node (or never made one) and waits behind the holder.
        attempt.abort();
        match attempt.await {
            Err(err) if err.is_cancelled() => outcomes.push(format!("lock@{delay}us: cancelled")),
            Ok(Ok(node)) => panic!("lock() acquired a held lock: {node}"),
            Ok(Err(err)) => outcomes.push(format!("lock@{delay}us: {err}")),
            Err(err) => panic!("lock() panicked: {err}"),
        }
        await_children(&observer, &root, &[&holder_name]).await;
    }

    // try_lock(): never holds, whatever the cut did to its create.
    for &delay in &delays_us {
        let mutex = Mutex::new(&cut_session, &root).unwrap();
        let attempt = tokio::spawn(async move {
            mutex
                .try_lock()
                .await
                .map(|g| g.map(|g| g.node().to_owned()))
        });
        tokio::time::sleep(Duration::from_micros(delay)).await;
        blip(&proxy, &mut events).await;
        match bounded("try_lock returns", PATIENCE, attempt)
            .await
            .unwrap()
        {
            Ok(None) => outcomes.push(format!("try_lock@{delay}us: None")),
            Ok(Some(node)) => panic!("try_lock() acquired a held lock: {node}"),
            Err(err) => outcomes.push(format!("try_lock@{delay}us: {err}")),
        }
        await_children(&observer, &root, &[&holder_name]).await;
    }

    // A lock() whose session expires during the cut: nothing of it outlives the cut.
    for &delay in &[0u64, 1000] {
        let mutex = Mutex::new(&cut_session, &root).unwrap();
        let attempt = tokio::spawn(async move { mutex.lock().await.map(|g| g.node().to_owned()) });
        tokio::time::sleep(Duration::from_micros(delay)).await;
        expire_through(&proxy, &mut events).await;
        attempt.abort();
        match attempt.await {
            Err(err) if err.is_cancelled() => {
                outcomes.push(format!("lock+expiry@{delay}us: cancelled"))
            }
            Ok(Ok(node)) => panic!("lock() acquired a held lock: {node}"),
            Ok(Err(err)) => outcomes.push(format!("lock+expiry@{delay}us: {err}")),
            Err(err) => panic!("lock() panicked: {err}"),
        }
        await_children(&observer, &root, &[&holder_name]).await;
    }

    assert!(!holder.is_lost());
    holder.release().await.unwrap();
    await_empty(&observer, &root).await;
    eprintln!(
        "cut-create: {outcomes:?}; {:?} in all",
        ensemble.started.elapsed()
    );
}

// ----- bounded waits: the quorum is lost -----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_quorum_bounded_waits_return_in_time_and_all_recovers() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    const BOUND: Duration = Duration::from_millis(1500);
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let lock_root = unique_root("quorum-lock");
    let election_root = unique_root("quorum-election");
    let session = session(&hosts, TIMEOUT).await;
    let mut events = session.events();
    let mutex = Mutex::new(&session, &lock_root).unwrap();
    let leader = join_election(&session, &election_root, "a").await;
    bounded("the candidate leads", PATIENCE, leader.leadership())
        .await
        .unwrap();
    let follower = join_election(&session, &election_root, "b").await;
    // Prove the lock works before the fault.
    mutex.lock().await.unwrap().release().await.unwrap();

    let serving = ensemble.leader().await.expect("a leader server");
    let stopped: Vec<usize> = (0..3).filter(|&i| i != serving).collect();
    events.borrow_and_update();
    for &i in &stopped {
        ensemble.stop(i);
    }
    await_watch("the session is suspended", &mut events, |e| {
        *e != SessionEvent::Connected && *e != SessionEvent::Reconnected
    })
    .await;
    let mut roles = leader.roles();
    await_watch("the leader steps down", &mut roles, |r| {
        *r == Role::Follower
    })
    .await;

    let mut report = Vec::new();
    let at = Instant::now();
    let locked = tokio::time::timeout(BOUND, mutex.lock()).await;
    let took = at.elapsed();
    assert!(took < BOUND + SLACK, "timeout(lock()) took {took:?}");
    match locked {
        Err(_) => report.push(format!("timeout(lock): elapsed after {took:?}")),
        Ok(Err(err)) => report.push(format!("timeout(lock): {err} after {took:?}")),
        Ok(Ok(guard)) => panic!("locked without a quorum: {}", guard.node()),
    }

    let at = Instant::now();
    let tried = mutex.try_lock_for(BOUND).await;
    let took = at.elapsed();
    assert!(took < BOUND + SLACK, "try_lock_for took {took:?}");
    match tried {
        Ok(None) => report.push(format!("try_lock_for: None after {took:?}")),
        Err(err) => report.push(format!("try_lock_for: {err} after {took:?}")),
        Ok(Some(guard)) => panic!("locked without a quorum: {}", guard.node()),
    }

    for (who, candidate) in [("leader", &leader), ("follower", &follower)] {
        let at = Instant::now();
        let led = tokio::time::timeout(BOUND, candidate.leadership()).await;
        let took = at.elapsed();
        assert!(took < BOUND + SLACK, "timeout(leadership()) took {took:?}");
        match led {
            Err(_) => report.push(format!(
                "timeout(leadership) of the {who}: elapsed after {took:?}"
            )),
            Ok(Err(err)) => report.push(format!("leadership of the {who}: {err} after {took:?}")),
            Ok(Ok(leadership)) => panic!(
                "the {who} leads without a quorum (term {})",
                leadership.term()
            ),
        }
    }

    for &i in &stopped {
        ensemble.restart(i).await;
    }
    let back_at = Instant::now();
    let guard = bounded("lock after the quorum is back", PATIENCE, mutex.lock())
        .await
        .unwrap();
    let relocked = back_at.elapsed();
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    let leadership = bounded("a leader after the quorum is back", PATIENCE, async {
        tokio::select! {
            led = leader.leadership() => led,
            led = follower.leadership() => led,
        }
    })
    .await
    .unwrap();
    assert!(!leadership.is_lost());
    let releaded = back_at.elapsed();
    leader.resign().await.ok();
    follower.resign().await.ok();
    let observer = observer(&hosts).await;
    await_empty(&observer, &lock_root).await;
    await_empty(&observer, &election_root).await;
    eprintln!(
        "quorum: {report:?}; locked {relocked:?} and led {releaded:?} after the quorum was back; \
         {:?} in all",
        ensemble.started.elapsed()
    );
}

// ----- one leader: an election under the same faults -----

/// Records each leadership of `candidate` (start when `leadership()` resolves, end when
/// `lost()` does) until `stop`.
fn follow_terms(
    who: &'static str,
    candidate: Arc<Candidate>,
    history: History,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let Some(led) = unless_stopped(&mut stop, candidate.leadership()).await else {
                return;
            };
            let leadership: Leadership =
                led.unwrap_or_else(|err| panic!("{who}: campaign ended: {err}"));
            let start = Instant::now();
            history.entered();
            let told = unless_stopped(&mut stop, leadership.lost()).await.is_some();
            let end = Instant::now();
            history.record(Section {
                who: who.to_owned(),
                token: leadership.term(),
                node: leadership.node().to_owned(),
                enter: start,
                exit: end,
                trusted: true,
                told: told.then_some(end),
            });
            if !told {
                return;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn election_keeps_one_leader_through_faults() {
    const TIMEOUT: Duration = Duration::from_secs(3);
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("election-faults");
    let observer = observer(&hosts).await;
    let server_leader = ensemble.leader().await.expect("a leader server");
    // The first leader reaches a follower server through the proxy, so that killing the
    // leader server later does not strand it.
    let proxy = ensemble.proxy((server_leader + 1) % 3).await;
    let sessions = [
        session(&proxy.address(), TIMEOUT).await,
        session(&hosts, TIMEOUT).await,
        session(&hosts, TIMEOUT).await,
    ];
    let mut cut_events = record_events(&sessions[0]);
    let ids = ["c0", "c1", "c2"];
    let mut candidates = Vec::new();
    for (session, id) in sessions.iter().zip(ids) {
        candidates.push(Arc::new(join_election(session, &root, id).await));
    }
    bounded("c0 leads", PATIENCE, candidates[0].leadership())
        .await
        .unwrap();
    let history = History::new();
    let (stop, stopped) = watch::channel(false);
    let monitors: Vec<_> = candidates
        .iter()
        .zip(ids)
        .map(|(c, id)| follow_terms(id, c.clone(), history.clone(), stopped.clone()))
        .collect();
    // c0's term is seen before the faults end it: a spawned monitor may not have run yet,
    // and one that first looks after c0 stepped down never sees that term. c0 leads, so
    // the first term entered is c0's.
    history.await_entries(1, PATIENCE).await;

    // Fault 1: the leading candidate is cut off until its session expires.
    let mut cut_roles = candidates[0].roles();
    let cut_at = Instant::now();
    proxy.cut();
    await_watch("the cut-off leader steps down", &mut cut_roles, |r| {
        *r == Role::Follower
    })
    .await;
    let stepped_down = cut_at.elapsed();
    let (next, led_at) = await_one_leader(&candidates, PATIENCE).await;
    let cut_gap = led_at - cut_at;
    assert_ne!(next, 0, "the cut-off candidate still reports Leader");
    assert!(
        cut_gap <= 2 * TIMEOUT,
        "no new leader within 2 session timeouts of the cut ({cut_gap:?})"
    );
    await_events(&mut cut_events, &[SessionEvent::Expired], PATIENCE).await;
    proxy.restore();
    await_events(
        &mut cut_events,
        &[SessionEvent::Expired, SessionEvent::Connected],
        PATIENCE,
    )
    .await;
    // c0 joins again on its new session, behind the others.
    await_count(&observer, &root, 3).await;
    assert_eq!(candidates[0].role(), Role::Follower);

    // Fault 2: the leader server is killed.
    let mut leader_roles = candidates[next].roles();
    ensemble.kill(server_leader);
    await_watch(
        "the leader candidate steps down when its server goes",
        &mut leader_roles,
        |r| *r == Role::Follower,
    )
    .await;
    ensemble.wait_for_leader(PATIENCE).await;
    let elected_at = Instant::now();
    let (again, led_again_at) = await_one_leader(&candidates, 2 * TIMEOUT + SLACK).await;
    let kill_gap = led_again_at - elected_at;
    assert!(
        kill_gap <= 2 * TIMEOUT,
        "no leader within 2 session timeouts of the new leader server ({kill_gap:?})"
    );
    ensemble.restart(server_leader).await;
    assert_eq!(leaders(&candidates), [again]);

    stop.send_replace(true);
    for monitor in monitors {
        bounded("term monitor stops", PATIENCE, monitor)
            .await
            .expect("term monitor panicked");
    }
    let terms = history.check(true);
    assert!(terms.len() >= 3, "terms: {terms:?}");
    for candidate in candidates {
        let candidate = Arc::try_unwrap(candidate).expect("monitors are done");
        match candidate.resign().await {
            Ok(()) | Err(Error::Lost { .. }) => {}
            Err(err) => panic!("resign: {err}"),
        }
    }
    await_empty(&observer, &root).await;
    eprintln!(
        "election: cut leader stepped down after {stepped_down:?}, new leader {cut_gap:?} after the cut, {kill_gap:?} after the new leader server; \
         terms {:?}; {:?} in all",
        terms
            .iter()
            .map(|t| (t.who.as_str(), t.token))
            .collect::<Vec<_>>(),
        ensemble.started.elapsed()
    );
}

// ----- lock() rides out connection faults and expiry (its documented contract) -----

/// A `lock()` in a task of its own, which returns the mutex with the guard.
type Attempt = JoinHandle<zk_recipes::Result<(Mutex, MutexGuard)>>;

fn spawn_lock(mutex: Mutex) -> Attempt {
    tokio::spawn(async move { mutex.lock().await.map(|guard| (mutex, guard)) })
}

/// Awaits an attempt that must acquire and returns its mutex and guard; fails the test,
/// naming `what`, if it panicked, returned an error, or took longer than [`PATIENCE`].
async fn acquires(what: &str, attempt: Attempt) -> (Mutex, MutexGuard) {
    bounded(what, PATIENCE, attempt)
        .await
        .expect("lock() panicked")
        .unwrap_or_else(|err| panic!("{what}: {err:?}"))
}

/// The create is in flight on a connection that dies without an answer (its server is
/// paused until the client gives up on the connection); the session survives, and lock()
/// acquires once the server is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_rides_out_a_connection_that_dies_with_the_create_in_flight() {
    const TIMEOUT: Duration = Duration::from_secs(4);
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("ride-out-in-flight");
    let observer = observer(&hosts).await;
    let paused = a_follower(&ensemble).await;

    let paused_session = session(&ensemble.address(paused), TIMEOUT).await;
    let mut events = paused_session.events();
    events.borrow_and_update();
    let mutex = Mutex::new(&paused_session, &root).unwrap();
    mutex.lock().await.unwrap().release().await.unwrap();
    ensemble.pause(paused);
    let attempt = spawn_lock(mutex);
    await_watch(
        "the client gives up on the paused server",
        &mut events,
        |e| *e == SessionEvent::Suspended,
    )
    .await;
    ensemble.resume(paused);
    let what = "lock() whose create was in flight on a connection that died, once it is back";
    let (_mutex, guard) = acquires(what, attempt).await;
    let node = guard.node().to_owned();
    guard.release().await.ok();
    await_empty(&observer, &root).await;
    eprintln!(
        "ride-out, create in flight: acquired {node}; {:?} in all",
        ensemble.started.elapsed()
    );
}

/// A lock() waiting behind a holder when its session expires enters the queue again
/// on the new session and acquires once the holder releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_rides_out_an_expiry_while_it_waits() {
    const TIMEOUT: Duration = Duration::from_secs(4);
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("ride-out-waiting");
    let observer = observer(&hosts).await;
    let follower = a_follower(&ensemble).await;

    let holder_session = session(&hosts, TIMEOUT).await;
    let holder = Mutex::new(&holder_session, &root)
        .unwrap()
        .lock()
        .await
        .unwrap();
    let proxy = ensemble.proxy(follower).await;
    let cut_session = session(&proxy.address(), TIMEOUT).await;
    let mut events = cut_session.events();
    let mutex = Mutex::new(&cut_session, &root).unwrap();
    let waiter = spawn_lock(mutex);
    await_count(&observer, &root, 2).await;
    expire_through(&proxy, &mut events).await;
    if waiter.is_finished() {
        match waiter.await.unwrap() {
            Ok((_, guard)) => panic!("lock() acquired a held lock: {}", guard.node()),
            Err(err) => panic!("lock() gave up when its session expired while it waited: {err:?}"),
        }
    }
    // Its node on the new session, behind the holder.
    await_count(&observer, &root, 2).await;
    holder.release().await.unwrap();
    let (_mutex, guard) = acquires("lock() after expiry, once the holder released", waiter).await;
    let node = guard.node().to_owned();
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
    eprintln!(
        "ride-out, waiting at expiry: acquired {node}; {:?} in all",
        ensemble.started.elapsed()
    );
}

/// A lock() called while cut off, whose session expires before the connection is back
/// (so before its create could be sent), waits for the new session and acquires.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lock_rides_out_an_expiry_before_its_create_is_sent() {
    const TIMEOUT: Duration = Duration::from_secs(4);
    let ensemble = own_ensemble().await;
    let hosts = ensemble.connect_string();
    let root = unique_root("ride-out-cut-off");
    let observer = observer(&hosts).await;
    let follower = a_follower(&ensemble).await;

    let proxy = ensemble.proxy(follower).await;
    let cut_session = session(&proxy.address(), TIMEOUT).await;
    let mutex = Mutex::new(&cut_session, &root).unwrap();
    let mut events = cut_session.events();
    events.borrow_and_update();
    proxy.cut();
    await_watch("client notices the cut", &mut events, |e| {
        *e == SessionEvent::Suspended
    })
    .await;
    let attempt = spawn_lock(mutex);
    await_watch("client declares expiry", &mut events, |e| {
        *e == SessionEvent::Expired
    })
    .await;
    proxy.restore();
    let what = "lock() called while cut off, after its session expired";
    let (_mutex, guard) = acquires(what, attempt).await;
    let node = guard.node().to_owned();
    guard.release().await.unwrap();
    await_empty(&observer, &root).await;
    eprintln!(
        "ride-out, called while cut off: acquired {node}; {:?} in all",
        ensemble.started.elapsed()
    );
}
