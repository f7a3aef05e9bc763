//! Statistics over samples and repetitions, and the markdown table the bench prints.
//!
//! A cell is the median over the repetitions with the spread `[min–max]`, to show the
//! noise; a row puts zk-recipes (ours) beside the peer, their ratio and, where the team
//! set one, a target with its verdict.

use std::fmt::Write as _;
use std::time::Duration;

use crate::side::PerSide;
use crate::targets::Target;

/// A duration in microseconds, the unit of the latency samples.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// The nearest-rank percentile `p` (0–100) of sorted samples; NaN if there are none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub fn median(v: Vec<f64>) -> f64 {
    percentile(&sorted(v), 50.0)
}

pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Three significant digits or so: 1234, 56.7, 8.90.
pub fn fmt_num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// One measurement over the repetitions: the median, with the spread.
#[derive(Clone, Debug, Default)]
pub struct Reps(Vec<f64>);

impl Reps {
    pub fn push(&mut self, x: f64) {
        self.0.push(x);
    }

    pub fn median(&self) -> f64 {
        median(self.0.clone())
    }

    /// `median [min–max]` over the finite repetitions (one alone: just it), or `n/a`.
    pub fn cell(&self) -> String {
        let finite: Vec<f64> = self.0.iter().copied().filter(|x| x.is_finite()).collect();
        if finite.is_empty() {
            return "n/a".into();
        }
        let s = sorted(finite);
        if s.len() == 1 {
            fmt_num(s[0])
        } else {
            format!(
                "{} [{}–{}]",
                fmt_num(percentile(&s, 50.0)),
                fmt_num(s[0]),
                fmt_num(s[s.len() - 1])
            )
        }
    }
}

impl PerSide<Reps> {
    /// Ours / peer, of the medians.
    pub fn ratio(&self) -> f64 {
        self.ours.median() / self.peer.median()
    }
}

/// One line of the table, built by name:
/// `Row::new(scenario, metric).ours(..).peer(..).ratio(..).target(..)`.
/// What is not set stays empty (cells) or `—` (ratio, verdict).
pub struct Row {
    scenario: String,
    metric: String,
    ours: String,
    peer: String,
    ratio: String,
    target: Target,
}

impl Row {
    pub fn new(scenario: impl Into<String>, metric: &str) -> Row {
        Row {
            scenario: scenario.into(),
            metric: metric.into(),
            ours: String::new(),
            peer: String::new(),
            ratio: "—".into(),
            target: Target::default(),
        }
    }

    /// zk-recipes' cell.
    pub fn ours(mut self, cell: impl Into<String>) -> Row {
        self.ours = cell.into();
        self
    }

    /// The peer's cell (or another reference, such as a floor).
    pub fn peer(mut self, cell: impl Into<String>) -> Row {
        self.peer = cell.into();
        self
    }

    /// Ours / peer; `—` unless finite.
    pub fn ratio(mut self, ratio: f64) -> Row {
        if ratio.is_finite() {
            self.ratio = format!("{ratio:.2}");
        }
        self
    }

    /// Both cells from repetitions, and the ratio of their medians.
    pub fn medians(self, reps: &PerSide<Reps>) -> Row {
        self.ours(reps.ours.cell())
            .peer(reps.peer.cell())
            .ratio(reps.ratio())
    }

    pub fn target(mut self, target: Target) -> Row {
        self.target = target;
        self
    }

    fn cells(&self) -> [&str; 7] {
        [
            &self.scenario,
            &self.metric,
            &self.ours,
            &self.peer,
            &self.ratio,
            self.target.text(),
            self.target.verdict(),
        ]
    }
}

/// The rows and notes of the run, echoed to stderr as they come.
#[derive(Default)]
pub struct Table {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Table {
    pub fn push(&mut self, row: Row) {
        let [scenario, metric, ours, peer, ratio, target, verdict] = row.cells();
        eprintln!(
            "  {scenario} | {metric} | ours {ours} | peer {peer} | ratio {ratio} | {target} {verdict}"
        );
        self.rows.push(row);
    }

    pub fn note(&mut self, note: String) {
        eprintln!("  note: {note}");
        self.notes.push(note);
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "| scenario | metric | zk-recipes | peer (zookeeper-client lock) | ours / peer | target | |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.cells().join(" | "));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        out
    }
}
