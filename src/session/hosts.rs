//! The connect string, read once: its hosts, each with its port and whether it is reached
//! over TLS. The dialer reads it when a session is built; the probe and `TCP_NODELAY`
//! (`nodelay`) use what it read.

use std::fmt;

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
/// unless its scheme says otherwise when `secure`. Entries that cannot be read are left
/// out (the client refused them before this runs).
pub(super) fn parse(connect: &str, secure: bool) -> Vec<Host> {
    connect
        .split(',')
        .filter_map(|entry| {
            let (tls, rest) = match entry.trim() {
                e if e.starts_with("tcp+tls://") => (true, &e["tcp+tls://".len()..]),
                e if e.starts_with("tcp://") => (false, &e["tcp://".len()..]),
                e => (secure, e),
            };
            let address = rest.split('/').next().unwrap_or_default();
            let (host, port) = split_port(address)?;
            Some(Host {
                host: host.to_owned(),
                port,
                tls,
            })
        })
        .collect()
}

/// `host:port`, `[v6]:port`, or `host` (port 2181).
fn split_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = match address.strip_prefix('[') {
        Some(v6) => {
            let (host, rest) = v6.split_once(']')?;
            (host, rest.strip_prefix(':'))
        }
        None => match address.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        },
    };
    let port = port.map_or(Some(2181), |port| port.parse().ok())?;
    (!host.is_empty()).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(host: &str, port: u16, tls: bool) -> Host {
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
            [
                host("a", 1, true),
                host("b", 2, false),
                host("c", 2181, true)
            ]
        );
        assert_eq!(parse("[::1]:7", false), [host("::1", 7, false)]);
        assert_eq!(host("::1", 7, false).to_string(), "[::1]:7");
        assert!(parse("a:notaport", false).is_empty());
    }
}
