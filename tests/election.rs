//! Leader election against real ZooKeeper servers started by the harness.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zk_harness::{
    await_count, await_empty, await_one_leader, await_queue, bounded, join_election, leaders,
    live_client, name, observer, participant_ids, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{Candidate, Error, LeaderElection, Role};

const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_leader_at_a_time_and_resign_passes_in_queue_order() {
    let ensemble = Ensemble::shared(3).await;
    let root = unique_root("election");
    let hosts = ensemble.connect_string();
    let mut sessions = Vec::new();
    let mut candidates: Vec<Option<Candidate>> = Vec::new();
    for i in 0..5 {
        let session = session(&hosts, SESSION_TIMEOUT).await;
        candidates.push(Some(join_election(&session, &root, format!("c{i}")).await));
        sessions.push(session);
    }
    let candidates = Arc::new(tokio::sync::RwLock::new(candidates));

    // A sampler that checks, as often as it can, that at most one reports Leader.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (candidates, stop) = (candidates.clone(), stop.clone());
        tokio::spawn(async move {
            let mut samples = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let now = leaders(&candidates.read().await);
                assert!(now.len() <= 1, "two leaders at once: {now:?}");
                samples += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            samples
        })
    };

    for expected in 0..5 {
        let leader = {
            let guard = candidates.read().await;
            await_one_leader(&guard, SESSION_TIMEOUT).await.0
        };
        assert_eq!(leader, expected, "leadership out of queue order");
        let observer = LeaderElection::new(&sessions[4], &root, "observer").unwrap();
        let seen = observer.leader().await.unwrap().expect("a leader");
        assert_eq!(seen.id, format!("c{expected}"));
        let term = {
            let guard = candidates.read().await;
            let candidate = guard[leader].as_ref().unwrap();
            candidate.leadership().await.unwrap().term()
        };
        let resigning = candidates.write().await[leader].take().unwrap();
        resigning.resign().await.unwrap();
        if expected < 4 {
            let guard = candidates.read().await;
            let next = await_one_leader(&guard, SESSION_TIMEOUT).await.0;
            let next_term = guard[next]
                .as_ref()
                .unwrap()
                .leadership()
                .await
                .unwrap()
                .term();
            assert!(next_term > term, "terms must grow");
        }
    }
    stop.store(true, Ordering::SeqCst);
    let samples = sampler.await.unwrap();
    assert!(samples > 10, "the sampler barely ran ({samples} samples)");
    await_empty(&live_client(&sessions[0]), &root).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cut_off_leader_steps_down_before_the_next_one_leads() {
    let ensemble = Ensemble::start(1).await;
    let root = unique_root("cutoff");
    let proxy = ensemble.proxy(0).await;
    let cut_session = session(&proxy.address(), SESSION_TIMEOUT).await;
    let other_session = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let cut = join_election(&cut_session, &root, "cut").await;
    let old = cut.leadership().await.unwrap();
    let next = join_election(&other_session, &root, "next").await;
    assert_eq!(next.role(), Role::Follower);

    let mut old_roles = cut.roles();
    let stepped_down = tokio::spawn(async move {
        old_roles.wait_for(|r| *r == Role::Follower).await.unwrap();
        Instant::now()
    });
    proxy.cut();
    let new = bounded("the next candidate leads", PATIENCE, next.leadership())
        .await
        .unwrap();
    let led_at = Instant::now();
    let stepped_down_at = stepped_down.await.unwrap();
    assert!(
        stepped_down_at <= led_at,
        "the old leader stepped down after the new one led"
    );
    assert!(old.is_lost());
    assert!(new.term() > old.term());

    // Back on the network the old candidate has a new session and queues behind.
    proxy.restore();
    let observer = LeaderElection::new(&other_session, &root, "observer").unwrap();
    let queue = await_queue(
        &live_client(&other_session),
        &root,
        "the re-joined candidate",
        |now| now.len() == 2 && now[0] == name(new.node()),
    )
    .await;
    let ids = participant_ids(&observer).await;
    assert_eq!(ids, ["next", "cut"], "queue {queue:?}");
    assert_eq!(cut.role(), Role::Follower);
    cut.resign().await.unwrap();
    next.resign().await.unwrap();
    await_empty(&live_client(&other_session), &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn run_requeues_after_the_work_and_dropping_it_resigns() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("run");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&s, &root, "runner").unwrap();
    let (terms_tx, mut terms) = tokio::sync::mpsc::unbounded_channel();
    let running = {
        let election = election.clone();
        tokio::spawn(async move {
            election
                .run(|leadership| {
                    let terms = terms_tx.clone();
                    async move {
                        terms.send(leadership.term()).unwrap();
                    }
                })
                .await
        })
    };
    let mut seen = Vec::new();
    for _ in 0..3 {
        let term = bounded("a new term", PATIENCE, terms.recv()).await.unwrap();
        seen.push(term);
    }
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "a new term each time: {seen:?}"
    );

    // Dropping the run() future (aborting its task) resigns.
    let blocking = {
        let election = election.clone();
        let (leading_tx, leading) = tokio::sync::oneshot::channel();
        let mut leading_tx = Some(leading_tx);
        running.abort();
        let _ = running.await;
        let task = tokio::spawn(async move {
            election
                .run(move |_| {
                    if let Some(tx) = leading_tx.take() {
                        let _ = tx.send(());
                    }
                    std::future::pending()
                })
                .await
        });
        leading.await.unwrap();
        task
    };
    assert_eq!(election.leader().await.unwrap().unwrap().id, "runner");
    blocking.abort();
    let _ = blocking.await;
    await_empty(&live_client(&s), &root).await;
}

