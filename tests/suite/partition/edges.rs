//! The edges of the partitioner: a member with another set of partitions is refused (also
//! when two join at once), nothing of it left; bad input refused at once, nothing created; a
//! member whose id was taken, or whose session was closed, lets go of everything and says why;
//! a member's own data is shown, the record taken off.

use std::sync::Arc;

use zk_harness::{await_empty, bounded, PATIENCE};
use zk_recipes::{Error, Partitioner};
use zookeeper_client::{Acls, Client, CreateMode};

use super::{fixture, names, nothing_left, Log, Member, Why};

#[tokio::test(flavor = "multi_thread")]
async fn a_member_with_other_partitions_is_refused_and_leaves_nothing() {
    let fx = fixture("partition-conflict", 3).await;
    let partitions = names(4);
    let log = Log::new(&fx);
    let a = Member::join(&fx.sessions[0], &fx.root, &partitions, "a", &log).await;
    a.await_settled(&["a"]).await;

    for other in [
        names(5),
        names(3),
        vec!["p00".into(), "p01".into(), "p02".into(), "q03".into()],
    ] {
        let refused = Partitioner::new(&fx.sessions[1], &fx.root, other.clone())
            .unwrap()
            .id("b")
            .unwrap()
            .join()
            .await;
        match refused {
            Err(Error::PartitionsConflict {
                member,
                ours,
                theirs,
                ..
            }) => {
                assert_eq!(member, "a");
                assert_ne!(ours, theirs);
            }
            other => panic!("{other:?}"),
        }
    }
    let members = fx
        .observer
        .list_children(&format!("{}/members", fx.root))
        .await
        .unwrap();
    assert_eq!(members, ["a"]);

    // Two that join at once with different partitions: one of them is refused.
    for round in 0..5 {
        let (x, y) = (format!("x{round}"), format!("y{round}"));
        let joins = [
            (&x, &fx.sessions[1], names(6)),
            (&y, &fx.sessions[2], names(7)),
        ]
        .map(|(id, session, names)| {
            let partitioner = Partitioner::new(session, &format!("{}/race", fx.root), names)
                .unwrap()
                .id(id)
                .unwrap();
            tokio::spawn(async move { partitioner.join().await })
        });
        let mut joined = Vec::new();
        for join in joins {
            match join.await.unwrap() {
                Ok(worker) => joined.push(worker),
                Err(Error::PartitionsConflict { .. }) => {}
                Err(err) => panic!("{err:?}"),
            }
        }
        assert_eq!(joined.len(), 1, "round {round}");
        let worker = joined.pop().unwrap();
        let race = format!("{}/race/members", fx.root);
        assert_eq!(
            fx.observer.list_children(&race).await.unwrap(),
            [worker.id()]
        );
        bounded("leave", PATIENCE, worker.leave()).await.unwrap();
        for name in names(7) {
            let lock = format!("{}/race/partitions/{name}", fx.root);
            await_empty(&fx.observer, &lock).await;
            let _ = fx.observer.delete(&lock, None).await;
        }
    }
    for path in ["race/members", "race/partitions", "race"] {
        match fx
            .observer
            .delete(&format!("{}/{path}", fx.root), None)
            .await
        {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(err) => panic!("{path}: {err}"),
        }
    }
    a.leave().await;
    nothing_left(fx, &partitions).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_at_once_and_creates_nothing() {
    let fx = fixture("partition-bad-input", 1).await;
    let session = &fx.sessions[0];
    let refused = |made: Result<Partitioner, Error>| {
        assert!(matches!(made, Err(Error::InvalidArgument(_))), "{made:?}");
    };
    refused(Partitioner::new(session, &fx.root, Vec::<String>::new()));
    refused(Partitioner::new(session, &fx.root, ["a", "b", "a"]));
    refused(Partitioner::new(session, &fx.root, ["a/b"]));
    refused(Partitioner::new(session, &fx.root, [""]));
    refused(Partitioner::new(session, &fx.root, [".."]));
    let made = Partitioner::new(session, "no/slash", ["a"]);
    assert!(matches!(made, Err(Error::InvalidPath { .. })), "{made:?}");
    let good = Partitioner::new(session, &fx.root, ["a"]).unwrap();
    refused(good.clone().id(""));
    refused(good.clone().id("a/b"));
    refused(
        good.clone()
            .id("_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-lock-0000000001"),
    );
    refused(good.clone().data(vec![0; 1024 * 1024]));
    assert_eq!(fx.observer.check_stat(&fx.root).await.unwrap(), None);
    fx.nothing_left().await;
}

/// A member whose id another session took ends: every hold it had is told to let go, and
/// `next_partition` says why; the taker's node stays as it was made.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_whose_id_was_taken_lets_go_of_everything() {
    let fx = fixture("partition-taken", 1).await;
    let partitions = names(3);
    let log = Log::new(&fx);
    let a = Member::join(&fx.sessions[0], &fx.root, &partitions, "a", &log).await;
    a.await_settled(&["a"]).await;
    // Its claims are in its node before the take: a write still on its way could land in
    // the taker's node of the same version (the window `Membership::set_data` documents).
    let node = format!("{}/members/a", fx.root);
    await_node(&fx.observer, &node, |raw| {
        raw.lines()
            .nth(1)
            .is_some_and(|owns| owns.split(' ').count() == 1 + partitions.len())
    })
    .await;

    replace(&fx.observer, &node, &node, b"taker").await;
    let ended = let_go(a, &log, partitions.len()).await;
    assert!(
        matches!(&ended, Error::IdTaken { node: taken } if *taken == node),
        "{ended:?}"
    );

    let (data, stat) = fx.observer.get_data(&node).await.unwrap();
    assert_eq!(
        (data.as_slice(), stat.ephemeral_owner),
        (&b"taker"[..], fx.observer.session_id().0)
    );
    fx.observer.delete(&node, None).await.unwrap();
    nothing_left(fx, &partitions).await;
}

