//! The recipes: each a thin shell over the queue (`crate::queue`) and the hold core
//! (`crate::hold`), holding its type's whole public surface in one file or one folder with a
//! front door. `contenders` (the listing every recipe's `contenders()` shares, and contender
//! ids) and `view` (the live view behind `Group::watch_members` and
//! `LeaderElection::watch_leader`) are what recipes share.

pub(crate) mod cache;
pub(crate) mod contenders;
pub(crate) mod counter;
pub(crate) mod election;
pub(crate) mod group;
pub(crate) mod keyed;
pub(crate) mod lock;
pub(crate) mod multi;
pub(crate) mod partition;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod view;
