//! Parents (issue #35 §2): a fenced create makes its missing parents inside the fenced
//! transaction (persistent, empty; nothing at all unless the hold is intact, and nothing
//! when the transaction fails), at no cost while they exist; parents made by others
//! meanwhile are looked up again; and `Session::ensure_path` makes a path outside any
//! transaction.

use std::time::Duration;

use zk_harness::{
    all_but, await_empty, bounded, observer, persistent, session, session_id, unique_root,
    Ensemble, PATIENCE,
};
use zk_recipes::{Error, Mutex, Written};
use zookeeper_client::{Acls, Client, CreateMode, Permission, Stat};

use super::{data, state_of};

const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// ZooKeeper's opcodes: exists, multi.
const EXISTS: i32 = 3;
const MULTI: i32 = 14;

/// Deletes `path` and everything under it.
async fn remove_tree(observer: &Client, path: &str) {
    let children = match observer.list_children(path).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => return,
        Err(err) => panic!("list {path}: {err}"),
    };
    for child in children {
        Box::pin(remove_tree(observer, &format!("{path}/{child}"))).await;
    }
    observer.delete(path, None).await.unwrap();
}

/// The stat of `path`, which must exist.
async fn stat(observer: &Client, path: &str) -> Stat {
    let found = observer.check_stat(path).await.unwrap();
    found.unwrap_or_else(|| panic!("{path} does not exist"))
}

/// A parent made for a create with parents: persistent (not ephemeral, not a container,
/// whose owner field is `i64::MIN`), empty.
async fn assert_made_parent(observer: &Client, path: &str) {
    let (data, stat) = observer.get_data(path).await.unwrap();
    assert_eq!(
        (data.len(), stat.ephemeral_owner),
        (0, 0),
        "{path}: a persistent empty parent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_create_makes_its_missing_parents_in_the_transaction_and_costs_nothing_once_they_exist() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-parents");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let proxy = zk.proxy(0).await;
    let holder = session(&proxy.address(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    // The hold's own watch on its node is set: no request of the hold's comes later.
    zk.await_watcher(guard.node(), &session_id(&holder)).await;

    // Two creates sharing parents, and a set of a node an earlier operation creates.
    let sent = proxy.requests().len();
    let written = guard
        .fenced()
        .create_with_parents(
            &format!("{state}/sched/assign"),
            b"a",
            CreateMode::Persistent,
        )
        .create_with_parents(
            &format!("{state}/sched/runs/run-"),
            b"r",
            CreateMode::PersistentSequential,
        )
        .create_with_parents(&format!("{state}/sched/last"), b"l", CreateMode::Persistent)
        .set_data(&format!("{state}/sched/last"), b"L", Some(0))
        .commit()
        .await
        .unwrap();
    let ops = proxy.sent_since(sent);
    assert_eq!(written.len(), 4, "the parents are not among the results");
    assert_eq!(
        written[0],
        Written::Created {
            path: format!("{state}/sched/assign")
        }
    );
    let Written::Created { path: run } = &written[1] else {
        panic!("a sequential create: {written:?}");
    };
    assert!(
        run.starts_with(&format!("{state}/sched/runs/run-")),
        "{run}"
    );
    assert_eq!(written[3], Written::DataSet { version: 1 });
    for parent in [
        state.clone(),
        format!("{state}/sched"),
        format!("{state}/sched/runs"),
    ] {
        assert_made_parent(&observer, &parent).await;
    }
    assert_eq!(
        data(&observer, &format!("{state}/sched/assign")).await,
        b"a"
    );
    assert_eq!(data(&observer, &format!("{state}/sched/last")).await, b"L");
    // One multi refused for want of parents, one look at each ancestor (sent back to
    // back), one multi with their creates.
    let count = |ops: &[i32], op| ops.iter().filter(|&&o| o == op).count();
    assert_eq!(count(&ops, MULTI), 2, "{ops:?}");
    assert_eq!(count(&ops, EXISTS), 3, "{ops:?}");

    // Once the parents exist, a create with parents is one multi, and no look.
    let sent = proxy.requests().len();
    guard
        .fenced()
        .create_with_parents(
            &format!("{state}/sched/runs/run-"),
            b"r2",
            CreateMode::PersistentSequential,
        )
        .commit()
        .await
        .unwrap();
    assert_eq!(proxy.sent_since(sent), [MULTI]);

    guard.release().await.unwrap();
    remove_tree(&observer, &state).await;
    await_empty(&observer, &root).await;
}

/// The parents are written with the transaction, or not at all: a transaction refused for
/// another operation, or by the fence, leaves no parent behind.
#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_that_fails_or_a_stale_holder_leaves_no_parent() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-parents-none");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    // The caller's third operation fails: its index counts the caller's operations only.
    let missing = format!("{root}.missing");
    let failed = guard
        .fenced()
        .check(guard.node(), -1)
        .create_with_parents(&format!("{state}/a/b"), b"x", CreateMode::Persistent)
        .delete(&missing, None)
        .commit()
        .await;
    match failed {
        Err(Error::FencedOpFailed {
            index: 2,
            path,
            reason: zookeeper_client::Error::NoNode,
        }) => assert_eq!(path, missing),
        other => panic!("expected operation 2 to fail: {other:?}"),
    }
    assert_eq!(
        observer.check_stat(&state).await.unwrap(),
        None,
        "no parent"
    );

    // A stale holder: its node deleted by an operator.
    observer.delete(guard.node(), None).await.unwrap();
    let stale = guard
        .fenced()
        .create_with_parents(&format!("{state}/a/b"), b"x", CreateMode::Persistent)
        .commit()
        .await;
    assert!(
        matches!(&stale, Err(Error::Lost { node }) if node == guard.node()),
        "{stale:?}"
    );
    assert_eq!(
        observer.check_stat(&state).await.unwrap(),
        None,
        "no parent"
    );

    assert!(matches!(guard.release().await, Err(Error::Lost { .. })));
    await_empty(&observer, &root).await;
}

/// A parent the servers refuse to create is named: its path, and the index of the
/// operation that needed it.
#[tokio::test(flavor = "multi_thread")]
async fn a_parent_the_servers_refuse_is_named_with_its_operation() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-parents-refused");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    observer.create(&state, b"", &ephemeral).await.unwrap();
    let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();

    let refused = guard
        .fenced()
        .check(guard.node(), -1)
        .create_with_parents(&format!("{state}/a/b"), b"x", CreateMode::Persistent)
        .commit()
        .await;
    match refused {
        Err(Error::FencedOpFailed {
            index: 1,
            path,
            reason: zookeeper_client::Error::NoChildrenForEphemerals,
        }) => assert_eq!(path, format!("{state}/a")),
        other => panic!("expected the parent of operation 1 to be refused: {other:?}"),
    }
    assert!(!guard.is_lost());

    guard.release().await.unwrap();
    observer.delete(&state, None).await.unwrap();
    await_empty(&observer, &root).await;
}

