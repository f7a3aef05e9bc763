//! The command line of the examples run as replicas (`master_follower`,
//! `partitioned_worker`): `<id> [partitions] [session timeout ms]`, and the root of their
//! nodes from `DEMO_ROOT`.

use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a replica was told to be.
pub struct Replica {
    /// Its id.
    pub id: String,
    /// How many partitions there are.
    pub partitions: u32,
    /// Its session timeout (default 4 s).
    pub timeout: Duration,
    /// The root of its nodes: `DEMO_ROOT`, else the example's own.
    pub root: String,
}

impl Replica {
    /// Reads the command line of the example `name`, with `partitions` and `root` the
    /// defaults.
    pub fn from_args(name: &str, partitions: u32, root: &str) -> Result<Replica, BoxError> {
        let mut args = std::env::args().skip(1);
        let id = args
            .next()
            .ok_or_else(|| format!("usage: {name} <id> [partitions] [timeout ms]"))?;
        let partitions = args.next().map_or(Ok(partitions), |n| n.parse())?;
        let timeout: u64 = args.next().map_or(Ok(4000), |ms| ms.parse())?;
        let root = std::env::var("DEMO_ROOT").unwrap_or_else(|_| root.into());
        Ok(Replica {
            id,
            partitions,
            timeout: Duration::from_millis(timeout),
            root,
        })
    }
}
