//! How many repetitions a benchmark runs, from its command line.

/// The repetitions asked for on the command line: `--reps N`, `--quick` (1), else 3.
pub fn reps_from_args() -> usize {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--reps") {
        Some(i) => args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(3),
        None if args.iter().any(|a| a == "--quick") => 1,
        None => 3,
    }
}
