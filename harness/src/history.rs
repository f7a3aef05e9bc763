//! The history checker: every critical section (and every leadership) recorded with
//! instants of one process clock, then checked for mutual exclusion.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// One critical section, or one leadership.
#[derive(Clone, Debug)]
pub struct Section {
    pub who: String,
    /// Fencing token (lock) or term (election).
    pub token: u64,
    /// The node that held.
    pub node: String,
    pub enter: Instant,
    pub exit: Instant,
    /// `!is_lost()` read at exit (a leadership is trusted until its `lost()` resolves).
    pub trusted: bool,
    /// When the holder learned of the loss, if it did before (or at) its exit.
    pub told: Option<Instant>,
}

#[derive(Clone, Default)]
pub struct History {
    sections: Arc<std::sync::Mutex<Vec<Section>>>,
    entries: Arc<AtomicUsize>,
    progress: Arc<watch::Sender<usize>>,
}

impl History {
    pub fn new() -> History {
        History {
            sections: Default::default(),
            entries: Default::default(),
            progress: Arc::new(watch::channel(0).0),
        }
    }

    /// Counts an entry at once (before the section ends), for waiting on progress.
    pub fn entered(&self) {
        self.entries.fetch_add(1, Ordering::SeqCst);
        self.progress.send_modify(|n| *n += 1);
    }

    pub fn record(&self, section: Section) {
        self.sections.lock().unwrap().push(section);
    }

    pub fn entries(&self) -> usize {
        self.entries.load(Ordering::SeqCst)
    }

    /// Waits until `n` sections have been entered in all.
    pub async fn await_entries(&self, n: usize, within: Duration) {
        let mut progress = self.progress.subscribe();
        let waited = tokio::time::timeout(within, progress.wait_for(|&seen| seen >= n)).await;
        if waited.is_err() {
            panic!(
                "only {} of {n} critical sections entered within {within:?}",
                self.entries()
            );
        }
    }

    pub fn sections(&self) -> Vec<Section> {
        let mut all = self.sections.lock().unwrap().clone();
        all.sort_by_key(|s| s.enter);
        all
    }

    /// Every pair of trusted sections that overlap in time, in order of entry: mutual
    /// exclusion alone, for histories in which holders may also lose their lock.
    pub fn trusted_overlaps(&self) -> Vec<(Section, Section)> {
        self.trusted_overlaps_where(|_, _| true)
    }

    /// Every pair of trusted sections that overlap in time and `conflict` (a writer with
    /// anyone, for a read/write lock), in order of entry.
    pub fn trusted_overlaps_where(
        &self,
        conflict: impl Fn(&Section, &Section) -> bool,
    ) -> Vec<(Section, Section)> {
        let all = self.sections();
        let mut overlaps = Vec::new();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                if b.enter < a.exit && a.trusted && b.trusted && conflict(a, b) {
                    overlaps.push((a.clone(), b.clone()));
                }
            }
        }
        overlaps
    }

    /// The most trusted sections that were inside at one instant, and those sections (for
    /// a semaphore: never more than its maximum).
    pub fn most_trusted_at_once(&self) -> Vec<Section> {
        let trusted: Vec<Section> = self.sections().into_iter().filter(|s| s.trusted).collect();
        let mut most = Vec::new();
        for s in &trusted {
            // The crowd at the instant `s` entered: everyone inside then.
            let inside: Vec<Section> = trusted
                .iter()
                .filter(|o| o.enter <= s.enter && s.enter < o.exit)
                .cloned()
                .collect();
            if inside.len() > most.len() {
                most = inside;
            }
        }
        most
    }

    /// Asserts mutual exclusion and fencing; returns the sections in order of entry.
    ///
    /// * Trusted sections never overlap.
    /// * A section overlapped by a later one was not trusted at exit, and its holder had
    ///   been told (`lost()` resolved) no later than the later one entered.
    /// * Tokens strictly increase in order of entry; for leaderships (`same_term_again`) a
    ///   leader that kept its node may lead again with the same term.
    pub fn check(&self, same_term_again: bool) -> Vec<Section> {
        let all = self.sections();
        for (i, a) in all.iter().enumerate() {
            assert!(a.enter <= a.exit, "section ends before it starts: {a:?}");
            for b in &all[i + 1..] {
                if b.enter >= a.exit {
                    continue;
                }
                assert!(
                    !(a.trusted && b.trusted),
                    "two trusted holders at once:\n  {a:?}\n  {b:?}"
                );
                assert!(
                    !a.trusted,
                    "{} was overlapped by a later holder but trusted its lock at exit:\n  {a:?}\n  {b:?}",
                    a.who
                );
                match a.told {
                    Some(told) => assert!(
                        told <= b.enter,
                        "{} learned of its loss {:?} after {} entered:\n  {a:?}\n  {b:?}",
                        a.who,
                        told - b.enter,
                        b.who
                    ),
                    None => panic!("{} was never told of its loss:\n  {a:?}\n  {b:?}", a.who),
                }
            }
        }
        for pair in all.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let again = same_term_again && a.token == b.token && a.node == b.node;
            assert!(
                a.token < b.token || again,
                "tokens not increasing in order of entry:\n  {a:?}\n  {b:?}"
            );
        }
        all
    }
}

