//! Interference: contenders loop over short critical sections while a nemesis deletes
//! waiters' nodes and writes into any contender node; their history is then checked
//! against the recipe's rule (one holder, a writer alone, at most N holders).

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_recipes::{
    Candidate, Leadership, Lease, MutexGuard, RwLockReadGuard, RwLockWriteGuard, Session,
};
use zookeeper_client::Client;

use crate::history::{History, Section};
use crate::{
    await_empty, bounded, children, name, observer, session, unique_root, unless_stopped, Ensemble,
    PATIENCE, WORK,
};

/// A tiny seeded xorshift64: the nemesis' choices (and a test's random writes), the same
/// every run for one seed (not 0).
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn number(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next number below `n` (not 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.number() % n as u64) as usize
    }
}

/// What the nemesis did.
#[derive(Debug, Default)]
pub struct Havoc {
    pub deleted: usize,
    pub written: usize,
}

/// How the nemesis tells a waiter, whose node it may delete, from a holder.
#[derive(Clone, Copy, Debug)]
pub enum Waits {
    /// Every node but the first waits (a mutex, an election).
    BehindAny,
    /// A writer waits behind any lower node, a reader behind a lower writer (`__WRIT__`).
    ReadWrite,
    /// A node waits while at least this many lower nodes exist (a semaphore's leases).
    Crowd(usize),
}

/// A node the nemesis may attack: the recipe root itself (`child` empty) or one of its
/// children (a semaphore's `locks` and `leases`).
#[derive(Clone, Copy, Debug)]
pub struct Arena {
    pub child: &'static str,
    pub waits: Waits,
}

impl Arena {
    fn path(&self, root: &str) -> String {
        match self.child {
            "" => root.to_owned(),
            child => format!("{root}/{child}"),
        }
    }
}

impl Waits {
    /// The lower nodes of `queue` (in queue order) whose existence proves that the node at
    /// `victim` waits: deleted in one transaction that checks them, it is never a holder.
    fn proof(self, queue: &[String], victim: usize) -> Option<Vec<usize>> {
        let is_writer = |name: &String| name.contains("__WRIT__");
        match self {
            Waits::BehindAny | Waits::ReadWrite if victim == 0 => None,
            Waits::ReadWrite if !is_writer(&queue[victim]) => {
                queue[..victim].iter().rposition(is_writer).map(|w| vec![w])
            }
            Waits::BehindAny | Waits::ReadWrite => Some(vec![victim - 1]),
            Waits::Crowd(max) => (victim >= max).then(|| (victim - max..victim).collect()),
        }
    }
}

/// At random moments until `stop`, in a random one of `arenas` under `root`: deletes a
/// random waiter's node, or writes random data into a random contender node (a holder's
/// too).
///
/// A deletion is one transaction that also checks that the nodes which make the victim
/// wait exist ([`Waits`]), so it never hits a holder (of a correct recipe): a holder whose
/// own node is deleted learns of it by a notification, after another may have entered, so
/// no client could keep exclusion against that. Writes hit anyone: a write is neither a
/// release nor a loss.
pub fn spawn_nemesis(
    client: Client,
    root: String,
    arenas: Vec<Arena>,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<Havoc> {
    tokio::spawn(async move {
        let mut rng = Rng(seed);
        let mut havoc = Havoc::default();
        loop {
            let pause = Duration::from_millis(1 + rng.below(10) as u64);
            if unless_stopped(&mut stop, tokio::time::sleep(pause))
                .await
                .is_none()
            {
                return havoc;
            }
            let arena = arenas[rng.below(arenas.len())];
            let path = arena.path(&root);
            let queue = children(&client, &path).await;
            if queue.is_empty() {
                continue;
            }
            let victim = rng.below(queue.len());
            match arena.waits.proof(&queue, victim) {
                Some(proof) if rng.below(2) == 0 => {
                    let mut deletion = client.new_multi_writer();
                    for lower in proof {
                        let lower = format!("{path}/{}", queue[lower]);
                        deletion.add_check_version(&lower, -1).unwrap();
                    }
                    let victim = format!("{path}/{}", queue[victim]);
                    deletion.add_delete(&victim, None).unwrap();
                    if deletion.commit().await.is_ok() {
                        havoc.deleted += 1;
                    }
                }
                _ => {
                    let data = rng.number().to_le_bytes();
                    let data: &[u8] = if rng.below(2) == 0 {
                        b"__REVOKE__"
                    } else {
                        &data
                    };
                    let victim = format!("{path}/{}", queue[victim]);
                    if client.set_data(&victim, data, None).await.is_ok() {
                        havoc.written += 1;
                    }
                }
            }
        }
    })
}

/// What a looping contender holds: a guard, a lease, or a leadership with its candidate.
pub trait Held: Send + Sync + 'static {
    /// The fencing token (or term).
    fn token(&self) -> u64;
    /// The node that holds.
    fn node(&self) -> &str;
    fn is_lost(&self) -> bool;
    /// Releases (or resigns).
    fn release(self) -> impl Future<Output = zk_recipes::Result<()>> + Send;
}

