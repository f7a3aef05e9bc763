//! An exhaustive explorer: every state reachable from the initial one is visited once
//! (states are told apart by a 64-bit hash of the whole state: a collision, at a few
//! million states, has odds of about one in a million, and would only skip a state), each
//! is checked, and the first violation found comes with the trace to it (breadth first:
//! a shortest one).

use std::collections::hash_map::{DefaultHasher, Entry};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{Hash, Hasher};

/// A system to explore.
pub(super) trait Model {
    type State: Clone + Hash;
    type Step: Copy + PartialEq + fmt::Debug;

    fn init(&self) -> Self::State;
    /// Every step that can be taken from `state`, with the state it leads to.
    fn successors(&self, state: &Self::State) -> Vec<(Self::Step, Self::State)>;
    /// Whether `step` need not happen (a fault): a state whose only steps are optional is
    /// quiescent.
    fn optional(step: Self::Step) -> bool;
    /// Whether `state` keeps the invariants.
    fn check(&self, state: &Self::State, quiescent: bool) -> Result<(), String>;
    /// A line of a trace: `step`, taken from `before`, and where it led.
    fn describe(&self, step: Self::Step, before: &Self::State, after: &Self::State) -> String;
}

/// What an exploration found.
#[derive(Debug)]
pub(super) struct Outcome {
    /// How many distinct states were reached.
    pub(super) states: usize,
    /// Whether every reachable state was visited (not cut short at the limit or a
    /// violation).
    pub(super) complete: bool,
    pub(super) violation: Option<Violation>,
}

/// A broken invariant and the steps that break it.
#[derive(Debug)]
pub(super) struct Violation {
    pub(super) broken: String,
    pub(super) trace: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}, after {} steps:", self.broken, self.trace.len())?;
        for (i, line) in self.trace.iter().enumerate() {
            writeln!(f, "  {:>2}. {line}", i + 1)?;
        }
        Ok(())
    }
}

fn fingerprint(state: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    state.hash(&mut hasher);
    hasher.finish()
}

/// In which order states are visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    /// Breadth first: a violation comes with a shortest trace.
    Breadth,
    /// Depth first: a deep violation is found sooner, with a longer trace.
    Depth,
}

/// Explores every state of `model` reachable from its initial one, up to about `limit`
/// states, in `order`.
pub(super) fn explore<M: Model>(model: &M, limit: usize, order: Order) -> Outcome {
    let init = model.init();
    let start = fingerprint(&init);
    // How each state was first reached: its predecessor and the step from it.
    let mut seen: HashMap<u64, Option<(u64, M::Step)>> = HashMap::new();
    seen.insert(start, None);
    let mut queue = VecDeque::from([(init, start)]);
    let next = |queue: &mut VecDeque<_>| match order {
        Order::Breadth => queue.pop_front(),
        Order::Depth => queue.pop_back(),
    };
    while let Some((state, id)) = next(&mut queue) {
        let next = model.successors(&state);
        let quiescent = next.iter().all(|(step, _)| M::optional(*step));
        if let Err(broken) = model.check(&state, quiescent) {
            let trace = trace(model, &seen, id);
            return Outcome {
                states: seen.len(),
                complete: false,
                violation: Some(Violation { broken, trace }),
            };
        }
        let mut next = next;
        if order == Order::Depth {
            // The first step first.
            next.reverse();
        }
        for (step, state) in next {
            let next_id = fingerprint(&state);
            if let Entry::Vacant(entry) = seen.entry(next_id) {
                entry.insert(Some((id, step)));
                queue.push_back((state, next_id));
            }
        }
        if seen.len() > limit {
            return Outcome {
                states: seen.len(),
                complete: false,
                violation: None,
            };
        }
    }
    Outcome {
        states: seen.len(),
        complete: true,
        violation: None,
    }
}

/// The steps to the state `id`, replayed from the initial state and described.
fn trace<M: Model>(model: &M, seen: &HashMap<u64, Option<(u64, M::Step)>>, id: u64) -> Vec<String> {
    let mut steps = Vec::new();
    let mut at = id;
    while let Some(Some((before, step))) = seen.get(&at) {
        steps.push(*step);
        at = *before;
    }
    steps.reverse();
    let mut state = model.init();
    let mut lines = Vec::with_capacity(steps.len());
    for step in steps {
        let Some((_, next)) = model
            .successors(&state)
            .into_iter()
            .find(|(s, _)| *s == step)
        else {
            lines.push(format!("{step:?} (cannot be replayed)"));
            break;
        };
        lines.push(model.describe(step, &state, &next));
        state = next;
    }
    lines
}
