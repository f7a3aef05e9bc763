//! [`SessionBuilder`]: the settings of a [`Session`] and the connect that applies them.

use std::time::Duration;

use tracing::{info, info_span, Instrument};
use zookeeper_client::Client;

use super::nodelay::Sockets;
use super::Session;
use crate::error::{Error, Result};
use crate::path;

/// Configures and connects a [`Session`]; made by [`Session::builder`].
#[derive(Clone, Debug)]
pub struct SessionBuilder {
    pub(super) session_timeout: Duration,
    connection_timeout: Duration,
    chroot: Option<String>,
    tolerate_suspension: bool,
}

impl Default for SessionBuilder {
    fn default() -> Self {
        SessionBuilder {
            session_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(10),
            chroot: None,
            tolerate_suspension: false,
        }
    }
}

impl SessionBuilder {
    /// The session timeout to ask the servers for (they clamp it to their own bounds).
    /// Default: 10 s.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`connect`](Self::connect) may try before it gives up with
    /// [`Error::Unreachable`]. Default: 10 s.
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

    /// How long a suspended connection is tolerated before held locks count as lost, if
    /// [`tolerate_suspension`](Self::tolerate_suspension) is on: a third of `negotiated`.
    pub(crate) fn tolerated(&self, negotiated: Duration) -> Option<Duration> {
        self.tolerate_suspension.then_some(negotiated / 3)
    }

    /// Connects to `hosts` (`"host:port,host:port"`).
    ///
    /// # Notable errors
    /// * [`Error::InvalidConnectString`] if `hosts` cannot be parsed.
    /// * [`Error::InvalidPath`] if the chroot is malformed.
    /// * [`Error::Unreachable`] if no session was established within the connection timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future abandons the attempt and leaves no session behind.
    pub async fn connect(self, hosts: &str) -> Result<Session> {
        let target = self.target(hosts)?;
        let span = info_span!("zk.connect", hosts = %target);
        async move {
            let mut sockets = Sockets::before_connecting(&target);
            let client = self.connect_once(&target).await?;
            sockets.set_nodelay_on_new();
            info!(session = %client.session_id(), timeout = ?client.session_timeout(), "session established");
            Ok(Session::start(self, target, client, sockets))
        }
        .instrument(span)
        .await
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

    pub(super) async fn connect_once(&self, target: &str) -> Result<Client> {
        let connecting = Client::connector()
            .with_session_timeout(self.session_timeout)
            .connect(target);
        match tokio::time::timeout(self.connection_timeout, connecting).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(zookeeper_client::Error::BadArguments(reason))) => {
                Err(invalid_hosts(target, reason))
            }
            Ok(Err(err)) => Err(unreachable(target, err.to_string())),
            Err(_) => Err(unreachable(
                target,
                format!("no session within {:?}", self.connection_timeout),
            )),
        }
    }
}

fn invalid_hosts(hosts: &str, reason: &str) -> Error {
    Error::InvalidConnectString {
        hosts: hosts.to_owned(),
        reason: reason.to_owned(),
    }
}

fn unreachable(hosts: &str, reason: String) -> Error {
    Error::Unreachable {
        hosts: hosts.to_owned(),
        reason,
    }
}
