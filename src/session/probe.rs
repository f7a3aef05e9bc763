//! Why no session could be made: each host looked at once, after the client failed.
//!
//! zookeeper-client does not say why a host failed (it logs it at debug level and reports
//! only that no host was left), so a failed connect alone cannot tell a server that is down
//! from one that refuses the session's TLS. After a failed round the dialer therefore looks
//! at every host itself, once and concurrently, within a short bound: it opens a TCP
//! connection, runs the TLS handshake with the session's own settings if TLS is used, and
//! asks for a four-letter word (`isro`), which any ZooKeeper server answers, serving or
//! not, without opening a session. What it sees is a [`Finding`] per host.
//!
//! A plaintext ZooKeeper port answers the four letters at once; a TLS port says nothing
//! until it has a whole TLS record header (five bytes), so a silent host is sent one more
//! byte: a TLS port then closes the connection, a paused server stays silent.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use tokio::task::JoinSet;

use super::hosts::Host;

/// How long one look at a host may take at most (less if the connect's time is nearly
/// over).
const LOOK_LIMIT: Duration = Duration::from_secs(2);

/// How long a plaintext port is given to answer the four letters before it is sent the
/// fifth byte that makes a TLS port close.
const ANSWER_WAIT: Duration = Duration::from_millis(300);

/// What one look at a host showed.
#[derive(Clone, Debug, PartialEq, Eq)]
// Without TLS, only the plaintext findings occur.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(super) enum Finding {
    /// The host name did not resolve.
    Unresolved(String),
    /// No TCP connection could be opened.
    NoConnection(String),
    /// The transport works (TLS included) and the server answered: what refused the session
    /// lies beyond it.
    Answers,
    /// Connected, but nothing came back in time (a paused or overloaded server).
    Silent,
    /// Connected, and the server closed the connection without a word (for example when
    /// this client has too many connections to it).
    Closed,
    /// The server's certificate was refused by the given CA (or does not name the host).
    Untrusted(String),
    /// The server ended the TLS handshake with an alert.
    Alert {
        /// The alert, as rustls names it.
        alert: String,
        /// Whether a client certificate was offered.
        identity: bool,
    },
    /// The server does not speak TLS on that port: it closed the connection during the
    /// handshake, or answered with something else.
    NotTls(String),
    /// A plaintext request was answered with TLS, or with a close: a TLS-only port.
    NotPlaintext,
}

impl Finding {
    /// Whether retrying cannot help: the host refused the TLS settings of the session.
    pub(super) fn is_tls_refusal(&self) -> bool {
        matches!(
            self,
            Finding::Untrusted(_)
                | Finding::Alert { .. }
                | Finding::NotTls(_)
                | Finding::NotPlaintext
        )
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Unresolved(err) => write!(f, "host name not resolved ({err})"),
            Finding::NoConnection(err) => write!(f, "no TCP connection ({err})"),
            Finding::Answers => f.write_str("reachable and answering, but refused the session"),
            Finding::Silent => f.write_str("connected, but the server did not answer"),
            Finding::Closed => f.write_str("connected, but the server closed the connection"),
            Finding::Untrusted(err) => write!(
                f,
                "TLS handshake failed: the server's certificate is not trusted by the CA \
                 given to tls_ca_pem ({err})"
            ),
            Finding::Alert { alert, identity } => {
                write!(f, "the server refused the TLS handshake (alert {alert})")?;
                match identity {
                    false => {
                        f.write_str(": it may require a client certificate (tls_identity_pem)")
                    }
                    true => f.write_str(": it may not trust the client certificate"),
                }
            }
            Finding::NotTls(what) => write!(f, "not a TLS port ({what})"),
            Finding::NotPlaintext => f.write_str(
                "closed the connection on a plaintext request: a TLS port \
                 (use the `tls` feature and tls_ca_pem)",
            ),
        }
    }
}

/// How a host is looked at: in plaintext, or with this TLS configuration.
#[derive(Clone)]
pub(super) enum Transport {
    Plain,
    #[cfg(feature = "tls")]
    Tls(Box<super::tls::Tls>),
}

/// Looks at every host at once, within `limit` (and [`LOOK_LIMIT`]); a host not done by
/// then is [`Finding::Silent`].
pub(super) async fn look_at_all(
    hosts: Vec<Host>,
    transport: &Transport,
    limit: Duration,
) -> Vec<(Host, Finding)> {
    let limit = limit.min(LOOK_LIMIT);
    let mut looks = JoinSet::new();
    for (i, host) in hosts.iter().enumerate() {
        let (host, transport) = (host.clone(), transport.clone());
        looks.spawn_blocking(move || (i, look(&host, &transport, limit)));
    }
    let mut findings = vec![Finding::Silent; hosts.len()];
    let all = async {
        while let Some(done) = looks.join_next().await {
            if let Ok((i, finding)) = done {
                findings[i] = finding;
            }
        }
    };
    // Blocking looks that overrun end by their sockets' own timeouts.
    let _ = tokio::time::timeout(limit + Duration::from_millis(100), all).await;
    hosts.into_iter().zip(findings).collect()
}

