//! Dialing the ensemble: one new session within the connection timeout, with the session's
//! credentials and TLS settings. Used for the first session and for every new session
//! after expiry.
//!
//! A dial is a series of *rounds*. In a round the client tries every host once
//! (zookeeper-client's `fail_eagerly`) and the round fails as soon as every host failed;
//! rounds repeat with back-off (100 ms, doubling to 1 s) until a session is made or the
//! connection timeout has passed. Left to itself the client would cycle through the hosts
//! until its own deadline and then say only "timeout"; one round at a time, the dialer
//! sees each failure and can look into it. Repeating rounds keeps a single virtual IP in
//! front of the ensemble usable (one round is then one attempt, and the next may reach
//! another server), which `fail_eagerly` alone would not.
//!
//! After the first failed round every host is looked at once (see `probe`): when every
//! host refused the TLS settings (an untrusted certificate, a missing client certificate,
//! a plaintext client on a TLS port or the reverse), retrying cannot help, and the dial
//! fails at once with [`Error::Tls`] (after expiry the keeper dials again on it: see
//! `keeper::lasting`). Otherwise it goes on, and if the connection timeout
//! passes, fails with [`Error::Unreachable`], whose reason tells what each host did.
//! Refused SASL credentials end the dial at once with [`Error::AuthFailed`].
//!
//! A server without SASL answers the SASL exchange without authenticating anyone, and
//! the session would go on unauthenticated. So when SASL is asked for, every new session
//! is checked with `whoami` (ZooKeeper 3.7 and later): unless the servers name the SASL
//! user among the session's identities, the dial fails with [`Error::AuthFailed`].

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, debug_span, Instrument};
use zookeeper_client::{Client, Connector};

use super::hosts::invalid_hosts;
use super::hosts::{self, Host};
use super::probe::{self, Finding, Transport};
use crate::error::{outcome_unknown, Error, Result};

/// The pause after the first failed round; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Everything needed to make a session, checked once.
#[derive(Clone)]
pub(crate) struct Dialer {
    /// With the credentials, TLS and `fail_eagerly`; it never shows in `Debug`.
    connector: Connector,
    transport: Transport,
    /// Whether plain `host:port` entries are reached over TLS.
    secure: bool,
    /// The hosts of the connect string, read once.
    hosts: Arc<[Host]>,
    connection_timeout: Duration,
    /// The reason of an [`Error::AuthFailed`].
    refused: String,
    /// The SASL user the servers must confirm, if SASL is asked for.
    sasl_user: Option<String>,
}

impl fmt::Debug for Dialer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dialer")
            .field("tls", &self.secure)
            .field("connection_timeout", &self.connection_timeout)
            .finish_non_exhaustive()
    }
}

impl Dialer {
    /// A dialer for the connect string `target` with `connector` (credentials and TLS
    /// already applied); reads the connect string.
    ///
    /// # Notable errors
    /// * [`Error::InvalidConnectString`] if `target` cannot be read; nothing was sent.
    pub(super) fn new(
        target: &str,
        connector: Connector,
        transport: Transport,
        connection_timeout: Duration,
        refused: String,
        sasl_user: Option<String>,
    ) -> Result<Dialer> {
        let secure = !matches!(transport, Transport::Plain);
        let hosts =
            hosts::parse(target, secure).map_err(|reason| invalid_hosts(target, &reason))?;
        Ok(Dialer {
            connector: connector.with_fail_eagerly(),
            transport,
            secure,
            hosts: hosts.into(),
            connection_timeout,
            refused,
            sasl_user,
        })
    }

    /// The hosts of the connect string.
    pub(super) fn hosts(&self) -> Arc<[Host]> {
        self.hosts.clone()
    }

