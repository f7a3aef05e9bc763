//! How long a caller lets an acquisition wait ([`Wait`]), and the bounds that end a wait
//! beside the work it bounds (a `select!` arm each, never a frame around the work).

use std::time::{Duration, Instant};

use zookeeper_client::Client;

use super::connection::disconnected;

/// How long an acquisition may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// Not at all: a contender that is not first gives up at once, and nothing waits for a
    /// connection.
    Never,
    /// Until this instant.
    Until(Instant),
    /// As long as it takes.
    Forever,
}

impl Wait {
    /// At most `timeout` from now; a deadline too far to represent is no deadline.
    pub(crate) fn at_most(timeout: Duration) -> Wait {
        Instant::now()
            .checked_add(timeout)
            .map_or(Wait::Forever, Wait::Until)
    }

    pub(crate) fn is_never(self) -> bool {
        matches!(self, Wait::Never)
    }

    /// Resolves when the deadline passes; never without one. The timer is boxed, so that
    /// a wait without a deadline does not carry it (`lock()`: 648 bytes, 752 unboxed).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn passed(self) {
        match self {
            Wait::Until(deadline) => Box::pin(tokio::time::sleep_until(deadline.into())).await,
            Wait::Never | Wait::Forever => std::future::pending().await,
        }
    }

    /// Resolves once the deadline, if any, has passed with the connection of `client`
    /// down: the bound of work whose requests the servers are answering, which a deadline
    /// never cuts short (a deadline that has passed already still lets one attempt
    /// finish). Raced against the work in a biased `select!`, the work first.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn cut_off(self, client: &Client) {
        self.passed().await;
        disconnected(client).await;
    }
}
