//! Durations on the command line: a number and a unit, `500ms`, `10s`, `2m`, `1h`, `1.5s`.
//!
//! A unit is required: a bare `5` is refused rather than guessed as seconds or
//! milliseconds.

use std::time::Duration;

/// Units accepted after the number, with their length in seconds.
const UNITS: [(&str, f64); 4] = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)];

/// Parses `text` (for clap's `value_parser`).
///
/// # Errors
/// A message naming the accepted form if `text` is not a non-negative number followed by
/// one of `ms`, `s`, `m`, `h`, or is too large for a [`Duration`].
pub fn parse(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let expected = || format!("{text:?} is not a duration like 500ms, 10s, 2m or 1h");
    let seconds_per_unit = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, seconds)| *seconds)
        .ok_or_else(expected)?;
    let number: f64 = number.parse().map_err(|_| expected())?;
    Duration::try_from_secs_f64(number * seconds_per_unit).map_err(|_| expected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refused() {
        for text in [
            "",
            "5",
            "s",
            "10 s",
            "-1s",
            "1.2.3s",
            "5d",
            "1e3s",
            "99999999999999999999h",
        ] {
            assert!(parse(text).is_err(), "{text:?} was accepted");
        }
    }
}
