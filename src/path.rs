//! Znode path validation and joining.
//!
//! A recipe root must be an absolute ZooKeeper path that the server would accept: it starts
//! with `/`, has no empty, `.` or `..` component, no trailing `/`, and no character ZooKeeper
//! rejects (NUL, control characters, the surrogate and private-use range, `U+FFF0`–`U+FFFF`,
//! and every character above `U+FFFF`: the server checks Java's UTF-16 code units, in which
//! such a character is a surrogate pair).
//! The root `/` itself and the reserved `/zookeeper` subtree are refused as recipe roots,
//! and so is a root longer than [`MAX_LEN`] bytes (a request carrying it would come near the
//! servers' 1 MiB request limit, and they drop a connection that exceeds it). Validation
//! happens before any request is sent.

use crate::error::{Error, Result};

/// The longest recipe root accepted, in bytes.
pub(crate) const MAX_LEN: usize = 32 * 1024;

/// Checks `path` as every recipe's constructor ([`Mutex::new`](crate::Mutex::new),
/// [`LeaderElection::new`](crate::LeaderElection::new), …) does, without a session: a
/// program can refuse a bad path before it connects. Nothing is sent.
///
/// # Notable errors
/// * [`Error::InvalidPath`] if `path` is not absolute, is `/` or lies in `/zookeeper`, ends
///   with `/`, has an empty, `.` or `..` component, holds a character ZooKeeper rejects, or
///   is longer than 32 KiB; its reason says which.
pub fn check_path(path: &str) -> Result<()> {
    validate_root(path).map(|_| ())
}

/// Checks `name` as one node's name under the recipe root `parent` (a per-key lock's key,
/// a group member's id: see [`check_name`](crate::check_name)).
///
/// # Notable errors
/// * [`Error::InvalidPath`] if `parent` is no recipe root (see [`check_path`]), or `name`
///   is empty, `.` or `..`, holds a `/` or a character ZooKeeper rejects, or makes the path
///   longer than 32 KiB; its reason says which.
pub(crate) fn check_name(parent: &str, name: &str) -> Result<()> {
    validate_root(parent)?;
    child(parent, name).map(|_| ())
}

/// Checks that `path` can be the root of a recipe; returns it unchanged.
pub(crate) fn validate_root(path: &str) -> Result<&str> {
    reason(path).map_or(Ok(path), |reason| {
        Err(Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })
    })
}

/// Why `path` cannot be a recipe root, if it cannot.
fn reason(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("path is empty");
    }
    if !path.starts_with('/') {
        return Some("path must be absolute (start with '/')");
    }
    if path.len() > MAX_LEN {
        return Some("path is longer than 32 KiB");
    }
    if path == "/" {
        return Some("the root node cannot be a recipe root");
    }
    if path.ends_with('/') {
        return Some("path must not end with '/'");
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Some("the /zookeeper subtree is reserved");
    }
    if let Some(c) = refused_character(path) {
        return Some(if c == '\0' {
            "path contains a NUL character"
        } else {
            "path contains a character ZooKeeper rejects"
        });
    }
    // Split on the byte: `/` is ASCII, never part of another character's encoding.
    path.as_bytes()[1..]
        .split(|&b| b == b'/')
        .find_map(component_reason)
}

/// The first character of `path` that ZooKeeper rejects, if any. Every path is checked as
/// every lock per key is made: an ASCII path (most) is read a byte at a time.
fn refused_character(path: &str) -> Option<char> {
    match path.is_ascii() {
        true => path.bytes().map(char::from).find(|&c| !allowed(c)),
        false => path.chars().find(|&c| !allowed(c)),
    }
}

fn component_reason(component: &[u8]) -> Option<&'static str> {
    match component {
        b"" => Some("path contains an empty component ('//')"),
        b"." | b".." => Some("path contains a relative component ('.' or '..')"),
        _ => None,
    }
}

/// The characters ZooKeeper's `PathUtils.validatePath` accepts. It refuses the UTF-16 code
/// units `U+0000`–`U+001F`, `U+007F`–`U+009F`, `U+D800`–`U+F8FF` and `U+FFF0`–`U+FFFF`; a
/// Rust `char` is never a lone surrogate, and one above `U+FFFF` is two surrogate units.
fn allowed(c: char) -> bool {
    !matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{e000}'..='\u{f8ff}'
        | '\u{fff0}'..)
}

