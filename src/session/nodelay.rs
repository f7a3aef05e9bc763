//! `TCP_NODELAY` on the client's socket: a workaround for zookeeper-client 0.11, which does
//! not set it.
//!
//! Without it, Nagle's algorithm holds a request back while an earlier one is still
//! unacknowledged, and the server's acknowledgement usually rides on its reply: two
//! requests sent back to back (the create and the listing of an entry) cost two round
//! trips on the wire instead of one. zookeeper-client opens its sockets itself and shows
//! no way to configure them, so the session finds them: it remembers the process's TCP
//! sockets (`/proc/self/fd`) before it connects, and after every connect and reconnect
//! sets `TCP_NODELAY` on the sockets opened since, whose peer port is one of the connect
//! string's. Another ZooKeeper client of the process that connects to the same ports at
//! the same moment may get `TCP_NODELAY` too, which only makes it faster.
//!
//! Linux only; elsewhere this does nothing, and pipelined requests cost a round trip each.

use std::collections::HashSet;

use tracing::debug;

/// The ports a connect string names (`host:port,host:port/chroot`; 2181 by default).
fn ports(hosts: &str) -> Vec<u16> {
    let hosts = hosts.split('/').next().unwrap_or_default();
    hosts
        .split(',')
        .map(|host| {
            host.rsplit_once(':')
                .and_then(|(_, port)| port.parse().ok())
                .unwrap_or(2181)
        })
        .collect()
}

/// The TCP sockets of this process seen so far, and the ports of a session's servers.
#[derive(Debug)]
pub(crate) struct Sockets {
    seen: HashSet<u64>,
    ports: Vec<u16>,
}

impl Sockets {
    /// The sockets open now, for a session that connects to `hosts`.
    pub(crate) fn before_connecting(hosts: &str) -> Sockets {
        Sockets {
            seen: sys::sockets().map(|(_, inode)| inode).collect(),
            ports: ports(hosts),
        }
    }

    /// Sets `TCP_NODELAY` on the sockets opened since the last look that are connected to
    /// one of the session's ports, and remembers every socket open now.
    pub(crate) fn set_nodelay_on_new(&mut self) {
        let mut set = 0;
        let mut seen = HashSet::new();
        for (fd, inode) in sys::sockets() {
            seen.insert(inode);
            let new = !self.seen.contains(&inode);
            if new && sys::peer_port(fd).is_some_and(|port| self.ports.contains(&port)) {
                set += usize::from(sys::set_nodelay(fd));
            }
        }
        self.seen = seen;
        debug!(
            sockets = set,
            "TCP_NODELAY set on the client's new connection"
        );
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::os::fd::RawFd;

    /// The process's sockets, as (descriptor, inode).
    pub(super) fn sockets() -> impl Iterator<Item = (RawFd, u64)> {
        let entries = std::fs::read_dir("/proc/self/fd").into_iter().flatten();
        entries.flatten().filter_map(|entry| {
            let fd = entry.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            let inode = target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            Some((fd, inode))
        })
    }

    /// The peer port of a connected IPv4 or IPv6 socket.
    pub(super) fn peer_port(fd: RawFd) -> Option<u16> {
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
                Some(u16::from_be(addr.sin_port))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let addr: libc::sockaddr_in6 = unsafe { std::mem::transmute_copy(&storage) };
                Some(u16::from_be(addr.sin6_port))
            }
            _ => None,
        }
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
    pub(super) fn sockets() -> impl Iterator<Item = (i32, u64)> {
        std::iter::empty()
    }

    pub(super) fn peer_port(_: i32) -> Option<u16> {
        None
    }

    pub(super) fn set_nodelay(_: i32) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_ports_of_a_connect_string() {
        assert_eq!(ports("127.0.0.1:2181"), [2181]);
        assert_eq!(ports("a:1,b:2,c/chroot/x"), [1, 2, 2181]);
        assert_eq!(ports("[::1]:2182"), [2182]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sets_nodelay_on_a_new_connection_to_the_port() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut sockets = Sockets::before_connecting(&format!("127.0.0.1:{port}"));
        let old = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        sockets.seen.insert(
            sys::sockets()
                .find(|(fd, _)| *fd == old.as_raw_fd())
                .unwrap()
                .1,
        );
        let new = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        sockets.set_nodelay_on_new();
        assert!(new.nodelay().unwrap());
        assert!(!old.nodelay().unwrap());
    }
}