/// Every guard is held alike.
macro_rules! held {
    ($($guard:ty),*) => {$(
        impl Held for $guard {
            fn token(&self) -> u64 {
                self.fencing_token()
            }
            fn node(&self) -> &str {
                <$guard>::node(self)
            }
            fn is_lost(&self) -> bool {
                <$guard>::is_lost(self)
            }
            fn release(self) -> impl Future<Output = zk_recipes::Result<()>> + Send {
                <$guard>::release(self)
            }
        }
    )*};
}

held!(MutexGuard, RwLockReadGuard, RwLockWriteGuard, Lease);

/// A leadership, with the candidate that resigns it.
pub struct Leading(pub Candidate, pub Leadership);

impl Held for Leading {
    fn token(&self) -> u64 {
        self.1.term()
    }
    fn node(&self) -> &str {
        self.1.node()
    }
    fn is_lost(&self) -> bool {
        self.1.is_lost()
    }
    fn release(self) -> impl Future<Output = zk_recipes::Result<()>> + Send {
        self.0.resign()
    }
}

/// What one looping contender saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub sections: usize,
    pub errors: Vec<String>,
}

/// Enters a section now, works for [`WORK`], and records it: trusted if `lost()` says no at
/// its end.
pub async fn section(
    history: &History,
    who: &str,
    token: u64,
    node: &str,
    lost: impl Fn() -> bool,
) {
    let enter = Instant::now();
    history.entered();
    tokio::time::sleep(WORK).await;
    let lost = lost();
    let exit = Instant::now();
    history.record(Section {
        who: who.to_owned(),
        token,
        node: node.to_owned(),
        enter,
        exit,
        trusted: !lost,
        told: lost.then_some(exit),
    });
}

/// A looping contender to start: who it is, on which session, under which root, for how
/// many sections, where it records them, and what tells it to stop.
pub struct Entrant<'a> {
    pub who: String,
    pub session: &'a Session,
    pub root: &'a str,
    pub rounds: usize,
    pub history: History,
    pub stop: watch::Receiver<bool>,
}

impl Entrant<'_> {
    /// Acquires, works, releases, `rounds` times or until `stop`, recording every section;
    /// an acquisition that fails is retried after a short back-off.
    pub fn run<H, F, Fut>(self, mut acquire: F) -> JoinHandle<Tally>
    where
        H: Held,
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = zk_recipes::Result<H>> + Send,
    {
        let Entrant {
            who,
            rounds,
            history,
            mut stop,
            ..
        } = self;
        tokio::spawn(async move {
            let mut tally = Tally::default();
            while tally.sections < rounds {
                let Some(acquired) = unless_stopped(&mut stop, acquire()).await else {
                    break;
                };
                let held = match acquired {
                    Ok(held) => held,
                    Err(err) => {
                        tally.errors.push(format!("acquire: {err}"));
                        tokio::time::sleep(Duration::from_millis(10)).await; // back off
                        continue;
                    }
                };
                section(&history, &who, held.token(), held.node(), || held.is_lost()).await;
                tally.sections += 1;
                if let Err(err) = held.release().await {
                    tally.errors.push(format!("release: {err}"));
                }
            }
            tally
        })
    }
}

/// Starts one looping contender (see [`Entrant::run`]).
pub type Looper = fn(Entrant<'_>) -> JoinHandle<Tally>;

/// What the trusted sections of a history must keep to.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// One at a time (a mutex, an election).
    Exclusive,
    /// A writer (a `__WRIT__` node) alone; readers together.
    ReadWrite,
    /// At most this many at once (a semaphore).
    AtMost(usize),
}

