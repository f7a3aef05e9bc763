//! A TCP proxy that delays every byte by a fixed time in each direction, so that round
//! trips are measured as they are between machines (0.2–2 ms), not on loopback.
//!
//! Each direction of each connection has a reader thread, which stamps what it reads with
//! the instant it arrived, and a writer thread, which sends it on once the delay has
//! passed. The writer sleeps until shortly before that instant and spins the rest, so the
//! delay is accurate to well under 0.1 ms (tokio's timer has 1 ms granularity). Both
//! sockets have `TCP_NODELAY`, so the proxy itself never holds bytes back.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long before the due instant a writer stops sleeping and spins.
const SPIN: Duration = Duration::from_micros(120);

pub struct DelayProxy {
    address: SocketAddr,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`,
    /// delaying each direction by `one_way`. Runs until the process ends.
    pub fn start(upstream: &str, one_way: Duration) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the delay proxy");
        let address = listener.local_addr().expect("proxy address");
        let upstream: SocketAddr = upstream.parse().expect("upstream address");
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if let Ok(server) = TcpStream::connect(upstream) {
                    join(client, server, one_way);
                }
            }
        });
        DelayProxy { address }
    }

    pub fn address(&self) -> String {
        self.address.to_string()
    }
}

/// Forwards both directions between `a` and `b`.
fn join(a: TcpStream, b: TcpStream, one_way: Duration) {
    for socket in [&a, &b] {
        socket
            .set_nodelay(true)
            .expect("TCP_NODELAY on a proxy socket");
    }
    let (a2, b2) = (
        a.try_clone().expect("clone socket"),
        b.try_clone().expect("clone socket"),
    );
    forward(a, b, one_way);
    forward(b2, a2, one_way);
}

/// Copies what arrives on `from` to `to`, each chunk `delay` after it arrived.
fn forward(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if chunks
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
        let _ = from.shutdown(Shutdown::Both);
    });
    thread::spawn(move || {
        for (at, chunk) in due {
            wait_until(at);
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}

/// Sleeps until just before `at`, then spins to it.
fn wait_until(at: Instant) {
    let now = Instant::now();
    if at > now + SPIN {
        thread::sleep(at - now - SPIN);
    }
    while Instant::now() < at {
        std::hint::spin_loop();
    }
}
