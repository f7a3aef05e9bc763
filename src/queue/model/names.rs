//! The model's nodes by their real names, so that it calls the queue's own decisions
//! ([`decide`](super::super::decide)) on what the code would read: ours
//! `_c_<uuid>-<name><seq>` (`lock-`; `__WRIT__` and `__READ__` where readers take part;
//! `lease-`), a foreign contender's as kazoo names it, `<32 hex digits>__lock__<seq>`. A
//! node's sequence number is its index in the model plus [`FIRST`], just below the 32-bit
//! wrap: a run with three nodes crosses it.

use uuid::Uuid;

use super::super::decide::{sequence, Blockers};
use super::server::{bit, Seq, Server, GONE};
use super::{Config, Kind};

/// The root the model's contenders list.
pub(super) const ROOT: &str = "/model";

/// Every kind of contender.
const KINDS: [Kind; 4] = [Kind::Writer, Kind::Reader, Kind::Foreign, Kind::Lease];

/// The sequence number of the model's first node: its third is `i32::MIN`.
const FIRST: i32 = i32::MAX - 1;

/// The uuid in the names of contender `owner`'s nodes ([`GONE`]: of a node deleted, whose
/// owner the model forgets; only its owner looks for it by uuid, and it makes another
/// whether it finds the name of a node gone or not).
pub(super) fn uuid(owner: u8) -> Uuid {
    Uuid::from_u128(0x5eed_0000 + u128::from(owner))
}

/// The model's sequence number of the node named `name` (a name or a full path).
pub(super) fn seq_of(name: &str) -> Seq {
    let number = sequence(name).unwrap_or_default();
    Seq::try_from(number.wrapping_sub(FIRST)).unwrap_or(Seq::MAX)
}

impl Config {
    /// Whether our exclusive contenders are a read/write lock's writers (readers take part)
    /// rather than a mutex's.
    fn rwlock(&self) -> bool {
        self.kinds.contains(&Kind::Reader)
    }

    /// Who blocks contender `c` of ours, as its recipe says (`Mutex`, `RwLock`,
    /// `Semaphore`).
    pub(super) fn blockers(&self, c: usize) -> Blockers {
        match self.kinds[c] {
            Kind::Writer if self.rwlock() => Blockers::WRITER,
            Kind::Writer => Blockers::EVERY,
            Kind::Reader => Blockers::READER,
            Kind::Lease => Blockers::Crowd(u32::from(self.leases)),
            Kind::Foreign => unreachable!("foreign contenders follow their own rule"),
        }
    }

    /// The name of node `seq`, made by a `kind` contender, `owner`. The names are made once
    /// per configuration: a debug build formats uuids slowly.
    fn name(&self, seq: Seq, kind: Kind, owner: u8) -> &str {
        // Each contender, then the owner of nodes deleted.
        let n = self.kinds.len();
        let names = self.names.get_or_init(|| {
            let owners = (0..n).filter_map(|c| u8::try_from(c).ok()).chain([GONE]);
            let seqs = (0..32).flat_map(|seq| owners.clone().map(move |owner| (seq, owner)));
            seqs.flat_map(|(seq, owner)| KINDS.map(|kind| self.make_name(seq, kind, owner)))
                .collect()
        });
        let owner = usize::from(owner).min(n);
        let kind = KINDS.iter().position(|&k| k == kind).unwrap_or_default();
        &names[(usize::from(seq) * (n + 1) + owner) * KINDS.len() + kind]
    }

    /// The name of node `seq`, made by a `kind` contender, `owner`.
    fn make_name(&self, seq: Seq, kind: Kind, owner: u8) -> String {
        let number = FIRST.wrapping_add(i32::from(seq));
        let name = match kind {
            Kind::Foreign => return format!("{:032x}__lock__{number:010}", u128::from(owner)),
            Kind::Writer if self.rwlock() => "__WRIT__",
            Kind::Writer => "lock-",
            Kind::Reader => "__READ__",
            Kind::Lease => "lease-",
        };
        format!("_c_{}-{name}{number:010}", uuid(owner))
    }

    /// The name of contender `c`'s node `seq`.
    pub(super) fn own_name(&self, c: usize, seq: Seq) -> &str {
        self.name(seq, self.kinds[c], u8::try_from(c).unwrap_or(GONE))
    }

    /// A listing, `live`, as contender `c` whose node is `own` reads it: the children's
    /// names, in no order (the last made first). A node deleted since is named by its kind
    /// and an owner forgotten, unless it is `own`.
    pub(super) fn listing(
        &self,
        server: &Server,
        live: u32,
        c: usize,
        own: Option<Seq>,
    ) -> Vec<String> {
        (0..server.owner.len())
            .rev()
            .filter_map(|seq| Seq::try_from(seq).ok())
            .filter(|&seq| live & bit(seq) != 0)
            .map(|seq| match server.owner[usize::from(seq)] {
                GONE if own == Some(seq) => self.own_name(c, seq).to_owned(),
                owner => self
                    .name(seq, server.made_by[usize::from(seq)], owner)
                    .to_owned(),
            })
            .collect()
    }
}