/// A `join()` dropped part-way, and a worker dropped with partitions granted but not yet
/// handed out, leave nothing: no member node, no lock node.
#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_join_or_worker_leaves_nothing() {
    let fx = fixture("partition-dropped", 1).await;
    let partitions = names(3);
    let partitioner = Partitioner::new(&fx.sessions[0], &fx.root, partitions.clone())
        .unwrap()
        .id("a")
        .unwrap();
    let members = format!("{}/members", fx.root);
    let mut dropped = 0;
    for after in [0, 1, 2, 5, 10, 20, 50, 200] {
        let join = partitioner.join();
        match tokio::time::timeout(std::time::Duration::from_millis(after), join).await {
            Ok(worker) => {
                let worker = worker.unwrap();
                let mut states = worker.states();
                let all = |s: &zk_recipes::WorkerState| s.owned.len() == 3;
                bounded("all granted", PATIENCE, states.wait_for(all))
                    .await
                    .unwrap();
                drop(worker);
            }
            Err(_) => dropped += 1,
        }
        await_empty(&fx.observer, &members).await;
        for name in &partitions {
            await_empty(&fx.observer, &format!("{}/partitions/{name}", fx.root)).await;
        }
    }
    assert!(dropped > 0, "no join was dropped part-way");
    nothing_left(fx, &partitions).await;
}

/// A member whose node went and was made again (after an expiry, or deleted by someone)
/// while a member with another set of partitions joined gives way, as the newer of two
/// racing joins does: its worker ends with `PartitionsConflict`, every hold let go; the other
/// member's node stays.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_made_again_after_another_set_joined_gives_way() {
    let fx = fixture("partition-set-meanwhile", 1).await;
    let partitions = names(3);
    let log = Log::new(&fx);
    let a = Member::join(&fx.sessions[0], &fx.root, &partitions, "a", &log).await;
    a.await_settled(&["a"]).await;

    // The record of another set: ours with another fingerprint.
    let node = format!("{}/members/a", fx.root);
    let (raw, _) = fx.observer.get_data(&node).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, _) = raw.lines().next().unwrap().rsplit_once(' ').unwrap();
    let theirs = format!("{head} 0123456789abcdef\nowns\n");
    let intruder = format!("{}/members/z", fx.root);
    replace(&fx.observer, &node, &intruder, theirs.as_bytes()).await;
    let ended = let_go(a, &log, partitions.len()).await;
    assert!(
        matches!(&ended, Error::PartitionsConflict { member, .. } if member == "z"),
        "{ended:?}"
    );
    let (data, _) = fx.observer.get_data(&intruder).await.unwrap();
    assert_eq!(data, theirs.as_bytes());
    fx.observer.delete(&intruder, None).await.unwrap();
    nothing_left(fx, &partitions).await;
}

/// A member whose node is deleted and made again, several times in a row, among members of
/// its own set only, never gives way: each time it is dealt its share again, its worker
/// going on (only another set's older member is a conflict).
#[tokio::test(flavor = "multi_thread")]
async fn a_member_made_again_among_its_own_set_goes_on() {
    const REMAKES: usize = 3;
    let fx = fixture("partition-remade-same-set", 2).await;
    let partitions = names(4);
    let log = Log::new(&fx);
    let a = Member::join(&fx.sessions[0], &fx.root, &partitions, "a", &log).await;
    let b = Member::join(&fx.sessions[1], &fx.root, &partitions, "b", &log).await;
    a.await_settled(&["a", "b"]).await;
    b.await_settled(&["a", "b"]).await;
    let node = format!("{}/members/a", fx.root);
    for _ in 0..REMAKES {
        let (_, before) = fx.observer.get_data(&node).await.unwrap();
        fx.observer.delete(&node, None).await.unwrap();
        bounded("a's node made again", PATIENCE, async {
            loop {
                let (stat, watch) = fx.observer.check_and_watch_stat(&node).await.unwrap();
                if stat.is_some_and(|stat| stat.czxid > before.czxid) {
                    break;
                }
                watch.changed().await;
            }
        })
        .await;
        a.await_settled(&["a", "b"]).await;
        b.await_settled(&["a", "b"]).await;
        assert!(!a.dealing.is_finished(), "a gave way to its own set");
    }
    for member in [a, b] {
        member.leave().await;
    }
    nothing_left(fx, &partitions).await;
}

