//! The leader of an election as a live value: [`LeaderElection::watch_leader`].

use async_trait::async_trait;
use tokio::sync::watch;
use tracing::info_span;
use zookeeper_client::Client;

use super::view::{self, View};
use crate::election::{LeaderElection, Participant};
use crate::error::{Error, Result};
use crate::path;
use crate::proclaim::participant;
use crate::queue::sort_contenders;

impl LeaderElection {
    /// The current leader as it changes (`None` while no one is in the queue): a receiver
    /// that starts with the leader now and is updated from one children watch on the
    /// election path; the leader's id is read only when the first in the queue changes.
    /// Works without joining. It is the first in the queue, as [`leader`](Self::leader)
    /// says: a candidate whose session was just cut off stays first until the servers
    /// expire it. What a leader proclaims is read when it is first seen leading; a later
    /// [`proclaim`](crate::Leadership::proclaim) shows in [`leader`](Self::leader), not
    /// here. How stale it can be, and what a suspended connection does to it: as for
    /// [`Group::watch_members`](crate::Group::watch_members). The view stops when every
    /// receiver is dropped or the session is closed.
    ///
    /// # Notable errors
    /// * [`Error::NoAuth`] if the path cannot be read.
    /// * [`Error::Disconnected`] (or [`Error::Renewing`]) at once if the connection is down
    ///   now.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn watch_leader(&self) -> Result<watch::Receiver<Option<Participant>>> {
        let span = info_span!("zk.election.watch_leader", path = %self.path());
        let root = self.path().into();
        view::start(self.session(), root, LeaderView::default(), span).await
    }
}

/// The leader view: the first contender, its id read when it changes.
#[derive(Default)]
struct LeaderView {
    leader: Option<Participant>,
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
            if self
                .leader
                .as_ref()
                .is_some_and(|leader| leader.node == node)
            {
                return Ok(self.leader.clone());
            }
            match client.get_data(&node).await {
                Ok((data, _)) => {
                    self.leader = Some(participant(node, &data));
                    return Ok(self.leader.clone());
                }
                Err(zookeeper_client::Error::NoNode) => {}
                Err(err) => return Err(Error::at(root, err)),
            }
        }
        self.leader = None;
        Ok(None)
    }
}
