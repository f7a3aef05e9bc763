//! [`SessionBuilder`]: the settings of a [`Session`] and the connect that applies them.
//!
//! Every setting is checked when [`connect`](SessionBuilder::connect) is called, before
//! anything is sent: a bad connect string, chroot, user name, PEM, a timeout out of range,
//! or a creator-only ACL without an identity fail there with a clear error.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, info_span, Instrument};
use zookeeper_client::Client;

use super::credentials::{Credentials, Login, Secret};
use super::dialer::Dialer;
use super::hosts::invalid_hosts;
use super::nodelay::Servers;
use super::probe::Transport;
#[cfg(feature = "tls")]
use super::tls::TlsSettings;
use super::Session;
use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::path;

/// The longest session or connection timeout accepted: `i32::MAX` milliseconds (about
/// 24.8 days). The protocol carries the session timeout as a signed 32-bit count of
/// milliseconds; longer ones would wrap.
const MAX_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// The shortest session or connection timeout accepted: one millisecond (the protocol's
/// unit; zero would mean "the client's default" to zookeeper-client).
const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// Configures and connects a [`Session`]; made by [`Session::builder`].
///
/// `Debug` output shows no password and no private key.
#[derive(Clone, Debug)]
pub struct SessionBuilder {
    pub(super) session_timeout: Duration,
    connection_timeout: Duration,
    chroot: Option<String>,
    tolerate_suspension: bool,
    tcp_nodelay: bool,
    pub(super) node_acl: NodeAcl,
    credentials: Credentials,
    #[cfg(feature = "tls")]
    tls: TlsSettings,
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            session_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(10),
            chroot: None,
            tolerate_suspension: false,
            tcp_nodelay: true,
            node_acl: NodeAcl::Open,
            credentials: Credentials::default(),
            #[cfg(feature = "tls")]
            tls: TlsSettings::default(),
        }
    }
}

impl SessionBuilder {
    /// The session timeout to ask the servers for (they clamp it to their own bounds).
    /// Default: 10 s.
    ///
    /// It must lie between 1 ms and `i32::MAX` ms (about 24.8 days), the range the protocol
    /// carries; otherwise [`connect`](Self::connect) fails with [`Error::InvalidArgument`]
    /// before anything is sent.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`connect`](Self::connect) may try before it gives up with
    /// [`Error::Unreachable`]; also the bound of every attempt to make a new session after
    /// expiry. Default: 10 s.
    ///
    /// It must lie between 1 ms and `i32::MAX` ms (about 24.8 days); otherwise
    /// [`connect`](Self::connect) fails with [`Error::InvalidArgument`] before anything is
    /// sent.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Runs every path of this session under `chroot` (which must exist on the servers).
    pub fn chroot(mut self, chroot: impl Into<String>) -> Self {
        self.chroot = Some(chroot.into());
        self
    }

    /// Whether a suspended connection (disconnected, session maybe alive) leaves held locks
    /// and leaderships trusted for a while.
    ///
    /// Default `false`: suspension counts as loss at once, the only choice that is safe when
    /// the network, not a server, failed. With `true`, loss is declared only if the
    /// connection is not back within a third of the negotiated session timeout: the client
    /// notices a silent connection after about two fifths of it, and the servers may expire
    /// the session once the whole timeout has passed since they last heard from it.
    pub fn tolerate_suspension(mut self, tolerate: bool) -> Self {
        self.tolerate_suspension = tolerate;
        self
    }

    /// Whether the session's connections to its servers send each request at once
    /// (`TCP_NODELAY`, the default) or let the kernel gather small writes while earlier
    /// ones are unacknowledged (Nagle's algorithm). Default `true`.
    ///
    /// With it, a contender's create and listing travel together and an uncontended
    /// acquisition costs one round trip; without it, the listing waits for the server to
    /// acknowledge the create, a round trip more on the wire. Turn it off only where round
    /// trips cost next to nothing and CPU is what bounds the throughput (servers on the
    /// same machine, thousands of acquisitions a second): gathered writes then cost the
    /// client and the servers fewer packets. The measurements are in the crate's
    /// `benches/README.md` (per-key locks). Another session of the process to the same
    /// servers that keeps it on may set it on this one's connections too.
    pub fn tcp_nodelay(mut self, nodelay: bool) -> Self {
        self.tcp_nodelay = nodelay;
        self
    }