/// Closing the session ends the worker: its holds are lost, `next_partition` says `Closed`.
#[tokio::test(flavor = "multi_thread")]
async fn a_closed_session_ends_the_worker() {
    let fx = fixture("partition-closed", 1).await;
    let partitions = names(2);
    let log = Log::new(&fx);
    let a = Member::join(&fx.sessions[0], &fx.root, &partitions, "a", &log).await;
    a.await_settled(&["a"]).await;
    fx.sessions[0].close().await;
    let ended = bounded("the worker ends", PATIENCE, a.dealing)
        .await
        .unwrap();
    assert!(matches!(ended, Error::Closed), "{ended:?}");
    let worker = Arc::into_inner(a.worker).unwrap();
    bounded("leave", PATIENCE, worker.leave()).await.unwrap();
    let ended = log.steps().into_iter().filter(|s| s.ended.is_some());
    assert_eq!(ended.count(), 2, "{:#?}", log.steps());
    nothing_left(fx, &partitions).await;
}

/// A member's own data is shown beside its id, the record taken off; in its node, the record
/// comes first.
#[tokio::test(flavor = "multi_thread")]
async fn a_members_data_is_shown_without_the_record() {
    let fx = fixture("partition-data", 1).await;
    let partitions = names(2);
    let partitioner = Partitioner::new(&fx.sessions[0], &fx.root, partitions.clone())
        .unwrap()
        .id("a")
        .unwrap()
        .data("10.0.0.7:8080")
        .unwrap();
    let worker = bounded("join", PATIENCE, partitioner.join()).await.unwrap();
    let members = partitioner.members().await.unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(
        (members[0].id.as_str(), members[0].data.as_deref()),
        ("a", Some(&b"10.0.0.7:8080"[..]))
    );
    let (raw, _) = fx.observer.get_data(worker.node()).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    assert!(
        raw.starts_with("zk-recipes partitioner v2 2 partitions ")
            && raw.ends_with("\nowns\n10.0.0.7:8080"),
        "{raw:?}"
    );
    // Each partition held is claimed in the node (its index in the sorted names, and its
    // token), for the others' assignment to keep it here; the member's own data stays last.
    let first = bounded("a partition", PATIENCE, worker.next_partition())
        .await
        .unwrap();
    let second = bounded("a partition", PATIENCE, worker.next_partition())
        .await
        .unwrap();
    let mut claims: Vec<String> = [&first, &second]
        .iter()
        .map(|hold| {
            let index = partitions.iter().position(|p| p == hold.name()).unwrap();
            format!("{index}:{}", hold.fencing_token())
        })
        .collect();
    claims.sort();
    let claimed = format!("\nowns {}\n10.0.0.7:8080", claims.join(" "));
    await_node(&fx.observer, worker.node(), |raw| raw.ends_with(&claimed)).await;
    let members = partitioner.members().await.unwrap();
    assert_eq!(members[0].data.as_deref(), Some(&b"10.0.0.7:8080"[..]));
    drop((first, second));
    bounded("leave", PATIENCE, worker.leave()).await.unwrap();
    nothing_left(fx, &partitions).await;
}

/// Waits until the data of `node` (as text) satisfies `done`.
async fn await_node(observer: &Client, node: &str, done: impl Fn(&str) -> bool) {
    bounded(&format!("{node} as wanted"), PATIENCE, async {
        loop {
            let (raw, _, watch) = observer.get_and_watch_data(node).await.unwrap();
            if done(&String::from_utf8(raw).unwrap()) {
                break;
            }
            watch.changed().await;
        }
    })
    .await;
}

/// Deletes `node` and makes `made` (ephemeral, the observer's, holding `data`) in one
/// transaction.
async fn replace(observer: &Client, node: &str, made: &str, data: &[u8]) {
    let mut multi = observer.new_multi_writer();
    multi.add_delete(node, None).unwrap();
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    multi.add_create(made, data, &ephemeral).unwrap();
    multi.commit().await.unwrap();
}

/// Why `member`'s worker ended, once it did; then leaves, and checks that each of its
/// `holds` ended, let go rather than lost.
async fn let_go(member: Member, log: &Log, holds: usize) -> Error {
    let ended = bounded("the worker ends", PATIENCE, member.dealing)
        .await
        .unwrap();
    let worker = Arc::into_inner(member.worker).unwrap();
    bounded("leave", PATIENCE, worker.leave()).await.unwrap();
    let steps = log.steps();
    let ends: Vec<_> = steps.iter().filter_map(|s| s.ended.as_ref()).collect();
    assert_eq!(ends.len(), holds, "{steps:#?}");
    assert!(ends.iter().all(|why| **why != Why::Lost), "{steps:#?}");
    ended
}
