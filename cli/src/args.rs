//! The command line: commands, options, and the help that explains them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::duration;
use crate::status;

/// A recipe path, checked as the library checks it, before connecting: a bad one exits 64
/// at once, whatever the servers' state. (The connect string is checked by the library
/// before it sends anything, also at once.)
fn path(text: &str) -> Result<String, String> {
    match zk_recipes::check_path(text) {
        Ok(()) => Ok(text.to_owned()),
        Err(err) => Err(err.to_string()),
    }
}

/// A contender's id (`elect`'s, `lock`'s), checked as the library checks it
/// (`LeaderElection::new`, `Mutex::id`), before connecting.
fn contender_id(text: &str) -> Result<String, String> {
    match zk_recipes::check_contender_id(text) {
        Ok(()) => Ok(text.to_owned()),
        Err(err) => Err(err.to_string()),
    }
}

/// Run a command under a ZooKeeper lock or leadership; observe a lock or an election.
#[derive(Debug, Parser)]
#[command(name = "zk-recipes", version, after_help = status::HELP)]
pub struct Cli {
    /// More log on stderr: -v for info, -vv for debug (default: warnings only).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Wait for a lock, run CMD while holding it, release it when CMD exits.
    ///
    /// CMD gets ZK_LOCK_NODE (the lock node's path) and ZK_FENCING_TOKEN (a number that
    /// grows with every holder of the lock: hand it to what CMD writes to, so that it can
    /// refuse a stale holder). If the lock is lost while CMD runs (session expired,
    /// connection suspended, node deleted), CMD's process group gets SIGTERM, then SIGKILL
    /// after --kill-after, and zk-recipes exits with 79. SIGINT is passed on to CMD's
    /// group, SIGTERM, SIGHUP and SIGQUIT as SIGTERM; the lock is released once CMD has
    /// exited. When CMD exits, what it left running in its group gets SIGKILL; if
    /// zk-recipes is killed, a watchdog kills CMD's whole group (not what left it with
    /// setsid). Without CMD: prints the node and the token, and holds the lock until a
    /// signal. With --semaphore N, up to N processes hold PATH at once, each with a lease:
    /// ZK_LOCK_NODE is the lease's node.
    #[command(after_help = help(LOCK_EXAMPLES))]
    Lock(Lock),
    /// Join an election and run CMD only while leading, again each time it leads.
    ///
    /// CMD gets ZK_LEADER_NODE (the leader's node) and ZK_LEADER_TERM (a number that grows
    /// with every leader: a fencing token). If leadership is lost while CMD runs, CMD is
    /// killed as by `lock`. When CMD exits while leading, zk-recipes resigns (another
    /// candidate may lead), waits --restart-after and joins again; with --once it exits with
    /// CMD's status instead (79 if leadership was lost). Signals are passed on as by `lock`;
    /// zk-recipes resigns once CMD has exited, and exits with CMD's status. Without CMD:
    /// prints the node and the term whenever it leads.
    #[command(after_help = help(ELECT_EXAMPLES))]
    Elect(Elect),
    /// Print who holds and waits for a lock, a read/write lock or a semaphore, or leads and
    /// follows in an election, now and on every change.
    ///
    /// One line per change; with --json, one JSON object per line. Runs until SIGINT,
    /// SIGTERM, SIGHUP or SIGQUIT (exit 0), or until its output is closed (exit 0). What
    /// PATH is comes from --kind or from its nodes, as `status` tells it; while PATH does
    /// not exist the line is `PATH: no such path`.
    #[command(after_help = help(OBSERVE_EXAMPLES))]
    Observe(Observe),
    /// Print who holds and waits for a lock, a read/write lock or a semaphore, or leads and
    /// follows in an election, once.
    ///
    /// What PATH is comes from --kind, or else from its nodes: a queue of contenders by
    /// their names (zk-recipes', Curator's, kazoo's), a semaphore by its `leases` and
    /// `locks`, a partitioner by its `members` (its members and who holds each partition);
    /// anything else is shown as it is, its children listed (`--kind keyed` shows each key
    /// of a KeyedMutex root with its holder). A PATH that does not exist prints
    /// `PATH: no such path` and exits 66 (also a lock nobody used for a while: ZooKeeper
    /// deletes an empty lock path).
    #[command(after_help = help(STATUS_EXAMPLES))]
    Status(Observe),
    /// Print the members of the group on PATH (ids and data), once or on every change.
    ///
    /// The group is Curator's GroupMember layout: one ephemeral node PATH/ID per member,
    /// its data as payload. With --watch: a line now and one on every change (from one
    /// children watch, no polling) until SIGINT, SIGTERM, SIGHUP or SIGQUIT or until its
    /// output is closed (exit 0); a member that died shows until its session expires.
    #[command(after_help = help(MEMBERS_EXAMPLES))]
    Members(Members),
    /// Be a member of the group on PATH while CMD runs.
    ///
    /// Makes the ephemeral node PATH/ID with --data as its data (Curator's GroupMember
    /// layout), keeps it while CMD runs (made again after a session expiry), deletes it
    /// once CMD exits, and exits with CMD's status. CMD gets ZK_MEMBER_NODE and
    /// ZK_MEMBER_ZXID (the zxid that created the node). An ID held by another live session
    /// is refused (exit 69, CMD not run), at once or, with --wait, once it is still held
    /// after that wait; if another session takes the ID while this one had expired, CMD is
    /// stopped as by `lock` on a loss (exit 79). Signals are passed on
    /// as by `lock`. Without CMD: prints the node and the zxid, and stays a member until a
    /// signal.
    #[command(after_help = help(JOIN_EXAMPLES))]
    Join(Join),
    /// Ask whoever holds the lock (or leads) at PATH now to let go, as Curator's Revoker
    /// does: writes `__REVOKE__` into each holder's node and prints each node asked. A
    /// request, not a loss: the holder decides (`lock --on-revoke=release` lets go).
    #[command(after_help = help(REVOKE_EXAMPLES))]
    Revoke(Revoke),
    /// zk-recipes' own: the watchdog of CMD's process group (see `child`).
    #[command(name = "__watchdog", hide = true)]
    Watchdog,
}

