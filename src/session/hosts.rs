//! The connect string, read once: its hosts, each with its port and whether it is reached
//! over TLS. The dialer reads it when a session is built; the probe and `TCP_NODELAY`
//! (`nodelay`) use what it read.

use std::fmt;

use crate::error::Error;

/// A host of the connect string, and whether it is reached over TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Host {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) tls: bool,
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.port),
            false => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// The hosts of a connect string (`host:port,tcp+tls://host:port/chroot`), each over TLS
/// unless its scheme says otherwise when `secure`; a host without a port has port 2181.
///
/// # Errors
/// What is wrong with the first entry that cannot be read: no host, a port that is not a
/// number from 1 to 65535, an unclosed `[`, a chroot after another host than the last.
pub(super) fn parse(connect: &str, secure: bool) -> Result<Vec<Host>, String> {
    let entries: Vec<&str> = connect.split(',').collect();
    let last = entries.len() - 1;
    entries
        .iter()
        .enumerate()
        .map(|(n, entry)| {
            host(entry.trim(), n == last, secure).map_err(|wrong| format!("{entry:?}: {wrong}"))
        })
        .collect()
}

/// One entry; `last`: the chroot may follow it.
fn host(entry: &str, last: bool, secure: bool) -> Result<Host, &'static str> {
    let (tls, address) = match entry {
        e if e.starts_with("tcp+tls://") => (true, &e["tcp+tls://".len()..]),
        e if e.starts_with("tcp://") => (false, &e["tcp://".len()..]),
        e => (secure, e),
    };
    let address = match (address.split_once('/'), last) {
        (None, _) => address,
        (Some((address, _chroot)), true) => address,
        (Some(_), false) => return Err("a chroot may only follow the last host"),
    };
    let (host, port) = split_port(address)?;
    Ok(Host {
        host: host.to_owned(),
        port,
        tls,
    })
}

/// `host:port`, `[v6]:port`, `[v6]` or `host` (port 2181).
fn split_port(address: &str) -> Result<(&str, u16), &'static str> {
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
        None => Ok((host, 2181)),
        Some("") => Err("no port after ':'"),
        Some(port) => match port.parse::<u16>() {
            Ok(port @ 1..) => Ok((host, port)),
            _ => Err("the port must be a number from 1 to 65535"),
        },
    }
}

/// The error for a connect string `hosts` that cannot be read, saying why.
pub(super) fn invalid_hosts(hosts: &str, reason: &str) -> Error {
    Error::InvalidConnectString {
        hosts: hosts.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(host: &str, port: u16, tls: bool) -> Host {
        Host {
            host: host.into(),
            port,
            tls,
        }
    }

    #[test]
    fn reads_the_hosts_of_a_connect_string() {
        assert_eq!(
            parse("a:1,tcp://b:2,tcp+tls://c/x/y", true),
            Ok(vec![
                server("a", 1, true),
                server("b", 2, false),
                server("c", 2181, true)
            ])
        );
        assert_eq!(parse("[::1]:7", false), Ok(vec![server("::1", 7, false)]));
        assert_eq!(parse("[::1]", false), Ok(vec![server("::1", 2181, false)]));
        assert_eq!(server("::1", 7, false).to_string(), "[::1]:7");
    }

    #[test]
    fn refuses_what_cannot_be_read() {
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
            ("zk1/app,zk2", "last host"),
        ] {
            let wrong = parse(bad, false).expect_err(bad);
            assert!(wrong.contains(says), "{bad:?}: {wrong}");
        }
    }
}
