//! The team's targets, one function each: the text of the table's "target" column and
//! the met / missed verdict come from the same definition. Ratios are ours / peer.

/// What a row is held to, and whether the run met it (`None`: nothing to meet).
#[derive(Default)]
pub struct Target {
    text: String,
    met: Option<bool>,
}

impl Target {
    fn new(text: impl Into<String>, met: bool) -> Target {
        Target {
            text: text.into(),
            met: Some(met),
        }
    }

    /// Both: the texts joined, met when both are.
    fn and(self, other: Target) -> Target {
        Target {
            text: format!("{}; {}", self.text, other.text),
            met: self.met.zip(other.met).map(|(a, b)| a && b),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "—",
        }
    }
}

/// Uncontended: a lock cycle costs at most three quarters of the peer's, on the mean.
pub fn uncontended_mean(ratio: f64) -> Target {
    Target::new("≤ 0.75", ratio <= 0.75)
}

/// Not a target but its bound: pipelining create and list is the best ratio a lock
/// cycle can reach against the peer's create, list, delete.
pub fn floor_ratio() -> Target {
    Target {
        text: "best possible ratio".into(),
        met: None,
    }
}

/// Client CPU per acquisition on loopback (uncontended, and per key on 8 sessions): no
/// more than the peer's.
pub fn client_cpu(ratio: f64) -> Target {
    Target::new("≤ 1.0 × peer", ratio <= 1.0)
}

/// Contended: at least the peer's acquisitions per second.
pub fn contended(ratio: f64) -> Target {
    Target::new("≥ 1.0", ratio >= 1.0)
}

/// Queue drain at `waiters`, from the medians of µs per hand-off: ours, the peer's, and
/// ours at 100 waiters when that size ran. 1,000 waiters: scales and beats the peer;
/// 10,000: finishes at all.
pub fn drain(waiters: usize, ours: f64, peer: f64, ours_at_100: Option<f64>) -> Target {
    match waiters {
        1000 => {
            let beats_peer = Target::new("≤ 0.8 × peer", ours / peer <= 0.8);
            match ours_at_100 {
                Some(at_100) => drain_scaling(ours / at_100).and(beats_peer),
                None => beats_peer,
            }
        }
        10_000 => Target::new("completes", ours.is_finite()),
        _ => Target::default(),
    }
}

/// Ten times the waiters cost at most 1.2 × as much per hand-off.
fn drain_scaling(scale: f64) -> Target {
    let is = if scale.is_finite() {
        format!("is {scale:.2}")
    } else {
        "DNF".into()
    };
    Target::new(format!("≤ 1.2 × ours@100 ({is})"), scale <= 1.2)
}

/// The memory scenario: RSS growth per waiting `lock()` at 10,000 waiters.
/// Smaller queues spread the sessions' fixed buffers over fewer waiters: no target.
pub fn memory(waiters: usize, rss_kib_per_waiter: f64) -> Target {
    if waiters == 10_000 {
        Target::new("≤ 2 KiB/waiter", rss_kib_per_waiter <= 2.0)
    } else {
        Target::default()
    }
}

/// Server watches with the waiters queued: at most three per waiter (its blocker, its own
/// node, its blocker's left-first signal; fewer where one session watches a node twice),
/// plus the holder's own-node watch (ours: the loss monitor; the peer has none); the
/// observer sets none.
pub fn watches(waiters: usize, ours: usize) -> Target {
    let most = 3 * waiters + 1;
    Target::new(format!("ours ≤ {most}"), ours <= most)
}

/// On the wire, uncontended: a cycle's p50 at most 0.72 × the peer's (two round trips
/// against the peer's three or more).
pub fn wire_uncontended(ratio: f64) -> Target {
    Target::new("≤ 0.72", ratio <= 0.72)
}

/// On the wire, contended: at least 1.3 × the peer's acquisitions per second.
pub fn wire_contended(ratio: f64) -> Target {
    Target::new("≥ 1.3", ratio >= 1.3)
}

/// On the wire, queue drain at 1,000 waiters: a hand-off costs at most 0.6 × the peer's.
pub fn wire_drain(waiters: usize, ratio: f64) -> Target {
    if waiters == 1000 {
        Target::new("≤ 0.6 × peer", ratio <= 0.6)
    } else {
        Target::default()
    }
}

/// Per-key locks, ours / the peer's acquisitions per second: on the wire, at least 1.4 ×
/// zookeeper-client's and 1.5 × Curator's on one session, 1.0 × on 8; on loopback at least
/// zookeeper-client's (Curator: no target).
pub fn per_key(curator: bool, wire: bool, sessions: usize, ratio: f64) -> Target {
    let least = match (wire, sessions, curator) {
        (true, 1, false) => 1.4,
        (true, 1, true) => 1.5,
        (true, _, _) | (false, _, false) => 1.0,
        (false, _, true) => return Target::default(),
    };
    Target::new(format!("≥ {least}"), ratio >= least)
}

/// Server transactions per acquisition: no more than the peer's.
pub fn transactions(ours: f64, peer: f64) -> Target {
    Target::new("≤ peer", ours <= peer + 0.05)
}

/// First touch (the key's path does not exist): an acquisition in at most three round
/// trips.
pub fn first_touch(round_trips: f64) -> Target {
    Target::new("≤ 3 round trips", round_trips <= 3.2)
}

/// A new `Mutex` per acquisition costs no more than one kept per key, within noise (5 %).
pub fn new_value(ratio: f64) -> Target {
    Target::new("≤ 1.05 × reused", ratio <= 1.05)
}