/// Session timeout of the looping contenders' sessions.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `looper` contenders (`per_session` on each of four sessions, `rounds` each) under
/// the nemesis, which attacks `arenas` (seeded: the same choices every run; their timing
/// varies) for at most 20 s; checks that the trusted sections kept to `rule`, that all
/// finished, and that every arena ends empty.
pub async fn under_nemesis(
    name_: &str,
    looper: Looper,
    per_session: usize,
    rounds: usize,
    arenas: &[Arena],
    rule: Rule,
) {
    const SESSIONS: usize = 4;
    const SEED: u64 = 0x5eed_c0ff_ee05;
    const LOOPS: Duration = Duration::from_secs(20);
    let ensemble = Ensemble::shared(1).await;
    let hosts = ensemble.connect_string();
    let root = unique_root(name_);
    let history = History::new();
    let (stop, stopped) = watch::channel(false);
    let mut sessions = Vec::new();
    let mut contenders = Vec::new();
    for s in 0..SESSIONS {
        let session = session(&hosts, SESSION_TIMEOUT).await;
        for c in 0..per_session {
            contenders.push(looper(Entrant {
                who: format!("s{s}c{c}"),
                session: &session,
                root: &root,
                rounds,
                history: history.clone(),
                stop: stopped.clone(),
            }));
        }
        sessions.push(session);
    }
    let attacker = observer(&hosts).await;
    let nemesis = spawn_nemesis(attacker, root.clone(), arenas.to_vec(), SEED, stopped);

    let all = SESSIONS * per_session * rounds;
    let finished = tokio::time::timeout(LOOPS, history.await_entries(all, LOOPS + PATIENCE)).await;
    stop.send_replace(true);
    let havoc = bounded("the nemesis stops", PATIENCE, nemesis)
        .await
        .unwrap();
    let mut errors = Vec::new();
    for contender in contenders {
        let tally = bounded("a contender stops", PATIENCE, contender).await;
        errors.extend(tally.unwrap().errors);
    }
    let sections = history.sections();
    let untrusted = sections.iter().filter(|s| !s.trusted).count();
    eprintln!(
        "{name_}: {} sections ({untrusted} lost at exit), nemesis {havoc:?}, {} errors {:?}",
        sections.len(),
        errors.len(),
        &errors[..errors.len().min(3)]
    );
    keeps(&history, rule);
    let observer = observer(&hosts).await;
    assert!(
        finished.is_ok(),
        "only {} of {all} sections within {LOOPS:?}; the root holds {:?}",
        sections.len(),
        children(&observer, &root).await
    );
    for arena in arenas {
        let emptied = Duration::from_secs(5);
        let path = arena.path(&root);
        bounded("the root empties", emptied, await_empty(&observer, &path)).await;
    }
}

/// Asserts that the trusted sections of `history` kept to `rule`.
fn keeps(history: &History, rule: Rule) {
    let sections = history.sections();
    let origin = sections.first().map_or_else(Instant::now, |s| s.enter);
    let describe = |s: &Section| {
        format!(
            "{} (token {}, {}) from {} to {}",
            s.who,
            s.token,
            name(&s.node),
            since(origin, s.enter),
            since(origin, s.exit)
        )
    };
    let writer = |s: &Section| s.node.contains("__WRIT__");
    let overlaps = match rule {
        Rule::Exclusive => history.trusted_overlaps(),
        Rule::ReadWrite => history.trusted_overlaps_where(|a, b| writer(a) || writer(b)),
        Rule::AtMost(max) => {
            let most = history.most_trusted_at_once();
            let inside: Vec<_> = most.iter().map(describe).collect();
            assert!(
                most.len() <= max,
                "{} trusted holders at once, over {max}:\n  {}",
                most.len(),
                inside.join("\n  ")
            );
            Vec::new()
        }
    };
    assert!(
        overlaps.is_empty(),
        "{} pairs of trusted sections overlapped against {rule:?}, the first:\n  {}\n  {}",
        overlaps.len(),
        describe(&overlaps[0].0),
        describe(&overlaps[0].1)
    );
}

/// `at` relative to `origin`, in milliseconds with a sign.
pub fn since(origin: Instant, at: Instant) -> String {
    match at.checked_duration_since(origin) {
        Some(after) => format!("+{:.1} ms", after.as_secs_f64() * 1e3),
        None => format!("-{:.1} ms", (origin - at).as_secs_f64() * 1e3),
    }
}
