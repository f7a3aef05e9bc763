//! A loss is published before anything else is done about it: a tracing subscriber that
//! panics on every warning (as a logger whose output cannot be written may) cannot keep a
//! holder from learning that it lost its lock, nor a leader that it lost its leadership.
//!
//! One test binary of its own: the subscriber is the process's global one.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;
use std::time::Duration;

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use zk_harness::{
    await_empty, bounded, join_election, observer, session, unique_root, Ensemble, PATIENCE,
};
use zk_recipes::{CloseReason, Loss, Mutex, Role};

/// Panics on every event at WARN level or above; ignores the rest.
struct PanicsOnWarnings;

impl Subscriber for PanicsOnWarnings {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() <= Level::WARN {
            panic!("this subscriber cannot write its output");
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Installs [`PanicsOnWarnings`] as the process's subscriber, once for all tests.
fn install_panicking_subscriber() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(PanicsOnWarnings).expect("the only subscriber");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_subscriber_cannot_hide_a_loss() {
    install_panicking_subscriber();
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let observer = observer(&hosts).await;
    let holder = session(&hosts, SESSION_TIMEOUT).await;

    let root = unique_root("loss-first-lock");
    let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
    observer.delete(guard.node(), None).await.unwrap();
    let loss = bounded("the holder learns its loss", PATIENCE, guard.lost()).await;
    assert_eq!(loss, Loss::NodeDeleted);
    assert!(guard.is_lost());
    drop(guard);
    await_empty(&observer, &root).await;

    let root = unique_root("loss-first-election");
    let candidate = join_election(&holder, &root, "a").await;
    let leadership = bounded("a leads", PATIENCE, candidate.leadership())
        .await
        .unwrap();
    observer.delete(leadership.node(), None).await.unwrap();
    bounded("the leader learns its loss", PATIENCE, leadership.lost()).await;
    assert_eq!(*candidate.roles().borrow(), Role::Follower);
    drop(candidate);
    await_empty(&observer, &root).await;
}

/// A guard dropped while its thread unwinds from a panic emits no warning as it leaves the
/// queue (the removal's first poll runs in that drop), here after its session's runtime is
/// gone: the subscriber's panic, in a destructor during unwinding, would abort the process.
#[test]
fn a_guard_dropped_while_panicking_cannot_abort_the_process() {
    install_panicking_subscriber();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let hosts = runtime.block_on(Ensemble::shared(1)).connect_string();
    let observer = runtime.block_on(observer(&hosts));
    let root = unique_root("loss-first-unwinding");

    let holders_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let guard = holders_runtime.block_on(async {
        let holder = session(&hosts, SESSION_TIMEOUT).await;
        Mutex::new(&holder, &root).unwrap().lock().await.unwrap()
    });
    drop(holders_runtime);

    let unwound = catch_unwind(AssertUnwindSafe(move || {
        let _guard = guard;
        panic!("the holder's own code fails while it holds");
    }));
    assert!(unwound.is_err());
    // Its node goes with its session, which nothing keeps alive any more.
    runtime.block_on(await_empty(&observer, &root));
}

/// A session whose runtime shuts down is closed, and its holders told, before it is logged:
/// the subscriber's panic on that warning cannot leave the session looking alive.
#[test]
fn a_panicking_subscriber_cannot_hide_the_end_of_a_session() {
    install_panicking_subscriber();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let hosts = runtime.block_on(Ensemble::shared(1)).connect_string();
    let observer = runtime.block_on(observer(&hosts));
    let root = unique_root("loss-first-runtime-gone");

    let holders_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (holder, guard) = holders_runtime.block_on(async {
        let holder = session(&hosts, SESSION_TIMEOUT).await;
        let guard = Mutex::new(&holder, &root).unwrap().lock().await.unwrap();
        (holder, guard)
    });
    drop(holders_runtime);

    let reason = holder.close_reason();
    assert!(
        matches!(reason, Some(CloseReason::RuntimeGone)),
        "{reason:?}"
    );
    assert!(guard.is_lost(), "a hold of a closed session is lost");
    drop(guard);
    drop(holder);
    runtime.block_on(await_empty(&observer, &root));
}
