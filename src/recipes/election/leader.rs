//! The leader of an election as a live value, for
//! [`LeaderElection::watch_leader`](crate::LeaderElection::watch_leader).

use std::collections::BTreeSet;

use async_trait::async_trait;
use zookeeper_client::Client;

use crate::error::Result;
use crate::path;
use crate::queue::sort_contenders;
use crate::recipes::election::{participant, Participant};
use crate::recipes::view::{read_nodes, NodeWatches, View};

/// The leader view: the first contender, read when it changes, and again when its node's
/// data watch fires (it proclaimed, or someone wrote into its node).
#[derive(Default)]
pub(super) struct LeaderView {
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
                self.leader = Some(participant(node, data.as_deref()));
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
