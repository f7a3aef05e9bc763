//! What a path holds, for `status` and `observe`: asked for with `--kind`, or told from its
//! nodes, never guessed from a name.
//!
//! * **`--kind`** says what PATH is, and it is looked at as that: a lock, an election (the
//!   contenders as `Mutex::contenders` lists them, the first holding or leading), a
//!   read/write lock (`RwLock::contenders`), a semaphore (`Semaphore::contenders`, with the
//!   maximum recorded), a group (`Group::members`), or a `KeyedMutex` root: every child a
//!   key, each key's lock listed by `Mutex::contenders` (all keys at once, their requests
//!   in flight together on the one connection), or a `Partitioner`'s path
//!   (`Partitioner::status`: its members, and each partition's lock holder and waiters).
//! * **Told from the nodes.** A queue is told by its contenders' names, read exactly as the
//!   recipes write them (ours, Curator's, kazoo's: `Contender::is_node_name`): a leader's
//!   an election, a reader's or writer's a read/write lock, a lock's a lock. A semaphore is
//!   told by its structure: PATH's children are `leases` (and `locks`), and `leases`
//!   records a maximum or holds a lease (a lease's name). A partitioner is told by its
//!   structure too: PATH's children are `members` (and `partitions`), and a member's node
//!   holds a partitioner's record. Anything else is shown as it is:
//!   PATH's children by name (a `KeyedMutex` root's keys, a group's members, `locks` or
//!   `order-1234567890` alike); none, and PATH is empty.
//! * **No such path** is a look of its own (`status` exits 66 for it).
//!
//! A look lists once more what it was given the children of; what changed in between
//! shows at the next look (`observe` watches PATH before it looks).

use futures::future::try_join_all;
use zk_recipes::{Contender, Group, Mutex, Partitioner, Result, RwLock, Semaphore, Session};

use crate::args::Kind;
use crate::view::{recipe_of, Key, Recipe, Seen};

/// The children of a semaphore's path.
pub const SEMAPHORE_PARTS: [&str; 2] = ["leases", "locks"];

/// The children of a partitioner's path.
pub const PARTITIONER_PARTS: [&str; 2] = ["members", "partitions"];

/// What PATH holds now, as `kind` says or else as its nodes tell; `children`: PATH's
/// children, listed before (`None`: PATH does not exist).
///
/// # Errors
/// As the library's listings: `NoAuth` if PATH (or a part of it) may not be read, or the
/// connection's errors.
pub async fn look(
    session: &Session,
    path: &str,
    kind: Option<Kind>,
    children: Option<&[String]>,
) -> Result<Seen> {
    let Some(children) = children else {
        return Ok(Seen::Missing);
    };
    match kind {
        Some(kind) => asked(session, path, kind, children).await,
        None => told(session, path, children).await,
    }
}

/// PATH as `kind`.
async fn asked(session: &Session, path: &str, kind: Kind, children: &[String]) -> Result<Seen> {
    match kind {
        Kind::Lock => queue(session, path, Recipe::Lock).await,
        Kind::Election => queue(session, path, Recipe::Election).await,
        Kind::Rwlock => queue(session, path, Recipe::RwLock).await,
        Kind::Semaphore => semaphore(session, path).await,
        Kind::Group => Ok(Seen::Group(Group::new(session, path)?.members().await?)),
        Kind::Keyed => keyed(session, path, children).await,
        Kind::Partitioner => Ok(Seen::Partitioner(Partitioner::status(session, path).await?)),
    }
}

/// PATH as its nodes tell (see the module's doc).
async fn told(session: &Session, path: &str, children: &[String]) -> Result<Seen> {
    if let Some(recipe) = recipe_of(children.iter().map(String::as_str)) {
        return queue(session, path, recipe).await;
    }
    if partitioner_layout(children) {
        let status = Partitioner::status(session, path).await?;
        if !status.members.is_empty() {
            return Ok(Seen::Partitioner(status));
        }
    }
    if semaphore_layout(children) {
        let seen = semaphore(session, path).await?;
        if let Seen::Semaphore { max, contenders } = &seen {
            if max.is_some() || contenders.iter().any(|c| leased(path, c)) {
                return Ok(seen);
            }
        }
    }
    Ok(Seen::Children(sorted(children)))
}