    /// Makes a new session on `target` (the connect string with its chroot).
    ///
    /// # Notable errors
    /// * [`Error::InvalidConnectString`] if the client cannot parse `target`.
    /// * [`Error::AuthFailed`] if the servers refused the SASL credentials, or did not
    ///   authenticate the session with them (no SASL on the servers).
    /// * [`Error::Tls`] if every host refused the TLS settings.
    /// * [`Error::Unreachable`] if no session was made within the connection timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped dial leaves no session behind (a round under way runs to its
    /// end by itself, and the session it made, if any, is closed at once).
    pub(super) async fn dial(&self, target: &str) -> Result<Client> {
        let deadline = Instant::now() + self.connection_timeout;
        let mut pause = FIRST_PAUSE;
        let mut findings = None;
        for round in 1.. {
            let attempt = async {
                let client = self.round(target).await?;
                self.confirm(target, client).await
            };
            let attempt = attempt.instrument(debug_span!("zk.connect.round", round));
            let failed = match tokio::time::timeout_at(deadline.into(), attempt).await {
                Err(_) => break,
                Ok(Ok(client)) => return Ok(client),
                Ok(Err(Refusal::Zk(err))) => self.fatal(target, err)?,
                Ok(Err(Refusal::Final(err))) => return Err(err),
            };
            debug!(err = %failed, round, "no session in this round");
            if findings.is_none() {
                findings = Some(self.look(target, deadline).await?);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
        Err(Error::Unreachable {
            hosts: target.to_owned(),
            reason: timed_out(self.connection_timeout, self.secure, findings.as_deref()),
        })
    }

    /// One round: every host tried once.
    ///
    /// The round runs as a task of its own, to its end even if the dial is dropped (or runs
    /// out of time): a connect cut off between its request and the servers' answer would
    /// leave the session they made on them until it expired, unknown to anyone, while a
    /// client that made it is dropped with the task's output and its session closed.
    async fn round(&self, target: &str) -> std::result::Result<Client, zookeeper_client::Error> {
        let connector = self.connector.clone();
        let (target, secure) = (target.to_owned(), self.secure);
        let round = tokio::spawn(async move {
            match secure {
                #[cfg(feature = "tls")]
                true => connector.secure_connect(&target).await,
                _ => connector.connect(&target).await,
            }
        });
        // A round that panicked or whose runtime shut down made no session.
        round
            .await
            .unwrap_or(Err(zookeeper_client::Error::ClientClosed))
    }

    /// `client` back if the servers authenticated its session as the SASL user asked for (or
    /// none was); a failed round if the outcome is unknown.
    async fn confirm(&self, target: &str, client: Client) -> Result<Client, Refusal> {
        let Some(user) = &self.sasl_user else {
            return Ok(client);
        };
        let users = match client.list_auth_users().await {
            Ok(users) => users,
            Err(err) if outcome_unknown(&err) => return Err(Refusal::Zk(err)),
            Err(err) => {
                return Err(self.refusal(target, format!("whoami, to confirm it, failed: {err}")))
            }
        };
        debug!(identities = ?users, "the servers authenticated the session as");
        match users
            .iter()
            .any(|id| id.scheme() == "sasl" && id.user() == user)
        {
            true => Ok(client),
            false => Err(self.refusal(
                target,
                "the servers did not authenticate the session (is SASL enabled on them?)".into(),
            )),
        }
    }

    /// An [`Error::AuthFailed`] that ends the dial: authentication was not done, `why`.
    fn refusal(&self, target: &str, why: String) -> Refusal {
        Refusal::Final(Error::AuthFailed {
            hosts: target.to_owned(),
            reason: format!("{}: {why}", self.refused),
        })
    }

    /// The error that ends the dial at once, if `err` is one; else `err` back.
    fn fatal(&self, target: &str, err: zookeeper_client::Error) -> Result<zookeeper_client::Error> {
        use zookeeper_client::Error as Zk;
        match err {
            Zk::BadArguments(reason) => Err(Error::InvalidConnectString {
                hosts: target.to_owned(),
                reason: reason.to_string(),
            }),
            Zk::AuthFailed => Err(Error::AuthFailed {
                hosts: target.to_owned(),
                reason: self.refused.clone(),
            }),
            other => Ok(other),
        }
    }

    /// Looks at every host; fails with [`Error::Tls`] if each one refused the TLS settings.
    async fn look(&self, target: &str, deadline: Instant) -> Result<Vec<(Host, Finding)>> {
        let limit = deadline.saturating_duration_since(Instant::now());
        let findings = probe::look_at_all(self.hosts.to_vec(), &self.transport, limit)
            .instrument(debug_span!("zk.connect.probe"))
            .await;
        for (host, finding) in &findings {
            debug!(%host, %finding, "looked at a host that gave no session");
        }
        let refused =
            !findings.is_empty() && findings.iter().all(|(_, finding)| finding.is_tls_refusal());
        match refused {
            true => Err(Error::Tls {
                hosts: target.to_owned(),
                reason: describe(&findings),
            }),
            false => Ok(findings),
        }
    }
}

/// Why a round gave no session: the client's error, or one that ends the dial.
enum Refusal {
    Zk(zookeeper_client::Error),
    Final(Error),
}

impl From<zookeeper_client::Error> for Refusal {
    fn from(err: zookeeper_client::Error) -> Refusal {
        Refusal::Zk(err)
    }
}

/// The reason of an [`Error::Unreachable`] after the connection timeout.
fn timed_out(timeout: Duration, secure: bool, findings: Option<&[(Host, Finding)]>) -> String {
    let over = if secure { "TLS" } else { "plaintext" };
    let mut reason = format!("no session within {timeout:?} over {over}");
    if let Some(findings) = findings {
        let _ = write!(reason, "; {}", describe(findings));
    }
    reason
}

/// `host: finding; host: finding`.
fn describe(findings: &[(Host, Finding)]) -> String {
    let described: Vec<String> = findings
        .iter()
        .map(|(host, finding)| format!("{host}: {finding}"))
        .collect();
    described.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_each_host() {
        let findings = [
            (
                Host {
                    host: "a".into(),
                    port: 1,
                    tls: true,
                },
                Finding::NotPlaintext,
            ),
            (
                Host {
                    host: "b".into(),
                    port: 2,
                    tls: true,
                },
                Finding::Silent,
            ),
        ];
        let reason = timed_out(Duration::from_secs(1), true, Some(&findings));
        assert!(
            reason.starts_with("no session within 1s over TLS; a:1: "),
            "{reason}"
        );
        assert!(reason.contains("; b:2: connected"), "{reason}");
    }
}
