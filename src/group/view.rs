//! A live view of a path's children: one children watch on the server per view, set again
//! with each listing; the view decides what it reads of the children, and publishes only
//! what changed.
//!
//! A watch that fires (children changed, the path made or deleted, the session ended) makes
//! the view list again, on the live session; a listing that fails is tried again once the
//! connection is back, with back-off, never by polling a healthy connection. While the
//! connection is down the watch stays registered: the servers fire it after the reconnect
//! if the children changed meanwhile.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tracing::{debug, Instrument, Span};
use zookeeper_client::{Client, OneshotWatcher};

use crate::error::{Error, Result};
use crate::session::{reconnected, Session};

/// The pause after a listing that failed; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What a view makes of a path's children.
#[async_trait]
pub(crate) trait View: Send + 'static {
    /// What the view publishes.
    type Value: PartialEq + Send + Sync + 'static;

    /// The value for `children` of `root` (none if it does not exist), reading on `client`
    /// only what it needs.
    async fn read(
        &mut self,
        client: &Client,
        root: &str,
        children: Vec<String>,
    ) -> Result<Self::Value>;
}

/// Lists `root` on the session's connected client, and follows it in the background (under
/// `span`) while a receiver is left.
///
/// # Notable errors
/// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down.
/// * [`Error::NoAuth`] if `root` cannot be read.
pub(crate) async fn start<V: View>(
    session: &Session,
    root: Arc<str>,
    mut view: V,
    span: Span,
) -> Result<watch::Receiver<V::Value>> {
    let client = session.connected()?;
    let (value, watcher) = look(&client, &root, &mut view)
        .instrument(span.clone())
        .await?;
    drop(client);
    let (published, receiver) = watch::channel(value);
    session.spawn(follow(session.clone(), root, view, published, watcher).instrument(span));
    Ok(receiver)
}

/// Lists `root` with a children watch (an exists watch while it does not exist), and reads
/// what the view needs.
async fn look<V: View>(
    client: &Client,
    root: &str,
    view: &mut V,
) -> Result<(V::Value, OneshotWatcher)> {
    loop {
        let (children, watcher) = match client.list_and_watch_children(root).await {
            Ok(listed) => listed,
            Err(zookeeper_client::Error::NoNode) => match client.check_and_watch_stat(root).await {
                Ok((None, watcher)) => (Vec::new(), watcher),
                // Made meanwhile: list it.
                Ok((Some(_), _)) => continue,
                Err(err) => return Err(Error::at(root, err)),
            },
            Err(err) => return Err(Error::at(root, err)),
        };
        debug!(children = children.len(), "listed");
        return Ok((view.read(client, root, children).await?, watcher));
    }
}

/// Lists again each time the watch fires, until no receiver is left or the session closes.
async fn follow<V: View>(
    session: Session,
    root: Arc<str>,
    mut view: V,
    published: watch::Sender<V::Value>,
    mut watcher: OneshotWatcher,
) {
    loop {
        let event = tokio::select! {
            biased;
            () = published.closed() => return,
            () = session.closed() => return,
            event = watcher.changed() => event,
        };
        debug!(?event.event_type, ?event.session_state, "watch fired");
        let looked = tokio::select! {
            biased;
            () = published.closed() => return,
            () = session.closed() => return,
            looked = look_until_done(&session, &root, &mut view) => looked,
        };
        let Some((value, next)) = looked else { return };
        watcher = next;
        published.send_if_modified(|current| {
            let changed = *current != value;
            *current = value;
            changed
        });
    }
}

/// Lists on the live session until a listing works; `None` once the session is closed.
async fn look_until_done<V: View>(
    session: &Session,
    root: &str,
    view: &mut V,
) -> Option<(V::Value, OneshotWatcher)> {
    let mut pause = FIRST_PAUSE;
    loop {
        let client = session.live().await.ok()?;
        match look(&client, root, view).await {
            Ok(looked) => return Some(looked),
            Err(Error::Closed) => return None,
            Err(Error::ConnectionLoss) => {
                debug!("listing cut off; again once connected");
                // Fails when the session ended: the live session is then another one.
                let _ = reconnected(&client).await;
            }
            Err(err) => {
                debug!(%err, ?pause, "cannot list; again after a pause");
                drop(client);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}