/// A leader whose work fails at once does not hammer the ensemble: `run` pauses between
/// short terms, doubling the pause (from 100 ms) up to its `backoff`.
#[tokio::test(flavor = "multi_thread")]
async fn run_pauses_between_terms_that_end_at_once() {
    const WATCHED: Duration = Duration::from_secs(3);
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("run-backoff");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let election = LeaderElection::new(&s, &root, "failing").unwrap();
    let terms = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = terms.clone();
    let running = election.run(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        async {}
    });
    let ran = tokio::time::timeout(WATCHED, running).await;
    assert!(ran.is_err(), "run() ended: {ran:?}");
    // 100 + 200 + 400 + 800 + 1600 ms of pauses fill the 3 s: at most 6 terms.
    let terms = terms.load(Ordering::SeqCst);
    assert!((2..=6).contains(&terms), "{terms} terms in {WATCHED:?}");
    await_empty(&live_client(&s), &root).await;
}

/// Whoever sees a leadership's loss sees the role step down with it: `roles()` says
/// `Follower` as soon as `lost()` resolved, in every one of 100 rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_role_steps_down_with_the_loss() {
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let s = session(&hosts, SESSION_TIMEOUT).await;
    let observer = observer(&hosts).await;
    for round in 0..100 {
        let root = unique_root("role-with-loss");
        let candidate = join_election(&s, &root, "a").await;
        let roles = candidate.roles();
        let leadership = bounded("a leads", PATIENCE, candidate.leadership())
            .await
            .unwrap();
        // Another behind it, so that after its loss it joins again as a follower (alone,
        // it would lead again at once, and the role would rightly say so).
        let next = join_election(&s, &root, "b").await;
        await_count(&observer, &root, 2).await;
        let candidate = Arc::new(candidate);
        // Whoever sees the published role step down sees role() say so too.
        let watching = tokio::spawn({
            let (candidate, mut roles) = (candidate.clone(), roles.clone());
            async move {
                let _ = roles.wait_for(|role| *role == Role::Follower).await;
                candidate.role()
            }
        });
        observer.delete(leadership.node(), None).await.unwrap();
        bounded("the loss", PATIENCE, leadership.lost()).await;
        assert_eq!(*roles.borrow(), Role::Follower, "round {round}");
        let seen = bounded("the watcher", PATIENCE, watching).await.unwrap();
        assert_eq!(seen, Role::Follower, "round {round}: role() after roles()");
        let candidate = Arc::try_unwrap(candidate).expect("the watcher is done");
        candidate.resign().await.ok();
        next.resign().await.ok();
        await_empty(&observer, &root).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn observers_see_participants_in_queue_order() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("observe");
    let hosts = ensemble.connect_string();
    let watcher = session(&hosts, SESSION_TIMEOUT).await;
    let observer = LeaderElection::new(&watcher, &root, "never-joins").unwrap();
    assert_eq!(observer.leader().await.unwrap(), None);
    assert!(observer.participants().await.unwrap().is_empty());

    let s = session(&hosts, SESSION_TIMEOUT).await;
    let mut candidates = Vec::new();
    for id in ["alpha", "beta", "gamma"] {
        candidates.push(join_election(&s, &root, id).await);
    }
    let participants = observer.participants().await.unwrap();
    let ids: Vec<&str> = participants.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["alpha", "beta", "gamma"]);
    assert!(participants
        .iter()
        .all(|p| p.node.starts_with(&format!("{root}/_c_"))));
    assert_eq!(observer.leader().await.unwrap().unwrap().id, "alpha");
    assert_eq!(
        candidates[0].leadership().await.unwrap().node(),
        participants[0].node
    );
    for candidate in candidates {
        candidate.resign().await.unwrap();
    }
    assert_eq!(observer.leader().await.unwrap(), None);
    await_empty(&live_client(&watcher), &root).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_before_anything_is_created() {
    let ensemble = Ensemble::shared(1).await;
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let root = unique_root("bad");
    match LeaderElection::new(&s, &root, "") {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("empty id: {other:?}"),
    }
    for path in ["", "relative", "/trailing/", "/a//b", "/a/./b"] {
        match LeaderElection::new(&s, path, "id") {
            Err(Error::InvalidPath { path: p, .. }) => assert_eq!(p, path),
            other => panic!("{path:?}: {other:?}"),
        }
    }
    assert_eq!(
        live_client(&s).check_stat(&root).await.unwrap(),
        None,
        "nothing may be created"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_candidate_leaves_the_queue() {
    let ensemble = Ensemble::shared(1).await;
    let root = unique_root("drop");
    let s = session(&ensemble.connect_string(), SESSION_TIMEOUT).await;
    let first = join_election(&s, &root, "first").await;
    let second = join_election(&s, &root, "second").await;
    first.leadership().await.unwrap();
    drop(first);
    let led = bounded("second leads", PATIENCE, second.leadership()).await;
    assert!(led.is_ok());
    drop(second);
    await_empty(&live_client(&s), &root).await;
}

/// A leadership kept after `resign()` (or a guard's share after the release) is lost as
/// soon as the release returns, not once the background monitor happens to stop.
#[tokio::test(flavor = "multi_thread")]
async fn a_resigned_leadership_is_lost_when_resign_returns() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("resigned");
    let s = session(&zk.connect_string(), Duration::from_secs(10)).await;
    for _ in 0..50 {
        let candidate = join_election(&s, &root, "a").await;
        let leadership = candidate.leadership().await.unwrap();
        candidate.resign().await.unwrap();
        assert!(leadership.is_lost(), "is_lost() false right after resign()");
    }
    await_empty(&observer(&zk.connect_string()).await, &root).await;
}
