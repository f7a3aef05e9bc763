//! Arguments checked before connecting (clap's `value_parser`s): a malformed path or
//! connect string is refused at once with exit 64, also when no server can be reached,
//! rather than after a connect that may take `--connect-timeout`.
//!
//! These checks refuse only what the library or the client would refuse too (or, for a
//! connect string, what is surely a typo); the library checks everything again once
//! connected, and has the last word (e.g. on the characters a path may hold).

/// The longest path accepted, in bytes (the library's limit).
const MAX_PATH: usize = 32 * 1024;

/// A lock's, an election's or an observed path: absolute, without empty, `.` or `..`
/// components, a trailing `/` or control characters, neither `/` nor under `/zookeeper`.
///
/// # Errors
/// What is wrong with it, in a few words.
pub fn path(text: &str) -> Result<String, String> {
    let wrong = if !text.starts_with('/') {
        Some("a path must be absolute (start with '/')")
    } else if text.len() > MAX_PATH {
        Some("a path must not be longer than 32 KiB")
    } else if text.chars().any(char::is_control) {
        Some("a path must not contain control characters")
    } else if text == "/zookeeper" || text.starts_with("/zookeeper/") {
        Some("the /zookeeper subtree is reserved")
    } else if text == "/" {
        Some("the root node cannot be used")
    } else if text.ends_with('/') {
        Some("a path must not end with '/'")
    } else {
        text[1..].split('/').find_map(|part| match part {
            "" => Some("a path must not contain an empty component ('//')"),
            "." | ".." => Some("a path must not contain '.' or '..' components"),
            _ => None,
        })
    };
    match wrong {
        Some(wrong) => Err(wrong.to_owned()),
        None => Ok(text.to_owned()),
    }
}

/// A connect string, `host:port[,host:port...][/chroot]` (each host may be `[v6]` and
/// start with `tcp://` or `tcp+tls://`; a port left out is 2181): every host non-empty,
/// every port given after a `:` a number from 1 to 65535.
///
/// # Errors
/// Which host is wrong, and how.
pub fn hosts(text: &str) -> Result<String, String> {
    let entries: Vec<&str> = text.split(',').collect();
    for (n, entry) in entries.iter().enumerate() {
        let address = ["tcp://", "tcp+tls://"]
            .iter()
            .find_map(|scheme| entry.strip_prefix(scheme))
            .unwrap_or(entry);
        // The chroot follows the last host.
        let address = match n + 1 == entries.len() {
            true => address
                .split_once('/')
                .map_or(address, |(address, _)| address),
            false => address,
        };
        host(address).map_err(|wrong| format!("{entry:?}: {wrong}"))?;
    }
    Ok(text.to_owned())
}

/// One `host[:port]` or `[v6][:port]`.
fn host(address: &str) -> Result<(), &'static str> {
    let (host, port) = match address.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, rest)) => (
                host,
                Some(rest.strip_prefix(':').ok_or("no ':' after ']'")?),
            ),
            None => return Err("no ']' after '['"),
        },
        None => match address.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        },
    };
    if host.is_empty() {
        return Err("no host");
    }
    match port {
        None => Ok(()),
        Some("") => Err("no port after ':'"),
        Some(port) => match port.parse::<u16>() {
            Ok(1..) => Ok(()),
            _ => Err("the port must be a number from 1 to 65535"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for good in ["/a", "/locks/orders", "/a/b.c/..d", "/zookeeperish"] {
            assert_eq!(path(good).as_deref(), Ok(good));
        }
        for (bad, says) in [
            ("", "absolute"),
            ("a/b", "absolute"),
            ("/", "root"),
            ("/a/", "end with"),
            ("/a//b", "empty component"),
            ("/a/./b", "'.'"),
            ("/a/..", "'..'"),
            ("/a\nb", "control"),
            ("/a\u{85}b", "control"),
            ("/zookeeper", "reserved"),
            ("/zookeeper/quota", "reserved"),
        ] {
            let wrong = path(bad).expect_err(bad);
            assert!(wrong.contains(says), "{bad:?}: {wrong}");
        }
        assert!(path(&format!("/{}", "a".repeat(MAX_PATH))).is_err());
    }

    #[test]
    fn connect_strings() {
        for good in [
            "127.0.0.1:2181",
            "zk1:2181,zk2:2182,zk3/chroot/x",
            "[::1]:2181,[::1]",
            "tcp+tls://zk1:2281,tcp://zk2:2181/app",
            "zk1",
        ] {
            assert_eq!(hosts(good).as_deref(), Ok(good));
        }
        for (bad, says) in [
            ("", "no host"),
            ("127.0.0.1:", "no port"),
            ("zk1:2181,:2181", "no host"),
            ("zk1:0", "1 to 65535"),
            ("zk1:65536", "1 to 65535"),
            ("zk1:http", "1 to 65535"),
            ("[::1", "']'"),
            ("[::1]2181", "':'"),
            ("tcp://:2181/app", "no host"),
            ("/chroot", "no host"),
        ] {
            let wrong = hosts(bad).expect_err(bad);
            assert!(wrong.contains(says), "{bad:?}: {wrong}");
        }
    }
}
