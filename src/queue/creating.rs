//! A create in flight ([`Creating`]): the node's path made once, a create whose reply was
//! lost found again by its uuid, and whatever it may have made deleted if it is dropped
//! before it became a contender; and the listing of a root's children that entering and
//! finding again share.

use std::fmt::Write as _;
use std::sync::Arc;

use tracing::debug;
use uuid::Uuid;
use zookeeper_client::Client;

use super::decide::{find_own, SEQUENCE_DIGITS};
use super::leaving::{spawn_removal, Removal};
use crate::error::{Error, Result};
use crate::path;
use crate::session::{reconnected, retry, Session};

/// A create in flight: deletes whatever it may have created unless it became a contender.
pub(super) struct Creating {
    session: Session,
    client: Arc<Client>,
    root: Arc<str>,
    uuid: Uuid,
    /// Whether dropping it deletes what it may have made: until it became a contender.
    pub(super) armed: bool,
}

impl Creating {
    pub(super) fn new(session: &Session, client: Arc<Client>, root: Arc<str>) -> Creating {
        Creating {
            session: session.clone(),
            client,
            root,
            uuid: Uuid::new_v4(),
            armed: true,
        }
    }

    /// `ROOT/_c_<uuid>-<name>`, with room for the sequence number the server appends: the
    /// node's path, allocated once and before the wait.
    pub(super) fn prefix(&self, name: &str) -> String {
        let mut prefix =
            String::with_capacity(self.root.len() + 41 + name.len() + SEQUENCE_DIGITS + 1);
        let _ = write!(prefix, "{}/_c_{}-{name}", self.root, self.uuid);
        prefix
    }

    /// After a create whose outcome is unknown: the node if it was made, with its token
    /// and the listing that found it.
    pub(super) async fn recover(&mut self) -> Result<Option<(String, i64, Vec<String>)>> {
        let client = self.client.clone();
        reconnected(&client).await?;
        retry(&client, || client.sync(&self.root)).await?;
        let children = children(&client, &self.root).await?;
        let Some(name) = find_own(&children, &self.uuid) else {
            debug!(uuid = %self.uuid, "lost create did not happen; creating again");
            return Ok(None);
        };
        let node = path::join(&self.root, name);
        match retry(&client, || client.get_data(&node)).await {
            Ok((_, stat)) => {
                debug!(%node, "found the node of a create whose reply was lost");
                Ok(Some((node, stat.czxid, children)))
            }
            Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => Ok(None),
            Err(err) => Err(err),
        }
    }
}

impl Drop for Creating {
    fn drop(&mut self) {
        if self.armed {
            let removal = Removal::ByUuid {
                root: self.root.clone(),
                uuid: self.uuid,
            };
            drop(spawn_removal(
                &self.session,
                Arc::downgrade(&self.client),
                removal,
            ));
        }
    }
}

/// The children of `root` (none if it does not exist).
///
/// # Notable errors
/// As `getChildren`, after retries of a lost connection (see [`retry`]).
pub(super) async fn children(client: &Client, root: &str) -> Result<Vec<String>> {
    match retry(client, || client.list_children(root)).await {
        Err(Error::ZooKeeper(zookeeper_client::Error::NoNode)) => Ok(Vec::new()),
        other => other.map_err(|err| err.at_root(root)),
    }
}