    /// Authenticates the session as `user` with ZooKeeper's digest scheme
    /// (`addauth digest user:password`), on every connection and on every new session
    /// after expiry. A second call replaces the first.
    ///
    /// ZooKeeper accepts any digest identity at connect: a wrong password is not refused
    /// there, it only makes nodes that the right identity owns refuse the session with
    /// [`Error::NoAuth`] (nothing is created then). Where the servers support it, SASL
    /// (feature `sasl`, `sasl_digest_md5`) refuses a wrong password at connect.
    ///
    /// The password is never shown in `Debug` output or logs. A user name that is empty or
    /// contains `':'` fails [`connect`](Self::connect) with [`Error::InvalidArgument`].
    pub fn digest_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials.digest = Some(Login {
            user: user.into(),
            password: Secret::new(password.into()),
        });
        self
    }

    /// Authenticates the session with SASL DIGEST-MD5 as `user` (feature `sasl`), against
    /// the users of the servers' JAAS `Server` section. The servers check the password when
    /// the session is made: a wrong one fails [`connect`](Self::connect) with
    /// [`Error::AuthFailed`]. The session's identity for ACLs is `sasl:<user>`.
    ///
    /// Every new session is confirmed with ZooKeeper's `whoami` (3.7 and later): servers
    /// without SASL, which would leave the session unauthenticated whatever the password,
    /// fail [`connect`](Self::connect) with [`Error::AuthFailed`] too.
    ///
    /// The password is never shown in `Debug` output or logs.
    #[cfg(feature = "sasl")]
    pub fn sasl_digest_md5(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials.sasl = Some(Login {
            user: user.into(),
            password: Secret::new(password.into()),
        });
        self
    }

    /// The ACL of the nodes the session's recipes create (default [`NodeAcl::Open`]); a
    /// recipe can override it. See [`NodeAcl`].
    ///
    /// A creator-only ACL without credentials ([`digest_auth`](Self::digest_auth), SASL, or
    /// a TLS client certificate) fails [`connect`](Self::connect) with
    /// [`Error::InvalidArgument`]: the servers would refuse every node.
    pub fn node_acl(mut self, acl: NodeAcl) -> Self {
        self.node_acl = acl;
        self
    }

    /// Connects over TLS (feature `tls`), trusting servers whose certificate chains to a
    /// certificate in `ca_pem`. Hosts stay `host:port`; each must be named (DNS name or IP
    /// address) by its server's certificate.
    ///
    /// A PEM without a usable certificate fails [`connect`](Self::connect) with
    /// [`Error::InvalidArgument`] before anything is sent.
    #[cfg(feature = "tls")]
    pub fn tls_ca_pem(mut self, ca_pem: impl Into<String>) -> Self {
        self.tls.ca_pem = Some(ca_pem.into());
        self
    }

    /// The client certificate (chain) and its private key, in PEM, offered to servers that
    /// ask for one (feature `tls`; needs [`tls_ca_pem`](Self::tls_ca_pem)).
    ///
    /// The key is never shown in `Debug` output or logs. A PEM without a certificate or a
    /// key, or a key that does not belong to the certificate, fails
    /// [`connect`](Self::connect) with [`Error::InvalidArgument`] before anything is sent.
    #[cfg(feature = "tls")]
    pub fn tls_identity_pem(
        mut self,
        cert_pem: impl Into<String>,
        key_pem: impl Into<String>,
    ) -> Self {
        self.tls.identity = Some((cert_pem.into(), Secret::new(key_pem.into())));
        self
    }

    /// How long a suspended connection is tolerated before held locks count as lost, if
    /// [`tolerate_suspension`](Self::tolerate_suspension) is on: a third of `negotiated`.
    pub(crate) fn tolerated(&self, negotiated: Duration) -> Option<Duration> {
        self.tolerate_suspension.then_some(negotiated / 3)
    }

    /// Connects to `hosts` (`"host:port,host:port"`).
    ///
    /// Every attempt is bounded by the connection timeout, and the time is spent in rounds
    /// that try every host once, with back-off between them. When every host refuses the
    /// TLS settings, the connect fails at once instead of retrying.
    ///
    /// # Notable errors
    /// * [`Error::InvalidConnectString`] if `hosts` cannot be parsed.
    /// * [`Error::InvalidPath`] if the chroot is malformed.
    /// * [`Error::InvalidArgument`] if a timeout is out of range, a user name or a PEM is
    ///   unusable, or a creator-only [`node_acl`](Self::node_acl) has no credentials to go
    ///   with it; nothing was sent.
    /// * [`Error::AuthFailed`] if the servers refused the SASL credentials.
    /// * [`Error::Tls`] if every server refused the TLS settings (certificate not trusted,
    ///   client certificate missing or refused, TLS spoken to a plaintext port or the
    ///   reverse).
    /// * [`Error::Unreachable`] if no session was established within the connection
    ///   timeout; its reason says what each host did.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future abandons the attempt and leaves no session behind.
    pub async fn connect(self, hosts: &str) -> Result<Session> {
        let target = self.target(hosts)?;
        let dialer = self.dialer(&target)?;
        let span = info_span!(
            "zk.connect",
            hosts = %target,
            auth = self.credentials.schemes(),
            tls = self.tls_enabled(),
        );
        async move {
            let dialed = std::time::Instant::now();
            let client = dialer.dial(&target).await?;
            // Without TCP_NODELAY: no server's connections get it.
            let servers = Servers::new(match self.tcp_nodelay {
                true => dialer.hosts(),
                false => Arc::from([]),
            });
            // Before the session's first requests; a failure only costs speed.
            let _ = servers.set_nodelay().await;
            info!(session = %client.session_id(), timeout = ?client.session_timeout(), "session established");
            Ok(Session::start(self, dialer, target, (client, dialed), servers))
        }
        .instrument(span)
        .await
    }

    /// Checks the timeouts, the credentials, the ACL and the TLS settings; the dialer that
    /// applies them to `target`.
    fn dialer(&self, target: &str) -> Result<Dialer> {
        check_timeout("session", self.session_timeout)?;
        check_timeout("connection", self.connection_timeout)?;
        self.credentials.validate()?;
        let transport = self.transport()?;
        if self.node_acl.needs_identity() && !self.has_identity() {
            return Err(Error::InvalidArgument(format!(
                "node ACL {:?} needs an authenticated session: set digest_auth (or SASL, or a \
                 TLS client certificate)",
                self.node_acl
            )));
        }
        let connector = Client::connector().with_session_timeout(self.session_timeout);
        let connector = self.credentials.apply(connector);
        #[cfg(feature = "tls")]
        let connector = match &transport {
            Transport::Tls(tls) => connector.with_tls(tls.options.clone()),
            Transport::Plain => connector,
        };
        Dialer::new(
            target,
            connector,
            transport,
            self.connection_timeout,
            self.credentials.refused(),
            self.credentials.sasl_user(),
        )
    }

    /// Plaintext, or TLS with the checked PEMs.
    fn transport(&self) -> Result<Transport> {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.prepare()? {
            return Ok(Transport::Tls(Box::new(tls)));
        }
        Ok(Transport::Plain)
    }

    /// Whether the session will authenticate as someone: credentials, or a client
    /// certificate (which servers may map to an identity).
    fn has_identity(&self) -> bool {
        #[cfg(feature = "tls")]
        if self.tls.identity.is_some() {
            return true;
        }
        self.credentials.any()
    }

    fn tls_enabled(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.enabled();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// The connect string with the chroot appended.
    fn target(&self, hosts: &str) -> Result<String> {
        if hosts.trim().is_empty() {
            return Err(invalid_hosts(hosts, "empty connect string"));
        }
        if hosts.contains('/') && self.chroot.is_some() {
            return Err(invalid_hosts(hosts, "chroot given twice"));
        }
        match &self.chroot {
            Some(chroot) => Ok(format!("{hosts}{}", path::validate_root(chroot)?)),
            None => Ok(hosts.to_owned()),
        }
    }
}

/// `Ok` if `timeout` lies within [`MIN_TIMEOUT`]..=[`MAX_TIMEOUT`].
fn check_timeout(which: &str, timeout: Duration) -> Result<()> {
    if (MIN_TIMEOUT..=MAX_TIMEOUT).contains(&timeout) {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{which} timeout {timeout:?} out of range: it must lie between {MIN_TIMEOUT:?} and \
         {MAX_TIMEOUT:?} (i32::MAX ms)"
    )))
}
