//! Fenced writes under faults (issue #27): contenders on several
//! sessions (some through proxies that are cut, long enough to expire sessions at times,
//! or frozen, so that what a holder sent arrives late)
//! append to a log only through `fenced()`, while an operator writes hints into, and
//! deletes, holders' nodes. Whatever happens, the log stays in fencing-token order: no
//! write of a holder lands after a write of a later holder.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_harness::{await_empty, bounded, children, observer, session, unique_root, Ensemble};
use zk_recipes::{Error, Mutex, Session};
use zookeeper_client::{Client, CreateMode};

const SESSION_TIMEOUT: Duration = Duration::from_secs(2);
const ROUNDS: usize = 8;

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Whether a fenced write's failure is one a holder under faults may see.
fn expected(err: &Error) -> bool {
    matches!(
        err,
        Error::Lost { .. } | Error::ConnectionLoss | Error::Disconnected
    )
}

/// Holds the lock `ROUNDS` times; appends its token to `log` twice per hold, fenced.
async fn contender(session: Session, root: String, log: String, appended: Arc<AtomicU64>) {
    let mutex = Mutex::new(&session, &root).unwrap();
    for round in 0..ROUNDS {
        let Ok(guard) = mutex.lock().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let token = guard.fencing_token().to_string();
        for _ in 0..2 {
            let written = guard
                .fenced()
                .create(
                    &format!("{log}/e-"),
                    token.as_bytes(),
                    CreateMode::PersistentSequential,
                )
                .commit()
                .await;
            match written {
                Ok(_) => {
                    appended.fetch_add(1, Ordering::SeqCst);
                }
                Err(err) if expected(&err) => {}
                Err(err) => panic!("round {round}: unexpected {err}"),
            }
            tokio::time::sleep(Duration::from_millis(100 + 100 * (round as u64 % 3))).await;
        }
        let _ = guard.release().await;
    }
}

/// Writes hints into, and now and then deletes, the first contender's node (the holder's).
async fn operator(observer: Client, root: String, mut rng: Rng, stop: Arc<AtomicU64>) {
    while stop.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(1 + rng.below(20))).await;
        let queue = children(&observer, &root).await;
        let Some(first) = queue.first() else { continue };
        let node = format!("{root}/{first}");
        let _ = match rng.below(4) {
            0 => observer.delete(&node, None).await.map(|_| ()),
            _ => observer
                .set_data(&node, b"__REVOKE__", None)
                .await
                .map(|_| ()),
        };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fenced_appends_stay_in_token_order_under_cuts_expiries_hints_and_deletions() {
    let zk = Ensemble::shared(1).await;
    let hosts = zk.connect_string();
    let base = unique_root("review-fenced-faults");
    let root = format!("{base}/lock");
    let log = format!("{base}.log");
    let observer = observer(&hosts).await;
    observer
        .create(
            &log,
            b"",
            &CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let proxies = [zk.proxy(0).await, zk.proxy(0).await];
    let appended = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for proxy in &proxies {
        for direct in [false, true] {
            let hosts = if direct {
                hosts.clone()
            } else {
                proxy.address()
            };
            let s = session(&hosts, SESSION_TIMEOUT).await;
            for _ in 0..2 {
                tasks.push(tokio::spawn(contender(
                    s.clone(),
                    root.clone(),
                    log.clone(),
                    appended.clone(),
                )));
            }
        }
    }
    let stop = Arc::new(AtomicU64::new(0));
    let op = tokio::spawn(operator(
        observer.clone(),
        root.clone(),
        Rng(0x5eed),
        stop.clone(),
    ));
    let faults = async {
        let mut rng = Rng(0xfa17);
        while !tasks.iter().all(|t| t.is_finished()) {
            let proxy = &proxies[rng.below(2) as usize];
            tokio::time::sleep(Duration::from_millis(100 + rng.below(400))).await;
            if rng.below(2) == 0 {
                // Up to 1.5 session timeouts: some sessions expire, some ride it out.
                proxy.cut();
                tokio::time::sleep(Duration::from_millis(rng.below(3000))).await;
            } else {
                // Less than a session timeout: what the holder sent meanwhile arrives
                // late, after the operator may have deleted its node and another held.
                proxy.freeze();
                tokio::time::sleep(Duration::from_millis(200 + rng.below(1000))).await;
            }
            proxy.restore();
        }
    };
    bounded("the contenders finish", Duration::from_secs(120), faults).await;
    stop.store(1, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    op.await.unwrap();

    let mut entries = children(&observer, &log).await;
    entries.sort();
    let mut tokens = Vec::new();
    for entry in &entries {
        let path = format!("{log}/{entry}");
        let (data, _) = observer.get_data(&path).await.unwrap();
        tokens.push(String::from_utf8(data).unwrap().parse::<u64>().unwrap());
        observer.delete(&path, None).await.unwrap();
    }
    observer.delete(&log, None).await.unwrap();
    await_empty(&observer, &root).await;
    let mut holds = tokens.clone();
    holds.dedup();
    eprintln!("{} appends by {} holds", tokens.len(), holds.len());
    assert!(tokens.len() as u64 >= appended.load(Ordering::SeqCst));
    assert!(
        tokens.len() > 10,
        "too few appends to mean much: {}",
        tokens.len()
    );
    let out_of_order: Vec<_> = tokens
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] > w[1])
        .collect();
    assert!(
        out_of_order.is_empty(),
        "a stale holder appended after a later one: {out_of_order:?} in {tokens:?}"
    );
}
