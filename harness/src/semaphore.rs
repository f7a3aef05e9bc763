//! A semaphore's nodes seen from outside: its leases under `<path>/leases`, its internal
//! mutex under `<path>/locks`.

use zookeeper_client::Client;

use crate::znodes::await_empty;

/// The children a semaphore keeps under its path, for [`Fixture::keeping`](crate::Fixture::keeping).
pub const NODES: &[&str] = &["leases", "locks"];

/// Where a semaphore on `path` keeps its leases.
pub fn leases(path: &str) -> String {
    format!("{path}/leases")
}

/// Where a semaphore on `path` keeps the nodes of its internal mutex.
pub fn locks(path: &str) -> String {
    format!("{path}/locks")
}

/// Waits until neither leases nor the internal mutex's nodes are left under `path`.
pub async fn await_nothing_left(outside: &Client, path: &str) {
    await_empty(outside, &leases(path)).await;
    await_empty(outside, &locks(path)).await;
}
