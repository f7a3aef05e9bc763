//! [`NodeAcl`]: who may touch the nodes a recipe creates (semantics on the type).

use zookeeper_client::{Acl, Acls, Permission};

/// Who may touch the nodes a recipe creates.
///
/// Every node a recipe creates gets the ACL chosen for it: the contender nodes, and the recipe
/// root with the missing parents the recipe makes on first use. The ACL is chosen on the
/// session ([`SessionBuilder::node_acl`](crate::SessionBuilder::node_acl)) and can be
/// overridden per recipe ([`Mutex::node_acl`](crate::Mutex::node_acl),
/// [`RwLock::node_acl`](crate::RwLock::node_acl),
/// [`Semaphore::node_acl`](crate::Semaphore::node_acl),
/// [`LeaderElection::node_acl`](crate::LeaderElection::node_acl)).
///
/// ZooKeeper sets an ACL when it creates a node, and the recipes never change one: a root
/// or parent that exists already keeps the ACL it was made with, whoever made it. If that
/// ACL refuses the session, acquiring and joining fail with
/// [`Error::NoAuth`](crate::Error::NoAuth) and nothing is created.
///
/// "Creator" means every identity the creating session authenticated with (ZooKeeper's
/// `auth` scheme): a digest user ([`SessionBuilder::digest_auth`](crate::SessionBuilder::digest_auth)),
/// a SASL user, or a client certificate if the servers map certificates to identities. All
/// processes of one service share a lock only if they authenticate as the same identity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeAcl {
    /// Anyone may do anything (`world:anyone` all). The default, and what ZooKeeper
    /// clients without authentication use.
    #[default]
    Open,
    /// Only the creator's identity may read, write, delete or create children
    /// (`auth` all). Needs an authenticated session.
    CreatorOnly,
    /// The creator's identity may do anything, everyone may read and list (`auth` all,
    /// `world:anyone` read): observers and dashboards without credentials can see the
    /// queue, for example [`LeaderElection::participants`](crate::LeaderElection::participants).
    /// Needs an authenticated session.
    CreatorAllWorldRead,
}

static CREATOR_ALL_WORLD_READ: [Acl; 2] = [
    Acl::new_const(Permission::ALL, "auth", ""),
    Acl::new_const(Permission::READ, "world", "anyone"),
];

impl NodeAcl {
    /// The ACL list sent with a create.
    pub(crate) fn acls(self) -> Acls<'static> {
        match self {
            NodeAcl::Open => Acls::anyone_all(),
            NodeAcl::CreatorOnly => Acls::creator_all(),
            NodeAcl::CreatorAllWorldRead => Acls::new(&CREATOR_ALL_WORLD_READ),
        }
    }

    /// Whether the servers accept it only from an authenticated session.
    pub(crate) fn needs_identity(self) -> bool {
        !matches!(self, NodeAcl::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creator_variants_grant_the_creator_everything() {
        for acl in [NodeAcl::CreatorOnly, NodeAcl::CreatorAllWorldRead] {
            let creator = acl.acls().iter().find(|a| a.scheme() == "auth").cloned();
            assert_eq!(creator.map(|a| a.permission()), Some(Permission::ALL));
            assert!(acl.needs_identity());
        }
        assert!(!NodeAcl::Open.needs_identity());
    }

    #[test]
    fn only_world_read_variants_let_anyone_read() {
        let world = |acl: NodeAcl| {
            acl.acls()
                .iter()
                .find(|a| a.scheme() == "world")
                .map(|a| a.permission())
        };
        assert_eq!(world(NodeAcl::Open), Some(Permission::ALL));
        assert_eq!(world(NodeAcl::CreatorOnly), None);
        assert_eq!(world(NodeAcl::CreatorAllWorldRead), Some(Permission::READ));
    }
}
