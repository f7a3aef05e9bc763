//! Free ports on 127.0.0.1, each handed out once by this process: the servers' (bound
//! later, by the servers) and the proxies' (bound here).

use std::net::TcpListener;
use std::sync::Mutex;

/// Ports this process handed out (servers bind them later; the proxy's are taken).
static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// `n` distinct free ports on 127.0.0.1, never handed out twice by this process.
pub(super) fn free_ports(n: usize) -> Vec<u16> {
    let mut given = GIVEN.lock().unwrap();
    let mut ports = Vec::with_capacity(n);
    // Keep the listeners open until all are chosen so the OS hands out distinct ones.
    let mut held = Vec::new();
    while ports.len() < n {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        held.push(listener);
        if !given.contains(&port) {
            given.push(port);
            ports.push(port);
        }
    }
    ports
}

/// A listener on a free 127.0.0.1 port that is not one handed out to a server
/// which may not have bound it yet.
pub(super) fn reserved_listener() -> TcpListener {
    let mut given = GIVEN.lock().unwrap();
    let mut held = Vec::new();
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return listener;
        }
        held.push(listener);
    }
}
