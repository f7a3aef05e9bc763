//! Durations on the command line: a number and a unit, `500ms`, `10s`, `2m`, `1h`, `1.5s`.
//!
//! A unit is required: a bare `5` is refused rather than guessed as seconds or
//! milliseconds. Every duration is at most [`MAX`], 24 hours: more is never meant (to wait
//! without bound, leave `--timeout` out), and it keeps every duration far from what
//! ZooKeeper and the clocks can hold (a session timeout is an `i32` of milliseconds on
//! the wire, about 596 hours; servers grant at most their `maxSessionTimeout`).

use std::time::Duration;

/// The longest duration accepted.
pub const MAX: Duration = Duration::from_secs(24 * 3600);

/// Units accepted after the number, with their length in seconds.
const UNITS: [(&str, f64); 4] = [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)];

/// Parses `text` (for clap's `value_parser`).
///
/// # Errors
/// A message naming the accepted form if `text` is not a non-negative number followed by
/// one of `ms`, `s`, `m`, `h`, or is longer than [`MAX`].
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
    let too_long = || format!("{text:?} is too long: at most 24h");
    match Duration::try_from_secs_f64(number * seconds_per_unit) {
        Ok(duration) if duration <= MAX => Ok(duration),
        Ok(_) => Err(too_long()),
        Err(_) if number.is_finite() => Err(too_long()),
        Err(_) => Err(expected()),
    }
}

/// As [`parse`], refusing 0 too: for the session and connect timeouts (the client takes a
/// session timeout of 0 for its default).
///
/// # Errors
/// As [`parse`], or a message saying that it must be more than 0.
pub fn positive(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        Duration::ZERO => Err(format!("{text:?} is too short: more than 0s")),
        duration => Ok(duration),
    }
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
        assert_eq!(parse("24h"), Ok(MAX));
        assert_eq!(parse("1440m"), Ok(MAX));
    }

    #[test]
    fn too_long() {
        for text in [
            "24.001h",
            "1441m",
            "86400.001s",
            "597h",
            "3000000000000000h",
            "1e400",
        ] {
            match parse(text) {
                Err(message) if text == "1e400" => assert!(message.contains("not a duration")),
                Err(message) => assert!(message.contains("at most 24h"), "{text}: {message}"),
                Ok(duration) => panic!("{text:?} was accepted as {duration:?}"),
            }
        }
        assert!(parse(&format!("{}h", "9".repeat(400))).is_err());
    }

    #[test]
    fn positive_refuses_zero() {
        assert_eq!(positive("1ms"), Ok(Duration::from_millis(1)));
        for zero in ["0s", "0ms", "0.0h"] {
            assert!(positive(zero).is_err_and(|message| message.contains("more than 0s")));
        }
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