/// Holders of different locks create under the same missing parents at once: each finds
/// them missing, and all but one find a parent made meanwhile (`NodeExists` on its create):
/// they look again and send again, and every create commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parents_made_by_others_meanwhile_are_looked_up_again() {
    const HOLDERS: usize = 6;
    let zk = Ensemble::shared(1).await;
    let root = unique_root("fenced-parents-race");
    let state = state_of(&root);
    let observer = observer(&zk.connect_string()).await;
    for round in 0..3 {
        let mut guards = Vec::new();
        for i in 0..HOLDERS {
            let holder = session(&zk.connect_string(), SESSION_TIMEOUT).await;
            let lock = Mutex::new(&holder, &format!("{root}/{i}")).unwrap();
            guards.push((holder, lock.lock().await.unwrap()));
        }
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(HOLDERS));
        let mut creates = tokio::task::JoinSet::new();
        for (i, (_, guard)) in guards.iter().enumerate() {
            let leaf = format!("{state}/r{round}/shared/parents/leaf-{i}");
            let create = guard
                .fenced()
                .create_with_parents(&leaf, b"", CreateMode::Persistent);
            let start = start.clone();
            creates.spawn(async move {
                start.wait().await;
                create.commit().await
            });
        }
        let created = bounded("the creates", PATIENCE, creates.join_all()).await;
        for created in created {
            assert!(created.is_ok(), "round {round}: {created:?}");
        }
        let leaves = observer
            .list_children(&format!("{state}/r{round}/shared/parents"))
            .await
            .unwrap();
        assert_eq!(leaves.len(), HOLDERS);
        for (holder, guard) in guards {
            guard.release().await.unwrap();
            holder.close();
        }
    }
    remove_tree(&observer, &state).await;
    for i in 0..HOLDERS {
        await_empty(&observer, &format!("{root}/{i}")).await;
    }
}

/// `Session::ensure_path` makes a path and its missing parents (persistent, empty), leaves
/// what exists as it is, also under a parent that denies creating, and names the node the
/// servers refuse.
#[tokio::test(flavor = "multi_thread")]
async fn ensure_path_makes_what_is_missing_and_nothing_else() {
    let zk = Ensemble::shared(1).await;
    let root = unique_root("ensure-path");
    let observer = observer(&zk.connect_string()).await;
    let s = session(&zk.connect_string(), SESSION_TIMEOUT).await;

    let deep = format!("{root}/sched/assign");
    s.ensure_path(&deep).await.unwrap();
    for path in [root.clone(), format!("{root}/sched"), deep.clone()] {
        assert_made_parent(&observer, &path).await;
    }
    // Nothing if there: its data and version stay.
    observer.set_data(&deep, b"kept", None).await.unwrap();
    s.ensure_path(&deep).await.unwrap();
    let (kept, after) = observer.get_data(&deep).await.unwrap();
    assert_eq!((kept.as_slice(), after.version), (&b"kept"[..], 1));

    // Under a parent that denies creating: what exists is fine, what is missing is named.
    let closed = format!("{root}/closed");
    persistent(&observer, &closed).await;
    persistent(&observer, &format!("{closed}/there")).await;
    observer
        .set_acl(&closed, &all_but(Permission::CREATE), None)
        .await
        .unwrap();
    s.ensure_path(&format!("{closed}/there")).await.unwrap();
    let refused = s.ensure_path(&format!("{closed}/missing/deeper")).await;
    assert!(
        matches!(&refused, Err(Error::NoAuth { path }) if *path == format!("{closed}/missing")),
        "{refused:?}"
    );
    assert!(matches!(
        s.ensure_path("relative/path").await,
        Err(Error::InvalidPath { .. })
    ));
    let before = stat(&observer, &root).await;

    // Several sessions make one deep path at once: all succeed.
    let others = [
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
        session(&zk.connect_string(), SESSION_TIMEOUT).await,
    ];
    let shared = format!("{root}/a/b/c/d");
    let mut made = tokio::task::JoinSet::new();
    for other in &others {
        let (other, shared) = (other.clone(), shared.clone());
        made.spawn(async move { other.ensure_path(&shared).await });
    }
    for made in bounded("the paths", PATIENCE, made.join_all()).await {
        made.unwrap();
    }
    assert_made_parent(&observer, &shared).await;
    assert_eq!(stat(&observer, &root).await.czxid, before.czxid);

    observer
        .set_acl(&closed, &Acls::anyone_all(), None)
        .await
        .unwrap();
    remove_tree(&observer, &root).await;
    s.close();
    for other in others {
        other.close();
    }
}
