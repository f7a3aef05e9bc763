//! [`Snapshot`]: the nodes a [`Cache`](super::Cache) holds at one moment, and how a read of
//! the servers changes them (by stat: only what changed is a [`Change`]).

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::Arc;

use zookeeper_client::Stat;

use super::change::Change;
use crate::node::CachedNode;

/// The nodes by path.
type Nodes = BTreeMap<Arc<str>, CachedNode>;

/// What a read of one node found: its data (`None` if the session may not read it) and its
/// stat; `None` if the node does not exist.
pub(super) type Read = Option<(Option<Vec<u8>>, Stat)>;

/// The nodes a [`Cache`](super::Cache) held at one moment, by path: an immutable view,
/// cheap to take and to clone (one reference count), that later changes do not touch.
///
/// While a snapshot is kept, the cache's next change copies its map of nodes (not the
/// nodes themselves) once: drop snapshots when done with them.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    nodes: Arc<Nodes>,
}

impl Snapshot {
    /// The node at `path`, if the cache held it.
    pub fn get(&self, path: &str) -> Option<&CachedNode> {
        self.nodes.get(path)
    }

    /// The children of `path` the cache held, in the order of their names.
    pub fn children<'a>(&'a self, path: &str) -> impl Iterator<Item = &'a CachedNode> + 'a {
        let prefix = format!("{path}/");
        let mut from = prefix.clone();
        let mut inclusive = false;
        std::iter::from_fn(move || loop {
            let lower = match inclusive {
                true => Included(from.as_str()),
                false => Excluded(from.as_str()),
            };
            let (key, node) = self.nodes.range::<str, _>((lower, Unbounded)).next()?;
            let name = key.strip_prefix(prefix.as_str())?;
            match name.find('/') {
                // A grandchild: skip the rest of that child's subtree (every path under
                // `child/` sorts before `child0`, '0' following '/').
                Some(at) => {
                    from = format!("{prefix}{}0", &name[..at]);
                    inclusive = true;
                }
                None => {
                    from = key.to_string();
                    inclusive = false;
                    return Some(node);
                }
            }
        })
    }

    /// Every node, in the order of their paths (a parent before its children).
    pub fn iter(&self) -> impl Iterator<Item = &CachedNode> + '_ {
        self.nodes.values()
    }

    /// How many nodes the cache held.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cache held no node (the path did not exist).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Takes in what a read of `path` found; pushes what changed to `changes`, in order.
    /// A read older than what is held (an earlier write of the same node, or an earlier
    /// node at the path) changes nothing. Returns whether anything held changed (also a
    /// stat that changed by its children only, which is no [`Change`]).
    pub(super) fn apply(&mut self, path: Arc<str>, read: Read, changes: &mut Vec<Change>) -> bool {
        let held = self.nodes.get(&path);
        match (held, read) {
            (None, None) => false,
            (Some(_), None) => {
                let gone = self.remove(&path);
                changes.extend(gone.map(Change::Deleted));
                true
            }
            (None, Some((data, stat))) => {
                let node = CachedNode::new(path, data, stat);
                self.insert(node.clone());
                changes.push(Change::Created(node));
                true
            }
            (Some(old), Some((data, stat))) => {
                let old = old.clone();
                self.replace(old, data, stat, changes)
            }
        }
    }

    /// Replaces `old` by what a read of it found, if that is newer.
    fn replace(
        &mut self,
        old: CachedNode,
        data: Option<Vec<u8>>,
        stat: Stat,
        changes: &mut Vec<Change>,
    ) -> bool {
        let path = old.shared_path().clone();
        let newer_node = stat.czxid > old.czxid();
        let newer_write = stat.czxid == old.czxid() && stat.mzxid > old.mzxid();
        let node = CachedNode::new(path, data, stat);
        if newer_node {
            changes.push(Change::Deleted(old));
            changes.push(Change::Created(node.clone()));
        } else if newer_write {
            changes.push(Change::Updated(node.clone()));
        } else if !(old.same_write(&stat) && *old.stat() != stat) {
            // An older read, or the very state held.
            return false;
        }
        self.insert(node);
        true
    }

    /// Deletes every node not in `seen` (a full read of the servers did not find it),
    /// children before their parents; pushes each deletion to `changes`.
    pub(super) fn retain(&mut self, seen: &HashSet<Arc<str>>, changes: &mut Vec<Change>) {
        let gone: Vec<Arc<str>> = self
            .nodes
            .keys()
            .rev()
            .filter(|path| !seen.contains(*path))
            .cloned()
            .collect();
        for path in gone {
            changes.extend(self.remove(&path).map(Change::Deleted));
        }
    }

    fn insert(&mut self, node: CachedNode) {
        let key = node.shared_path().clone();
        Arc::make_mut(&mut self.nodes).insert(key, node);
    }

    fn remove(&mut self, path: &str) -> Option<CachedNode> {
        Arc::make_mut(&mut self.nodes).remove(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(czxid: i64, mzxid: i64, version: i32) -> Stat {
        Stat {
            czxid,
            mzxid,
            pzxid: czxid,
            ctime: 0,
            mtime: 0,
            version,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        }
    }

    fn read(czxid: i64, mzxid: i64, version: i32) -> Read {
        Some((Some(vec![1]), stat(czxid, mzxid, version)))
    }

    fn kinds(changes: &[Change]) -> Vec<(&'static str, i64)> {
        changes
            .iter()
            .map(|change| {
                let kind = match change {
                    Change::Created(_) => "created",
                    Change::Updated(_) => "updated",
                    Change::Deleted(_) => "deleted",
                };
                (kind, change.node().mzxid())
            })
            .collect()
    }

    #[test]
    fn reports_each_state_once_in_order_and_ignores_older_reads() {
        let mut nodes = Snapshot::default();
        let mut changes = Vec::new();
        assert!(nodes.apply(Arc::from("/a"), read(5, 5, 0), &mut changes));
        assert!(
            !nodes.apply(Arc::from("/a"), read(5, 5, 0), &mut changes),
            "the same state"
        );
        assert!(nodes.apply(Arc::from("/a"), read(5, 7, 1), &mut changes));
        assert!(
            !nodes.apply(Arc::from("/a"), read(5, 6, 0), &mut changes),
            "an older write"
        );
        assert!(
            !nodes.apply(Arc::from("/a"), read(3, 3, 0), &mut changes),
            "an older node"
        );
        assert!(
            nodes.apply(Arc::from("/a"), read(9, 9, 0), &mut changes),
            "made again"
        );
        assert!(nodes.apply(Arc::from("/a"), None, &mut changes));
        assert!(!nodes.apply(Arc::from("/a"), None, &mut changes));
        assert_eq!(
            kinds(&changes),
            [
                ("created", 5),
                ("updated", 7),
                ("deleted", 7),
                ("created", 9),
                ("deleted", 9)
            ]
        );
    }

    #[test]
    fn a_stat_changed_by_children_only_is_kept_unreported() {
        let mut nodes = Snapshot::default();
        let mut changes = Vec::new();
        nodes.apply(Arc::from("/a"), read(5, 5, 0), &mut changes);
        let mut more = stat(5, 5, 0);
        more.num_children = 1;
        assert!(nodes.apply(Arc::from("/a"), Some((Some(vec![1]), more)), &mut changes));
        assert_eq!(changes.len(), 1);
        assert_eq!(nodes.get("/a").map(|n| n.stat().num_children), Some(1));
    }

    #[test]
    fn lists_children_only_skipping_subtrees_and_keeps_snapshots_apart() {
        let mut nodes = Snapshot::default();
        let mut changes = Vec::new();
        for path in [
            "/r", "/r/a", "/r/a-1", "/r/a/x", "/r/a/x/y", "/r/b", "/r0", "/q/a",
        ] {
            nodes.apply(Arc::from(path), read(1, 1, 0), &mut changes);
        }
        let taken = nodes.clone();
        let names = |s: &Snapshot, p: &str| {
            s.children(p)
                .map(|n| n.path().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&nodes, "/r"), ["/r/a", "/r/a-1", "/r/b"]);
        assert_eq!(names(&nodes, "/r/a"), ["/r/a/x"]);
        assert!(names(&nodes, "/r/b").is_empty());
        let seen: HashSet<Arc<str>> = ["/r", "/r/b"].into_iter().map(Arc::from).collect();
        changes.clear();
        nodes.retain(&seen, &mut changes);
        let gone: Vec<_> = changes.iter().map(|c| c.path().to_owned()).collect();
        assert_eq!(
            gone,
            ["/r0", "/r/a/x/y", "/r/a/x", "/r/a-1", "/r/a", "/q/a"]
        );
        assert_eq!(names(&nodes, "/r"), ["/r/b"]);
        assert_eq!(taken.len(), 8, "a snapshot taken before is untouched");
    }
}
