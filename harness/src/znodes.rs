//! Looking at a recipe root from outside: its children, and waiting on child watches
//! (never on sleeps) for them to reach a state.

use std::collections::BTreeSet;

use zookeeper_client::{Acl, Acls, AuthId, Client, CreateMode, Permission, SessionState};

use crate::wait::PATIENCE;

/// The last component of a node's path.
pub fn name(node: &str) -> &str {
    node.rsplit_once('/').map_or(node, |(_, name)| name)
}

/// The sequence number ZooKeeper appended to a sequential node: the last 10 characters of
/// its name (or path) as a number; `None` if they are not one.
pub fn sequence(node: &str) -> Option<i64> {
    node.get(node.len().saturating_sub(10)..)?.parse().ok()
}

fn queue_order(names: &mut [String]) {
    names.sort_by(|a, b| (sequence(a), a).cmp(&(sequence(b), b)));
}

/// Runs a read again after a connection fault, once the client is connected again: an
/// observer must ride out the faults the tests cause.
pub async fn observe<T, F, Fut>(client: &Client, mut read: F) -> Result<T, zookeeper_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, zookeeper_client::Error>>,
{
    use zookeeper_client::Error::{ConnectionLoss, Custom, Timeout};
    loop {
        match read().await {
            Err(ConnectionLoss | Timeout | Custom(_)) => {
                let mut states = client.state_watcher();
                let mut state = states.state();
                while state == SessionState::Disconnected {
                    state = states.changed().await;
                }
                assert_eq!(
                    state,
                    SessionState::SyncConnected,
                    "the observer's session ended"
                );
            }
            other => return other,
        }
    }
}

/// The children of `root` in queue order (by sequence suffix); empty if it does not exist.
pub async fn children(client: &Client, root: &str) -> Vec<String> {
    let mut names = match observe(client, || client.list_children(root)).await {
        Ok(names) => names,
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(err) => panic!("cannot list {root}: {err}"),
    };
    queue_order(&mut names);
    names
}

/// Waits on child watches until `done` holds for the names of the children of `root` in
/// queue order (none if `root` does not exist); returns them. Fails the test after
/// [`PATIENCE`], saying `what` was awaited.
pub async fn await_queue(
    client: &Client,
    root: &str,
    what: &str,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let wait = async {
        loop {
            let listed = observe(client, || client.get_and_watch_children(root)).await;
            let (mut names, watcher) = match listed {
                Ok((names, _, watcher)) => (names, watcher),
                Err(zookeeper_client::Error::NoNode) => {
                    if done(&[]) {
                        return Vec::new();
                    }
                    until_created(client, root).await;
                    continue;
                }
                Err(err) => panic!("cannot list {root}: {err}"),
            };
            queue_order(&mut names);
            if done(&names) {
                return names;
            }
            watcher.changed().await;
        }
    };
    match tokio::time::timeout(PATIENCE, wait).await {
        Ok(names) => names,
        Err(_) => panic!(
            "{root} never held {what} within {PATIENCE:?}; it holds {:?}",
            children(client, root).await
        ),
    }
}

/// Returns once `root`, which a listing found missing, exists: at once if it was created
/// since. (The watch set on a root that exists is a data watch: its children's changes
/// never fire it.)
async fn until_created(client: &Client, root: &str) {
    let (stat, watcher) = observe(client, || client.check_and_watch_stat(root))
        .await
        .unwrap_or_else(|err| panic!("cannot watch {root}: {err}"));
    if stat.is_none() {
        watcher.changed().await;
    }
}

/// Waits until the children of `root` are exactly the nodes named `expected`, in any order.
pub async fn await_children(client: &Client, root: &str, expected: &[&str]) {
    let expected: BTreeSet<&str> = expected.iter().copied().collect();
    await_queue(client, root, &format!("exactly {expected:?}"), |now| {
        now.len() == expected.len() && now.iter().all(|name| expected.contains(name.as_str()))
    })
    .await;
}

/// Waits until `root` holds exactly `n` children; returns them in queue order.
pub async fn await_count(client: &Client, root: &str, n: usize) -> Vec<String> {
    await_queue(client, root, &format!("{n} children"), |names| {
        names.len() == n
    })
    .await
}

/// Waits until `root` holds no child: nothing of any contender is left behind.
pub async fn await_empty(client: &Client, root: &str) {
    await_queue(client, root, "no children", <[String]>::is_empty).await;
}

/// An ACL that grants anyone everything but `denied`.
pub fn all_but(denied: Permission) -> [Acl; 1] {
    let all = [
        Permission::READ,
        Permission::WRITE,
        Permission::CREATE,
        Permission::DELETE,
        Permission::ADMIN,
    ];
    let kept = all
        .into_iter()
        .filter(|&p| p != denied)
        .fold(Permission::NONE, |acc, p| acc | p);
    [Acl::new(kept, AuthId::anyone())]
}

/// Creates `path` as an open persistent node (its parent must exist).
pub async fn persistent(admin: &Client, path: &str) {
    admin
        .create(
            path,
            b"",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
}

#[cfg(test)]
mod tests {
    use zookeeper_client::{Acls, CreateMode};

    use super::*;
    use crate::{bounded, observer, unique_root, Ensemble};

    /// The race of a listing that finds no root, and a root (with its children) created
    /// before the watch is set: the watch is set on a root that exists already.
    #[tokio::test]
    async fn a_root_created_after_the_listing_is_not_waited_for() {
        let client = observer(&Ensemble::shared(1).await.connect_string()).await;
        let root = unique_root("created-after-listing");
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        client.create(&root, b"", &persistent).await.unwrap();
        let child = format!("{root}/child");
        client.create(&child, b"", &persistent).await.unwrap();

        bounded("the root is seen", PATIENCE, until_created(&client, &root)).await;
        assert_eq!(await_count(&client, &root, 1).await, ["child"]);

        client.delete(&child, None).await.unwrap();
        client.delete(&root, None).await.unwrap();
    }
}
