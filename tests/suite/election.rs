//! What `LeaderElection` alone promises: `run` joins the queue again after each term and
//! resigns when dropped, pauses between terms that end at once, and observers see the
//! participants in queue order.
//!
//! One leader at a time and queue order are in `exclusion.rs` and `fairness.rs`; stepping
//! down on a loss in `loss.rs`; a candidate whose node is deleted in `own_node.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use zk_harness::{
    await_empty, bounded, join_election, live_client, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::LeaderElection;

const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

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
    assert_eq!(
        election.leader().await.unwrap().unwrap().id.as_deref(),
        Some("runner")
    );
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
    let ids: Vec<&str> = participants
        .iter()
        .map(|p| p.id.as_deref().unwrap())
        .collect();
    assert_eq!(ids, ["alpha", "beta", "gamma"]);
    assert!(participants
        .iter()
        .all(|p| p.node.starts_with(&format!("{root}/_c_"))));
    assert_eq!(
        observer.leader().await.unwrap().unwrap().id.as_deref(),
        Some("alpha")
    );
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
