//! Making a path and its missing parents (see
//! [`Session::ensure_path`](super::Session::ensure_path)).

use tracing::debug;
use zookeeper_client::{Client, CreateMode, Error as Zk};

use crate::acl::NodeAcl;
use crate::error::{Error, Result};
use crate::path;

use super::retry;

/// Makes `path` and its missing parents on `client`: persistent, empty, with `acl`;
/// nothing if `path` exists. Looks first (an exists request needs no permission), then
/// creates from `path` up to the first parent that exists, and back down: a parent that
/// exists is never created again, so its parent's ACL never matters. Bounded: each missing
/// node is created at most twice over (a parent deleted while we walk, a container reaped).
///
/// # Notable errors
/// As [`Session::ensure_path`](super::Session::ensure_path).
pub(crate) async fn make_path(client: &Client, path: &str, acl: NodeAcl) -> Result<()> {
    let found = retry(client, || client.check_stat(path)).await;
    if found.map_err(|err| err.at_root(path))?.is_some() {
        return Ok(());
    }
    let options = CreateMode::Persistent.with_acls(acl.acls());
    let mut budget = 2 * (path::ancestors(path).count() + 1);
    let mut missing = vec![path];
    while let Some(&node) = missing.last() {
        budget = budget.saturating_sub(1);
        match retry(client, || client.create(node, &[], &options)).await {
            Ok(_) => {
                debug!(node, "made");
                missing.pop();
            }
            Err(Error::ZooKeeper(Zk::NodeExists)) => {
                missing.pop();
            }
            Err(Error::ZooKeeper(Zk::NoNode)) if budget > 0 => match parent(node) {
                Some(parent) => missing.push(parent),
                // A top-level node without a parent: the chroot does not exist.
                None => return Err(Error::ZooKeeper(Zk::NoNode)),
            },
            Err(err) => return Err(err.at_root(node)),
        }
    }
    Ok(())
}

/// The parent of a validated path; `None` for a top-level node.
fn parent(node: &str) -> Option<&str> {
    node.rfind('/').filter(|&at| at > 0).map(|at| &node[..at])
}

#[cfg(test)]
mod tests {
    use super::parent;

    #[test]
    fn parents() {
        assert_eq!(parent("/a/b/c"), Some("/a/b"));
        assert_eq!(parent("/a"), None);
    }
}
