//! Sessions apart: new ZooKeeper sessions made with a [`Session`](super::Session)'s
//! settings (its hosts and chroot, credentials, TLS, timeouts and `TCP_NODELAY`), each
//! owned by the recipe that made it.
//!
//! ZooKeeper before 3.9 keeps one watch mode per session and path (ZOOKEEPER-4466): a
//! one-shot watch that a session sets on a path turns its persistent watch on that path
//! one-shot too. A recipe whose persistent watch must not be changed by the other watches
//! of the session it was made on (the user's, other recipes') therefore watches through a
//! session of its own. That session is the recipe's alone: it ends when the recipe drops
//! its client (a `CloseSession` is sent at once), and after its expiry the recipe makes a
//! new one with [`Apart::renew`]. It shares nothing with the [`Session`](super::Session)
//! but the settings: it is not renewed, confirmed or counted by it, and its holds (it makes
//! none) would not be the session's.

use std::sync::Arc;

use tracing::{debug, debug_span, Instrument};
use zookeeper_client::Client;

use super::dialer::Dialer;
use super::keeper::renew;
use super::nodelay::Servers;
use crate::error::Result;

/// What makes sessions apart with one [`Session`](super::Session)'s settings.
#[derive(Clone, Debug)]
pub(crate) struct Apart {
    dialer: Dialer,
    /// The connect string, with its chroot.
    target: Arc<str>,
    servers: Servers,
}

impl Apart {
    pub(super) fn new(dialer: Dialer, target: &str, servers: Servers) -> Apart {
        Apart {
            dialer,
            target: Arc::from(target),
            servers,
        }
    }

    /// Makes a new session, within the session's connection timeout, and sets
    /// `TCP_NODELAY` on its connection.
    ///
    /// # Notable errors
    /// * [`Error::AuthFailed`](crate::Error::AuthFailed) if the servers refused the SASL
    ///   credentials.
    /// * [`Error::Tls`](crate::Error::Tls) if every host refused the TLS settings.
    /// * [`Error::Unreachable`](crate::Error::Unreachable) if no session was made within
    ///   the connection timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped dial leaves no session behind.
    pub(crate) async fn dial(&self) -> Result<Client> {
        async {
            let client = self.dialer.dial(&self.target).await?;
            self.nodelay().await;
            debug!(session = %client.session_id(), timeout = ?client.session_timeout(), "session apart made");
            Ok(client)
        }
        .instrument(debug_span!("zk.session.apart", hosts = %self.target))
        .await
    }

    /// A new session after the last one expired: dials until one is made, backing off
    /// between attempts that failed for a passing reason, as the
    /// [`Session`](super::Session) renews its own.
    ///
    /// # Notable errors
    /// A refusal that dialing again cannot fix: credentials refused. (A TLS refusal is
    /// tried again: these settings made a session before.)
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped renewal leaves no session behind.
    pub(crate) async fn renew(&self) -> Result<Client> {
        async {
            let (client, _) = renew(&self.dialer, &self.target).await?;
            self.nodelay().await;
            Ok(client)
        }
        .instrument(debug_span!("zk.session.apart.renew", hosts = %self.target))
        .await
    }

    /// Sets `TCP_NODELAY` on the connections to the servers that do not have it yet: after
    /// a session apart connected again.
    pub(crate) async fn nodelay(&self) {
        // A failure only costs speed.
        let _ = self.servers.set_nodelay().await;
    }
}
