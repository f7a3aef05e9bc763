//! The leader of an election as a live value: [`LeaderElection::watch_leader`].

use std::collections::BTreeSet;

use async_trait::async_trait;
use tokio::sync::watch;
use tracing::info_span;
use zookeeper_client::Client;

use super::view::{self, read_nodes, NodeWatches, View};
use crate::election::participant;
use crate::election::{LeaderElection, Participant};
use crate::error::Result;
use crate::path;
use crate::queue::sort_contenders;

impl LeaderElection {
    /// The current leader as it changes (`None` while no one is in the queue): a receiver
    /// that starts with the leader now and is updated from one children watch on the
    /// election path and one data watch on the leader's node. Works without joining. It is
    /// the first in the queue, as [`leader`](Self::leader) says: a candidate whose session
    /// was just cut off stays first until the servers expire it. It carries what the leader
    /// proclaimed ([`Participant::proclaimed`](crate::Participant::proclaimed)) and follows each later
    /// [`proclaim`](crate::Leadership::proclaim): the leader's node is read again when the
    /// first in the queue changes or its data watch fires. A leader whose node this session
    /// may not read (its ACL) is shown with an empty id and nothing proclaimed. How stale it
    /// can be, and what a suspended connection does to it: as for
    /// [`Group::watch_members`](crate::Group::watch_members). The view stops when every
    /// receiver is dropped or the session is closed.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`](crate::Error::NoAuth) if the path cannot be read.
    /// * [`Error::Disconnected`](crate::Error::Disconnected) (or [`Error::Renewing`](crate::Error::Renewing)) at once if the connection is down
    ///   now.
    ///
    /// # Cancel safety
    /// Cancel safe: a view started for a dropped call stops once its first listing is
    /// answered.
    pub async fn watch_leader(&self) -> Result<watch::Receiver<Option<Participant>>> {
        let span = info_span!("zk.election.watch_leader", path = %self.path());
        let root = self.path().into();
        view::start(self.session(), root, LeaderView::default(), span).await
    }
}

/// The leader view: the first contender, read when it changes, and again when its node's
/// data watch fires (it proclaimed, or someone wrote into its node).
#[derive(Default)]
struct LeaderView {
    leader: Option<Participant>,
    watches: NodeWatches,
    /// The names of the nodes whose watches fired since the last reading.
    stale: BTreeSet<String>,
}

#[async_trait]
impl View for LeaderView {
    type Value = Option<Participant>;

    async fn read(
        &mut self,
        client: &Client,
        root: &str,
        mut children: Vec<String>,
    ) -> Result<Option<Participant>> {
        sort_contenders(&mut children);
        // The first that is still there: one that left meanwhile fires the watch again.
        for name in children {
            let node = path::join(root, &name);
            let known = self.leader.as_ref().is_some_and(|l| l.node == node);
            if known && !self.stale.contains(&name) {
                return Ok(self.leader.clone());
            }
            let read = read_nodes(client, root, vec![name], Some(&mut self.watches)).await?;
            if let Some((_, Some((data, _)))) = read.into_iter().next() {
                // A node this session may not read shows no id.
                let data = data.unwrap_or_default();
                self.leader = Some(participant(node, &data));
                self.stale.clear();
                return Ok(self.leader.clone());
            }
        }
        self.leader = None;
        self.stale.clear();
        Ok(None)
    }

    async fn changed(&mut self) {
        let fired = self.watches.fired().await;
        self.stale.extend(fired);
    }
}
