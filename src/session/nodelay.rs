//! `TCP_NODELAY` on the client's sockets: a workaround for zookeeper-client, which never sets
//! it (0.11.0 to 0.11.2, the versions this crate builds with; drop this module once the
//! crate requires a version that sets it or lets the caller configure its sockets).
//!
//! Without it, Nagle's algorithm holds a request back while an earlier one is still
//! unacknowledged, and the server's acknowledgement usually rides on its reply: two
//! requests sent back to back (the create and the listing of an entry) cost two round
//! trips on the wire instead of one. zookeeper-client opens its sockets itself and shows
//! no way to configure them, so after every connect and reconnect the session looks for
//! them: among the process's descriptors (`/proc/self/fd`), the TCP sockets whose peer is
//! one of the session's own servers (address and port, the connect string's host names
//! resolved), and sets `TCP_NODELAY` on those that do not have it yet (read with
//! `getsockopt`). Nothing is remembered between looks: the memory used does not grow with
//! the number of sessions or sockets. Another connection of the process to the same server
//! (another client of it, in the same process) may get `TCP_NODELAY` too, which only makes
//! it faster.
//!
//! The look reads a directory and makes a few system calls per descriptor, so it runs on
//! tokio's blocking threads, never on the runtime's workers.
//!
//! Linux only; elsewhere this does nothing, and pipelined requests cost a round trip each.

use std::collections::HashSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use tokio::task::JoinHandle;
use tracing::debug;

use super::hosts::Host;

/// The servers of one session, whose connections get `TCP_NODELAY`.
#[derive(Clone, Debug)]
pub(crate) struct Servers {
    hosts: Arc<[Host]>,
}

impl Servers {
    /// The servers of a connect string, as the dialer read it.
    pub(crate) fn new(hosts: Arc<[Host]>) -> Servers {
        Servers { hosts }
    }

    /// Sets `TCP_NODELAY` on the process's sockets connected to one of the servers that do
    /// not have it yet, on a blocking thread; the handle resolves to how many it set.
    /// Dropping the handle leaves the work to finish by itself.
    pub(crate) fn set_nodelay(&self) -> JoinHandle<usize> {
        let hosts = self.hosts.clone();
        tokio::task::spawn_blocking(move || {
            let set = set_nodelay_to(&addresses(&hosts));
            debug!(sockets = set, "TCP_NODELAY set on the client's connections");
            set
        })
    }
}

/// The addresses `hosts` resolve to (blocking: names may need DNS).
fn addresses(hosts: &[Host]) -> HashSet<SocketAddr> {
    hosts
        .iter()
        .filter_map(|host| (host.host.as_str(), host.port).to_socket_addrs().ok())
        .flatten()
        .collect()
}

/// Sets `TCP_NODELAY` where it is not set yet on the sockets whose peer is in `peers`;
/// how many it set.
fn set_nodelay_to(peers: &HashSet<SocketAddr>) -> usize {
    if peers.is_empty() {
        return 0;
    }
    sys::descriptors()
        .filter(|&fd| sys::peer(fd).is_some_and(|peer| peers.contains(&peer)))
        .filter(|&fd| sys::nodelay(fd) == Some(false))
        .filter(|&fd| sys::set_nodelay(fd))
        .count()
}

#[cfg(target_os = "linux")]
mod sys {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
    use std::os::fd::RawFd;

    /// The process's open descriptors.
    pub(super) fn descriptors() -> impl Iterator<Item = RawFd> {
        let entries = std::fs::read_dir("/proc/self/fd").into_iter().flatten();
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
    }

    /// The peer of a connected IPv4 or IPv6 socket.
    pub(super) fn peer(fd: RawFd) -> Option<SocketAddr> {
        // SAFETY: getpeername writes at most `len` bytes into the zeroed storage it is
        // given; a descriptor that is not (or no longer) a socket only makes it fail.
        let (storage, result) = unsafe {
            let mut storage: libc::sockaddr_storage = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            let result = libc::getpeername(fd, std::ptr::addr_of_mut!(storage).cast(), &mut len);
            (storage, result)
        };
        if result != 0 {
            return None;
        }
        match i32::from(storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let addr: libc::sockaddr_in = unsafe { std::mem::transmute_copy(&storage) };
                let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
                Some(SocketAddr::from((ip, u16::from_be(addr.sin_port))))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let addr: libc::sockaddr_in6 = unsafe { std::mem::transmute_copy(&storage) };
                let ip = Ipv6Addr::from(addr.sin6_addr.s6_addr);
                let port = u16::from_be(addr.sin6_port);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    port,
                    addr.sin6_flowinfo,
                    addr.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    /// Whether `TCP_NODELAY` is set; `None` if it cannot be read (not a TCP socket).
    pub(super) fn nodelay(fd: RawFd) -> Option<bool> {
        let mut on: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: passes a pointer to a live c_int and its size; a descriptor that is not a
        // TCP socket only makes it fail.
        let result = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                std::ptr::addr_of_mut!(on).cast(),
                &mut len,
            )
        };
        (result == 0).then_some(on != 0)
    }

    /// Sets `TCP_NODELAY`; whether it was set.
    pub(super) fn set_nodelay(fd: RawFd) -> bool {
        let on: libc::c_int = 1;
        // SAFETY: passes a pointer to a live c_int and its size; a descriptor that is not
        // a TCP socket only makes it fail.
        let result = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                std::ptr::addr_of!(on).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        result == 0
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::net::SocketAddr;

    pub(super) fn descriptors() -> impl Iterator<Item = i32> {
        std::iter::empty()
    }

    pub(super) fn peer(_: i32) -> Option<SocketAddr> {
        None
    }

    pub(super) fn nodelay(_: i32) -> Option<bool> {
        None
    }

    pub(super) fn set_nodelay(_: i32) -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn of(target: &str) -> Servers {
        Servers::new(crate::session::hosts::parse(target, false).unwrap().into())
    }

    #[test]
    fn resolves_every_entry_of_a_connect_string() {
        let servers = of("127.0.0.1:1,tcp+tls://127.0.0.1:2,tcp://[::1]:3/chroot");
        let resolved = addresses(&servers.hosts);
        let expected: HashSet<SocketAddr> = ["127.0.0.1:1", "127.0.0.1:2", "[::1]:3"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(resolved, expected);
    }

    #[tokio::test]
    async fn sets_nodelay_only_on_connections_to_the_servers_address_and_port() {
        // Listens on every local address: 127.0.0.2 is another peer on the same port.
        let listener = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let servers = of(&format!("tcp+tls://127.0.0.1:{port}"));
        let ours = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let same_port = TcpStream::connect(("127.0.0.2", port)).unwrap();
        let other_port = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert_eq!(servers.set_nodelay().await.unwrap(), 1);
        assert!(ours.nodelay().unwrap());
        assert!(!same_port.nodelay().unwrap());
        assert!(!other_port.nodelay().unwrap());
        // Set already: nothing more to do.
        assert_eq!(servers.set_nodelay().await.unwrap(), 0);
    }
}