impl Command {
    /// Checks what one argument alone does not tell, by the library's own rules, before
    /// connecting: `join`'s id, one node name under PATH (`Group::join`'s rule). A bad one
    /// exits 64 at once, whatever the servers' state.
    ///
    /// # Errors
    /// A one-line message saying which argument and why.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Command::Join(join) => zk_recipes::check_name(&join.path, &join.id)
                .map_err(|err| format!("--id {:?}: {err}", join.id)),
            _ => Ok(()),
        }
    }
}

/// `zk-recipes lock`.
#[derive(Debug, Args)]
pub struct Lock {
    /// The lock's path, e.g. /locks/nightly-backup.
    #[arg(value_parser = path)]
    pub path: String,
    /// The id the lock node carries, shown by `status` and `observe` (default: HOST/PID);
    /// not `__REVOKE__`.
    #[arg(long, value_parser = contender_id)]
    pub id: Option<String>,
    /// Give up (exit 75, CMD not run) if the lock is not held within D of connecting; 0s
    /// tries once without waiting.
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    pub timeout: Option<Duration>,
    /// Let up to N holders run at once: a semaphore on PATH instead of a lock. Every holder
    /// of PATH must give the same N (another N is refused, exit 64).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub semaphore: Option<u32>,
    #[command(flatten)]
    pub run: Run,
    // Last: its security options end the help, under their own heading.
    #[command(flatten)]
    pub connection: Connection,
}

/// `zk-recipes elect`.
#[derive(Debug, Args)]
pub struct Elect {
    /// The election's path, e.g. /election/indexer.
    #[arg(value_parser = path)]
    pub path: String,
    /// This candidate's id, shown to observers (e.g. the host name); not `__REVOKE__`.
    #[arg(long, value_parser = contender_id)]
    pub id: String,
    /// Run CMD once, as leader, and exit with its status.
    #[arg(long)]
    pub once: bool,
    /// After CMD exits while leading: how long to wait before joining again.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "1s")]
    pub restart_after: Duration,
    #[command(flatten)]
    pub run: Run,
    // Last: its security options end the help, under their own heading.
    #[command(flatten)]
    pub connection: Connection,
}