/// Whether PATH's children are a semaphore's: `leases`, and perhaps `locks`, alone.
fn semaphore_layout(children: &[String]) -> bool {
    children.iter().any(|name| name == "leases")
        && (children.iter()).all(|name| SEMAPHORE_PARTS.contains(&name.as_str()))
}

/// Whether PATH's children are a partitioner's: `members`, and perhaps `partitions`, alone.
pub fn partitioner_layout(children: &[String]) -> bool {
    children.iter().any(|name| name == "members")
        && (children.iter()).all(|name| PARTITIONER_PARTS.contains(&name.as_str()))
}

/// Whether `contender` is a lease of the semaphore on `path`: a lease's name under
/// `PATH/leases`.
fn leased(path: &str, contender: &Contender) -> bool {
    let leases = format!("{path}/leases/");
    contender
        .node
        .strip_prefix(&leases)
        .is_some_and(|name| Contender::is_node_name(name) && name.contains("-lease-"))
}

/// The queue of `recipe` on PATH, as the library lists it.
async fn queue(session: &Session, path: &str, recipe: Recipe) -> Result<Seen> {
    let contenders = match recipe {
        Recipe::RwLock => RwLock::new(session, path)?.contenders().await?,
        Recipe::Lock | Recipe::Election => Mutex::new(session, path)?.contenders().await?,
    };
    Ok(Seen::Queue(recipe, contenders))
}

/// The semaphore on PATH: its recorded maximum, its leases and acquirers.
async fn semaphore(session: &Session, path: &str) -> Result<Seen> {
    let max = Semaphore::new(session, path, 1)?.recorded_max().await?;
    let semaphore = Semaphore::new(session, path, max.unwrap_or(u32::MAX))?;
    let contenders = semaphore.contenders().await?;
    Ok(Seen::Semaphore { max, contenders })
}

/// The `KeyedMutex` root PATH: each of its `keys`, by name, with its lock's contenders
/// (none: free, also a key gone meanwhile).
async fn keyed(session: &Session, path: &str, keys: &[String]) -> Result<Seen> {
    let listed = sorted(keys).into_iter().map(|name| async move {
        let contenders = Mutex::new(session, &format!("{path}/{name}"))?
            .contenders()
            .await?;
        Ok::<_, zk_recipes::Error>(Key { name, contenders })
    });
    Ok(Seen::Keyed(try_join_all(listed).await?))
}

/// `names`, sorted (the servers list children in no order).
fn sorted(names: &[String]) -> Vec<String> {
    let mut names = names.to_vec();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use zk_recipes::Access;

    use super::*;

    #[test]
    fn a_semaphore_is_told_by_its_parts_alone() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(semaphore_layout(&names(&["leases", "locks"])));
        assert!(semaphore_layout(&names(&["leases"])));
        assert!(!semaphore_layout(&names(&["locks"])));
        assert!(!semaphore_layout(&names(&["leases", "locks", "job-1"])));
        assert!(!semaphore_layout(&[]));
    }

    #[test]
    fn a_lease_is_named_as_one_under_leases() {
        let at = |node: &str| Contender {
            node: node.into(),
            token: 1,
            holds: true,
            access: Access::Lease,
            id: None,
            revocation_requested: false,
        };
        let lease = "_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-lease-0000000001";
        assert!(leased("/s", &at(&format!("/s/leases/{lease}"))));
        assert!(!leased("/s", &at(&format!("/s/locks/{lease}"))));
        let lock = "_c_0f8e2c1a-3b4d-4e5f-8a9b-0c1d2e3f4a5b-lock-0000000001";
        assert!(!leased("/s", &at(&format!("/s/leases/{lock}"))));
        assert!(!leased("/s", &at("/s/leases/order-1234567890")));
    }
}