/// One host, blocking, each socket operation bounded by `limit`.
fn look(host: &Host, transport: &Transport, limit: Duration) -> Finding {
    let addresses: Vec<SocketAddr> = match (host.host.as_str(), host.port).to_socket_addrs() {
        Ok(addresses) => addresses.collect(),
        Err(err) => return Finding::Unresolved(err.to_string()),
    };
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    let stream = addresses.iter().find_map(|address| {
        TcpStream::connect_timeout(address, limit)
            .map_err(|err| last = err)
            .ok()
    });
    let Some(stream) = stream else {
        return Finding::NoConnection(last.to_string());
    };
    if stream.set_read_timeout(Some(limit)).is_err()
        || stream.set_write_timeout(Some(limit)).is_err()
    {
        return Finding::Silent;
    }
    match (host.tls, transport) {
        #[cfg(feature = "tls")]
        (true, Transport::Tls(tls)) => tls_look::look(stream, &host.host, tls),
        _ => look_plain(stream, limit),
    }
}

fn look_plain(mut stream: TcpStream, limit: Duration) -> Finding {
    if stream.write_all(b"isro").is_err() {
        return Finding::Silent;
    }
    let wait = ANSWER_WAIT.min(limit);
    if stream.set_read_timeout(Some(wait)).is_err() {
        return Finding::Silent;
    }
    let mut answer = [0_u8; 64];
    match stream.read(&mut answer) {
        Ok(0) => return Finding::Closed,
        // A TLS record (alert or handshake) in answer to plaintext.
        Ok(_) if matches!(answer[0], 0x15 | 0x16) => return Finding::NotPlaintext,
        Ok(_) => return Finding::Answers,
        Err(err) if timed_out(&err) => {}
        Err(_) => return Finding::Closed,
    }
    // Silent so far: one more byte completes a TLS record header.
    if stream.write_all(b"\n").is_err() || stream.set_read_timeout(Some(limit)).is_err() {
        return Finding::NotPlaintext;
    }
    match stream.read(&mut answer) {
        Ok(0) => Finding::NotPlaintext,
        Ok(_) if matches!(answer[0], 0x15 | 0x16) => Finding::NotPlaintext,
        Ok(_) => Finding::Answers,
        Err(err) if timed_out(&err) => Finding::Silent,
        Err(_) => Finding::NotPlaintext,
    }
}

fn timed_out(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(feature = "tls")]
mod tls_look {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use rustls::pki_types::ServerName;
    use rustls::ClientConnection;

    use super::{timed_out, Finding};
    use crate::session::tls::Tls;

    /// The TLS handshake, then the four letters over TLS.
    pub(super) fn look(mut stream: TcpStream, host: &str, tls: &Tls) -> Finding {
        let Ok(name) = ServerName::try_from(host.to_owned()) else {
            return Finding::Untrusted(format!("{host:?} is not a valid TLS server name"));
        };
        let mut connection = match ClientConnection::new(tls.config.clone(), name) {
            Ok(connection) => connection,
            Err(err) => return Finding::NotTls(err.to_string()),
        };
        let mut channel = rustls::Stream::new(&mut connection, &mut stream);
        if let Err(err) = channel.write_all(b"isro").and_then(|()| channel.flush()) {
            return failure(&err, tls.has_identity);
        }
        let mut answer = [0_u8; 64];
        match channel.read(&mut answer) {
            Ok(0) => Finding::NotTls("closed without answering".into()),
            Ok(_) => Finding::Answers,
            Err(err) => failure(&err, tls.has_identity),
        }
    }

    /// What an I/O error of the TLS channel says about the host.
    fn failure(err: &std::io::Error, identity: bool) -> Finding {
        if timed_out(err) {
            return Finding::Silent;
        }
        match err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>())
        {
            Some(rustls::Error::InvalidCertificate(why)) => Finding::Untrusted(format!("{why:?}")),
            Some(rustls::Error::AlertReceived(alert)) => Finding::Alert {
                alert: format!("{alert:?}"),
                identity,
            },
            Some(other) => Finding::NotTls(other.to_string()),
            None => Finding::NotTls(format!("{err}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tls_findings_are_refusals() {
        assert!(Finding::NotPlaintext.is_tls_refusal());
        assert!(!Finding::NoConnection("refused".into()).is_tls_refusal());
        assert!(!Finding::Silent.is_tls_refusal());
        assert!(!Finding::Closed.is_tls_refusal());
        assert!(!Finding::Answers.is_tls_refusal());
    }

    #[test]
    fn a_closed_port_is_no_connection() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let host = Host {
            host: "127.0.0.1".into(),
            port,
            tls: false,
        };
        let finding = look(&host, &Transport::Plain, Duration::from_secs(1));
        assert!(matches!(finding, Finding::NoConnection(_)), "{finding:?}");
    }
}
