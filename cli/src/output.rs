//! What zk-recipes prints on stdout, for `observe`, `status` and `members`: one line at a
//! time, node data quoted where it could forge a line.
//!
//! * **Quoting.** Ids, data, node names and paths are anyone's to write. In a text line,
//!   one that is empty or holds anything but printable characters (a control character, an
//!   escape, a bidirectional override), whitespace, or one of `,` `;` `=` `"` `\` is shown
//!   quoted with Rust's escapes ([`shown`]): `"a\n/x: leader b"`, `"web 1"`. So no text
//!   can forge a line, an entry of a list or a `ID=DATA` pair, nor reach the terminal as a
//!   control sequence. JSON lines carry the text as it is (JSON escapes it).

use std::borrow::Cow;

/// `text` as printed in a text line: as it is if it can neither forge a line nor an entry
/// of one, else quoted, with escapes.
pub fn shown(text: &str) -> Cow<'_, str> {
    let plain = |c: char| {
        c.escape_debug().len() == 1
            && !c.is_whitespace()
            && !matches!(c, ',' | ';' | '=' | '"' | '\\')
    };
    match !text.is_empty() && text.chars().all(plain) {
        true => Cow::Borrowed(text),
        false => Cow::Owned(format!("{text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_could_forge_a_line_or_an_entry_is_quoted() {
        for plain in ["web-1", "10.0.0.1:80", "host/17", "ünïcødé✓", "/g/x"] {
            assert_eq!(shown(plain), plain);
        }
        for (text, quoted) in [
            ("", r#""""#),
            ("web 1", r#""web 1""#),
            ("a=b", r#""a=b""#),
            ("1.2.3.4\nmembers: x=9", r#""1.2.3.4\nmembers: x=9""#),
            ("\u{1b}[31mred", r#""\u{1b}[31mred""#),
            ("nul\0", r#""nul\0""#),
            ("b, c; d", r#""b, c; d""#),
            ("x\u{202e}y", r#""x\u{202e}y""#),
            ("no\u{a0}break", r#""no\u{a0}break""#),
        ] {
            assert_eq!(shown(text), quoted, "{text:?}");
        }
    }
}