/// Holds `guard` for `work` (or until the lock is lost) and records the section.
pub async fn critical_section(
    history: &History,
    who: &str,
    guard: &zk_recipes::MutexGuard,
    work: Option<Duration>,
) -> Section {
    let enter = Instant::now();
    history.entered();
    let work = async {
        match work {
            Some(work) => tokio::time::sleep(work).await,
            None => std::future::pending().await,
        }
    };
    let mut told = tokio::select! {
        () = work => None,
        _ = guard.lost() => Some(Instant::now()),
    };
    let exit = Instant::now();
    let trusted = !guard.is_lost();
    if !trusted && told.is_none() {
        told = Some(Instant::now());
    }
    let section = Section {
        who: who.to_owned(),
        token: guard.fencing_token(),
        node: guard.node().to_owned(),
        enter,
        exit,
        trusted,
        told,
    };
    history.record(section.clone());
    section
}

/// A stretch of work a process printed (its start and end lines), on the clock every process
/// on the machine shares: ms since the epoch.
#[derive(Clone, Debug)]
pub struct Printed {
    /// The process.
    pub who: String,
    /// What it worked on (a partition): two processes must never work one at once.
    pub what: String,
    pub token: u64,
    pub enter: u64,
    /// `None`: still working (at the end of its output).
    pub exit: Option<u64>,
    /// Ended by the process itself finding its hold lost (it looks before every unit of work).
    pub lost: bool,
}

/// A SIGSTOP of a process, from the signal to the SIGCONT (ms since the epoch).
#[derive(Clone, Debug)]
pub struct Pause {
    pub who: String,
    pub stop: u64,
    pub cont: u64,
}

/// What was done to the processes whose work is checked: pauses and kills.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    pub pauses: Vec<Pause>,
    /// When each SIGKILLed process was killed (ms since the epoch).
    pub kills: std::collections::BTreeMap<String, u64>,
}

impl Faults {
    /// The overlapping pairs of stretches of work on one thing by two processes, described.
    ///
    /// A paused process does nothing: one SIGSTOPped while working, whose stretch it ended
    /// after the SIGCONT by finding its hold lost, worked until the SIGSTOP. A process killed
    /// worked until the kill; one still working, until now.
    pub fn overlaps(&self, printed: &[Printed]) -> Vec<String> {
        let (anchor, anchor_ms) = (Instant::now(), crate::wait::now_ms());
        let instant = |ms: u64| anchor - Duration::from_millis(anchor_ms.saturating_sub(ms));
        let history = History::new();
        for work in printed {
            let mut exit = work.exit.unwrap_or(anchor_ms);
            if let Some(&killed) = self.kills.get(&work.who) {
                exit = exit.min(killed);
            }
            for pause in self.pauses.iter().filter(|p| p.who == work.who) {
                let across = work.enter <= pause.stop && exit >= pause.cont;
                if across && work.exit.is_some() && work.lost {
                    exit = pause.stop;
                }
            }
            history.record(Section {
                who: work.who.clone(),
                token: work.token,
                node: work.what.clone(),
                enter: instant(work.enter),
                exit: instant(exit),
                trusted: true,
                told: Some(instant(exit)),
            });
        }
        let same = |a: &Section, b: &Section| a.node == b.node && a.who != b.who;
        (history.trusted_overlaps_where(same).iter())
            .map(|(a, b)| {
                let ms = (a.exit.min(b.exit) - b.enter).as_millis();
                format!(
                    "{}: {} (token {}) and {} (token {}) for {ms} ms",
                    a.node, a.who, a.token, b.who, b.token
                )
            })
            .collect()
    }
}

/// What one line a process printed says of its work on one thing (a partition).
#[derive(Clone, Debug)]
pub enum Mark {
    /// It started work on `what`, under fencing token `token` (0 where it prints none).
    Started { what: String, token: u64 },
    /// It stopped work on `what`, for `why` (as it said it).
    Stopped { what: String, why: String },
}

/// A stretch of work a process printed: from the line that started it to the one that
/// stopped it, on the clock every process on the machine shares (ms since the epoch).
#[derive(Clone, Debug)]
pub struct Stretch {
    /// The process.
    pub who: String,
    /// What it worked on.
    pub what: String,
    pub token: u64,
    pub enter: u64,
    /// When it stopped, and why; `None` while it works (at the end of its output).
    pub exit: Option<(u64, String)>,
}

impl Stretch {
    /// The stretch as [`Faults::overlaps`] takes it: ended by the process finding its hold
    /// lost if it said `lost` was why.
    pub fn printed(self, lost: &str) -> Printed {
        Printed {
            lost: self.exit.as_ref().is_some_and(|(_, why)| why == lost),
            exit: self.exit.map(|(ms, _)| ms),
            who: self.who,
            what: self.what,
            token: self.token,
            enter: self.enter,
        }
    }
}

/// The stretches of work in `marks` (who, when, what it said; in the order printed): each
/// start paired with the next stop by the same process of the same work. Those stopped come
/// first, in the order they stopped; those still open last.
pub fn stretches(marks: impl IntoIterator<Item = (String, u64, Mark)>) -> Vec<Stretch> {
    let mut done = Vec::new();
    let mut open: std::collections::BTreeMap<(String, String), Stretch> = Default::default();
    for (who, ms, mark) in marks {
        match mark {
            Mark::Started { what, token } => {
                let stretch = Stretch {
                    who: who.clone(),
                    what: what.clone(),
                    token,
                    enter: ms,
                    exit: None,
                };
                open.insert((who, what), stretch);
            }
            Mark::Stopped { what, why } => {
                if let Some(mut stretch) = open.remove(&(who, what)) {
                    stretch.exit = Some((ms, why));
                    done.push(stretch);
                }
            }
        }
    }
    done.extend(open.into_values());
    done
}