/// `parent/child` for a validated root and a child name.
pub(crate) fn join(parent: &str, child: &str) -> String {
    let mut path = String::with_capacity(parent.len() + 1 + child.len());
    path.push_str(parent);
    path.push('/');
    path.push_str(child);
    path
}

/// The ancestors of a validated path, outermost first, without the root `/` and without
/// `path` itself: `/a/b/c` gives `/a`, then `/a/b`.
pub(crate) fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/')
        .skip(1)
        .map(move |(at, _)| &path[..at])
}

/// `parent/name` for a validated root, if `name` is one path component that makes a valid
/// path (a per-key lock's key, a group member's id).
pub(crate) fn child(parent: &str, name: &str) -> Result<String> {
    let path = join(parent, name);
    if name.contains('/') {
        return Err(Error::InvalidPath {
            path,
            reason: "the name contains '/': a name is one path component",
        });
    }
    validate_root(&path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(path: &str) -> &'static str {
        match validate_root(path) {
            Err(Error::InvalidPath { path: p, reason }) => {
                assert_eq!(p, path);
                reason
            }
            other => panic!("{path:?} was not rejected: {other:?}"),
        }
    }

    #[test]
    fn rejects_malformed_paths_with_their_reason() {
        assert_eq!(rejected(""), "path is empty");
        assert!(rejected("locks/a").contains("absolute"));
        assert!(rejected("/locks/").contains("end with '/'"));
        assert!(rejected("/locks//a").contains("empty component"));
        assert!(rejected("/locks/./a").contains("relative"));
        assert!(rejected("/locks/..").contains("relative"));
        assert!(rejected("/a\0b").contains("NUL"));
        assert!(rejected("/a\u{1}b").contains("rejects"));
        assert!(rejected("/a\u{7f}").contains("rejects"));
        assert!(rejected("/a\u{e000}").contains("rejects"));
        assert!(rejected("/a\u{fff5}").contains("rejects"));
        assert!(rejected("/a\u{f8ff}").contains("rejects"));
        assert!(rejected("/a\u{9f}").contains("rejects"));
        assert!(rejected("/a\u{ffff}").contains("rejects"));
        // Above U+FFFF: a surrogate pair for the server.
        assert!(rejected("/t/ünï/cødé/🔒").contains("rejects"));
        assert!(rejected("/a\u{10000}").contains("rejects"));
        assert!(rejected("/a\u{10ffff}").contains("rejects"));
        assert!(rejected("/").contains("root node"));
        assert!(rejected("/zookeeper").contains("reserved"));
        assert!(rejected("/zookeeper/quota").contains("reserved"));
        assert!(rejected(&format!("/{}", "a".repeat(MAX_LEN))).contains("longer"));
    }

    #[test]
    fn accepts_valid_paths() {
        for path in [
            "/a",
            "/locks/orders",
            "/locks/orders-2024_v1.x",
            "/a/b/c/d/e",
            "/..a/b..",
            "/.hidden",
            "/zookeeper2",
            "/ünïcødé/路径",
            "/a\u{a0}\u{d7ff}\u{f900}\u{ffef}",
            "/with space",
        ] {
            assert_eq!(validate_root(path).ok(), Some(path), "{path:?}");
        }
    }

    #[test]
    fn a_name_is_one_component_of_a_valid_path() {
        for name in ["a/b", "..", ".", "", "a\0b", "a\u{1}"] {
            assert!(
                matches!(check_name("/g", name), Err(Error::InvalidPath { .. })),
                "{name:?} was accepted"
            );
        }
        assert!(check_name("/g/", "a").is_err());
        assert!(check_name("/g", &"a".repeat(MAX_LEN)).is_err());
        assert!(check_name("/g", "web 1=x").is_ok());
    }

    #[test]
    fn joins() {
        assert_eq!(join("/a/b", "c"), "/a/b/c");
    }

    #[test]
    fn lists_ancestors_outermost_first() {
        let listed = |path| ancestors(path).collect::<Vec<_>>();
        assert_eq!(listed("/a/b/c"), ["/a", "/a/b"]);
        assert!(listed("/a").is_empty());
    }
}