/// `zk-recipes observe` and `zk-recipes status`.
#[derive(Debug, Args)]
pub struct Observe {
    /// The path of the lock, read/write lock, semaphore, election, group or KeyedMutex root.
    #[arg(value_parser = path)]
    pub path: String,
    /// What PATH is (default: told from its nodes, never from a name alone).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<Kind>,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

/// What `status` and `observe` look at (`--kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// A lock (`lock`, Mutex, Curator's InterProcessMutex): the first contender holds.
    Lock,
    /// A read/write lock (RwLock, Curator's InterProcessReadWriteLock).
    Rwlock,
    /// A semaphore (`lock --semaphore`, Semaphore, Curator's InterProcessSemaphoreV2).
    Semaphore,
    /// An election (`elect`, LeaderElection, Curator's LeaderLatch): the first leads.
    Election,
    /// A group (`join`, Group, Curator's GroupMember): its members and their data.
    Group,
    /// A KeyedMutex root: each child is a key's lock, shown with its holder or free.
    Keyed,
    /// A Partitioner's path: its members, and each partition with its holder or free.
    Partitioner,
}

/// `zk-recipes members`.
#[derive(Debug, Args)]
pub struct Members {
    /// The group's path, e.g. /services/orders/members.
    #[arg(value_parser = path)]
    pub path: String,
    /// Print a line now and one on every change, until a signal.
    #[arg(long)]
    pub watch: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

/// `zk-recipes join`.
#[derive(Debug, Args)]
pub struct Join {
    /// The group's path, e.g. /services/orders/members.
    #[arg(value_parser = path)]
    pub path: String,
    /// This member's id: the node's name (one path component: no '/', not '.' or '..').
    #[arg(long)]
    pub id: String,
    /// The member's data, e.g. its address (default: none).
    #[arg(long, value_name = "D", default_value = "")]
    pub data: String,
    /// If ID's node is another session's (this member's previous run, killed, whose session
    /// the servers have not expired yet), wait up to D for it to go, then join; a node
    /// still there after D is refused (exit 69). Never takes over a live member's node.
    #[arg(long, value_name = "D", value_parser = duration::parse)]
    pub wait: Option<Duration>,
    #[command(flatten)]
    pub run: Run,
    // Last: its security options end the help, under their own heading.
    #[command(flatten)]
    pub connection: Connection,
}

/// `revoke PATH`.
#[derive(Debug, Args)]
pub struct Revoke {
    /// The path of a lock, a read/write lock or an election (Rust's or Curator's); not a
    /// semaphore's.
    #[arg(value_parser = path)]
    pub path: String,
    #[command(flatten)]
    pub connection: Connection,
}

/// How to reach ZooKeeper.
#[derive(Debug, Args)]
pub struct Connection {
    /// ZooKeeper servers: `host:port[,host:port...][/chroot]`.
    #[arg(long, env = "ZK_HOSTS", default_value = "127.0.0.1:2181")]
    pub hosts: String,
    /// The session timeout to ask the servers for: how long after zk-recipes is cut off or
    /// killed its lock or leadership can pass to another.
    #[arg(long, value_name = "D", value_parser = duration::positive, default_value = "10s")]
    pub session_timeout: Duration,
    /// How long to try to reach a server before giving up (exit 69).
    #[arg(long, value_name = "D", value_parser = duration::positive, default_value = "10s")]
    pub connect_timeout: Duration,
    #[command(flatten)]
    pub security: Security,
}

/// Credentials and TLS. Secrets are read from files, never taken from the command line,
/// where `ps` shows them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Security")]
pub struct Security {
    /// A file of one line `user:password`: authenticate with ZooKeeper's digest scheme (a
    /// warning if others may read it).
    #[arg(long, value_name = "PATH", env = "ZK_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    /// Authenticate with SASL DIGEST-MD5 instead, as the user of --auth-file: the servers
    /// check the password at connect (exit 69 if wrong).
    #[arg(long, requires = "auth_file")]
    pub sasl: bool,
    /// Connect over TLS, trusting the CA certificates of this PEM file.
    #[arg(long, value_name = "PATH", env = "ZK_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// The client certificate (PEM) for servers that ask for one; needs --tls-key.
    #[arg(long, value_name = "PATH", env = "ZK_TLS_CERT", requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM; a warning if others may read it).
    #[arg(long, value_name = "PATH", env = "ZK_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// Who may touch the nodes that `lock` and `elect` create (see `zk_recipes::NodeAcl`).
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum NodeAclOption {
    /// Anyone may do anything.
    #[default]
    Open,
    /// Only the identity of --auth-file (or of the client certificate).
    CreatorOnly,
    /// The creator may do anything, anyone may read (observers without credentials).
    CreatorAllWorldRead,
}

/// What is held while CMD runs, and CMD.
#[derive(Debug, Args)]
pub struct Run {
    /// After a loss: how long CMD has between SIGTERM and SIGKILL.
    #[arg(long, value_name = "D", value_parser = duration::parse, default_value = "5s")]
    pub kill_after: Duration,
    /// Keep trusting the lock or leadership while the connection is down, for up to a third
    /// of the session timeout (default: a lost connection counts as a loss at once).
    #[arg(long)]
    pub tolerate_suspension: bool,
    /// Who may touch the nodes created on PATH (the root and parents it makes, and its own
    /// node); existing nodes keep their ACL.
    #[arg(long, value_name = "ACL", default_value = "open")]
    pub node_acl: NodeAclOption,
    /// When someone asks the holder to let go (`zk-recipes revoke`, Curator's Revoker):
    /// `release` stops CMD as on a loss and exits 80; `ignore` keeps holding.
    #[arg(long, value_name = "WHAT", default_value = "ignore")]
    pub on_revoke: OnRevoke,
    /// The command to run, after `--`, with its arguments. It runs in a process group of
    /// its own, with zk-recipes' standard input and output.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

const LOCK_EXAMPLES: &str = "\
Examples:
  # Run the nightly backup on one machine at a time; give up after a minute of waiting:
  zk-recipes lock --hosts zk1:2181,zk2:2181,zk3:2181 --timeout 1m /locks/backup -- ./backup.sh

  # Show who holds it as `backup@host-3` rather than HOST/PID:
  zk-recipes lock --id \"backup@$(hostname)\" /locks/backup -- ./backup.sh

  # Pass the fencing token on to the resource:
  zk-recipes lock /locks/orders -- sh -c 'migrate --fencing-token \"$ZK_FENCING_TOKEN\"'

  # At most 4 crawlers at once, across machines:
  zk-recipes lock --semaphore 4 /semaphores/crawl -- ./crawl.sh

  # A secured ensemble: TLS with a client certificate, digest credentials from a file,
  # nodes only this identity may touch:
  export ZK_TLS_CA=ca.pem ZK_TLS_CERT=client.pem ZK_TLS_KEY=client.key ZK_AUTH_FILE=auth
  zk-recipes lock --hosts zk1:2281 --node-acl creator-only /locks/orders -- ./migrate.sh";

const ELECT_EXAMPLES: &str = "\
Examples:
  # Run the indexer on exactly one of several machines; a standby takes over when it dies:
  zk-recipes elect /election/indexer --id \"$(hostname)\" --session-timeout 4s -- ./indexer

  # Lead once, then exit with the job's status:
  zk-recipes elect --once /election/report --id \"$(hostname)\" -- ./report.sh";

const REVOKE_EXAMPLES: &str = "\
Examples:
  # Ask the holder of the backup lock to let go (it runs `lock --on-revoke=release`):
  zk-recipes revoke /locks/backup";

const OBSERVE_EXAMPLES: &str = "\
Examples:
  zk-recipes observe /election/indexer
  zk-recipes observe --json /locks/backup | jq -c .holder";

const STATUS_EXAMPLES: &str = "\
Examples:
  zk-recipes status /election/indexer
  zk-recipes status --json /locks/backup
  zk-recipes status /semaphores/crawlers
  zk-recipes status --kind keyed /locks/jobs    # each key with its holder, or free";

const MEMBERS_EXAMPLES: &str = "\
Examples:
  zk-recipes members /services/orders/members
  zk-recipes members --watch --json /services/orders/members | jq -c '[.members[].id]'";

const JOIN_EXAMPLES: &str = "\
Examples:
  # Serve, and be listed as a member while serving:
  zk-recipes join /services/orders/members --id \"$(hostname)\" --data 10.0.0.7:8080 -- ./serve

  # Restarted at once after a crash: wait for the previous run's node (session 10s) to go:
  zk-recipes join /services/orders/members --id \"$(hostname)\" --wait 15s -- ./serve";

/// A command's examples followed by the exit statuses.
fn help(examples: &str) -> String {
    format!("{examples}\n\n{}", status::HELP)
}

/// What `lock` does when someone asks the holder to let go (`--on-revoke`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OnRevoke {
    /// Keep holding; the request is logged at `-v` only.
    #[default]
    Ignore,
    /// Stop CMD as on a loss (SIGTERM, SIGKILL after --kill-after), let go, and exit 80.
    Release,
}
