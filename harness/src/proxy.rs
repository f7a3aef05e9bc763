//! A TCP proxy in front of one server, to cut one client off the ensemble, to hold back
//! its requests while the server's messages still reach it, to drop the connection
//! whenever the client sends a request of a chosen kind, or to list the requests it
//! passed on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Open,
    /// Forwards what the server sends; holds back what the client sends.
    Muted,
    /// Forwards both ways, but what the server sends only a few bytes at a time, with a
    /// pause between: every message reaches the client apart from the next.
    Trickling,
    Cut,
    /// Forwards nothing either way, and keeps the connections open: neither side hears
    /// anything, not even the other side closing.
    Frozen,
    Closed,
}

/// Which requests a proxy refuses to pass on: of this opcode, this many more times; and
/// the opcodes of those it passed on.
#[derive(Debug, Default)]
struct Drops {
    opcode: i32,
    left: usize,
    dropped: usize,
    passed: Vec<i32>,
}

/// Forwards `127.0.0.1:<own port>` to one server's client port. Dropping it stops it.
pub struct Proxy {
    address: String,
    state: watch::Sender<State>,
    drops: Arc<Mutex<Drops>>,
}

impl Proxy {
    pub(crate) fn start(listener: std::net::TcpListener, server_port: u16) -> Proxy {
        listener
            .set_nonblocking(true)
            .expect("non-blocking proxy listener");
        let listener = TcpListener::from_std(listener).expect("proxy listener in tokio");
        let address = listener.local_addr().unwrap().to_string();
        let (state, _) = watch::channel(State::Open);
        let states = state.subscribe();
        let drops = Arc::new(Mutex::new(Drops::default()));
        tokio::spawn(accept_loop(listener, server_port, states, drops.clone()));
        Proxy {
            address,
            state,
            drops,
        }
    }

    /// From now on, the next `times` requests of ZooKeeper opcode `opcode` (2 delete, 14
    /// multi, 1 create, ...) never reach the server: the proxy closes the client's connection
    /// instead of passing each on, so the client cannot know whether it took effect.
    /// Requests sent before it on the same connection are passed on.
    pub fn drop_requests(&self, opcode: i32, times: usize) {
        let mut drops = self.drops.lock().expect("drops");
        drops.opcode = opcode;
        drops.left = times;
    }

    /// How many requests [`drop_requests`](Self::drop_requests) has kept from the server.
    pub fn dropped(&self) -> usize {
        self.drops.lock().expect("drops").dropped
    }

    /// The ZooKeeper opcodes of the requests passed on so far, in the order they were
    /// passed on (connect requests left out; pings, opcode 11, included).
    pub fn requests(&self) -> Vec<i32> {
        self.drops.lock().expect("drops").passed.clone()
    }

    /// The opcodes of the requests passed on after the first `from` of them, pings left
    /// out (see [`requests`](Self::requests)).
    pub fn sent_since(&self, from: usize) -> Vec<i32> {
        /// ZooKeeper's opcode of a ping.
        const PING: i32 = 11;
        let passed = &self.drops.lock().expect("drops").passed;
        let since = passed.get(from..).unwrap_or_default();
        since.iter().copied().filter(|&op| op != PING).collect()
    }

    /// Connect string for a client that should go through the proxy.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// Drops every current connection and refuses new ones (accepts and closes
    /// them at once) until [`Proxy::restore`].
    pub fn cut(&self) {
        self.state.send_replace(State::Cut);
    }

    /// Holds back everything clients send (it stays unread, in the sockets' buffers) while
    /// still forwarding what the server sends, until [`Proxy::restore`]: a client then hears
    /// its watch notifications but none of its requests reach the server.
    pub fn mute(&self) {
        self.state.send_replace(State::Muted);
    }

    /// Forwards both ways, but what the server sends a few bytes at a time, with pauses
    /// between, until [`Proxy::restore`]: the client gets each message apart from the next
    /// (a client that reads two notifications in one go could not show in which order it
    /// acts on them).
    pub fn trickle(&self) {
        self.state.send_replace(State::Trickling);
    }

    /// Forwards nothing either way until [`Proxy::restore`], keeping every connection open:
    /// a client then hears nothing, not even the server closing its connection, until its
    /// own timers tell it.
    pub fn freeze(&self) {
        self.state.send_replace(State::Frozen);
    }

    /// Accepts and forwards again (in both directions).
    pub fn restore(&self) {
        self.state.send_replace(State::Open);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.send_replace(State::Closed);
    }
}

async fn accept_loop(
    listener: TcpListener,
    server_port: u16,
    mut states: watch::Receiver<State>,
    drops: Arc<Mutex<Drops>>,
) {
    loop {
        tokio::select! {
            changed = states.changed() => {
                if changed.is_err() || *states.borrow() == State::Closed {
                    return;
                }
            }
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                if !forwarding(*states.borrow()) {
                    drop(client);
                    continue;
                }
                tokio::spawn(forward(client, server_port, states.clone(), drops.clone()));
            }
        }
    }
}

fn forwarding(state: State) -> bool {
    matches!(
        state,
        State::Open | State::Muted | State::Trickling | State::Frozen
    )
}

async fn forward(
    client: TcpStream,
    server_port: u16,
    states: watch::Receiver<State>,
    drops: Arc<Mutex<Drops>>,
) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let mut cut_states = states.clone();
    let cut = async {
        loop {
            if cut_states.changed().await.is_err() || !forwarding(*cut_states.borrow()) {
                return;
            }
        }
    };
    tokio::select! {
        _ = downstream(&mut from_server, &mut to_client, states.clone()) => {}
        _ = upstream(&mut from_client, &mut to_server, states, &drops) => {}
        _ = cut => {}
    }
    // Both sockets drop here: the client sees its connection end.
}

/// How many bytes a trickling proxy sends at a time, and the pause after each.
const TRICKLE: (usize, Duration) = (8, Duration::from_millis(1));

/// Copies server to client, a few bytes at a time while trickling; returns when either side
/// closes.
async fn downstream(
    from: &mut OwnedReadHalf,
    to: &mut OwnedWriteHalf,
    states: watch::Receiver<State>,
) -> std::io::Result<()> {
    let mut buf = vec![0; 16 * 1024];
    let mut states = states;
    loop {
        while *states.borrow_and_update() == State::Frozen {
            if states.changed().await.is_err() {
                return Ok(());
            }
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => read?,
            changed = states.changed() => match changed {
                Ok(()) => continue,
                Err(_) => return Ok(()),
            },
        };
        if n == 0 {
            return Ok(());
        }
        if *states.borrow() != State::Trickling {
            to.write_all(&buf[..n]).await?;
            continue;
        }
        for chunk in buf[..n].chunks(TRICKLE.0) {
            to.write_all(chunk).await?;
            tokio::time::sleep(TRICKLE.1).await;
        }
    }
}

/// Copies client to server except while muted, a whole request at a time; returns when
/// either side closes, or instead of passing on a request that is to be dropped.
async fn upstream(
    from: &mut OwnedReadHalf,
    to: &mut OwnedWriteHalf,
    mut states: watch::Receiver<State>,
    drops: &Mutex<Drops>,
) -> std::io::Result<()> {
    let mut buf = vec![0; 16 * 1024];
    let mut frames = Frames::default();
    loop {
        while matches!(*states.borrow_and_update(), State::Muted | State::Frozen) {
            if states.changed().await.is_err() {
                return Ok(());
            }
        }
        tokio::select! {
            read = from.read(&mut buf) => {
                let n = read?;
                if n == 0 {
                    return Ok(());
                }
                frames.pending.extend_from_slice(&buf[..n]);
                while let Some(frame) = frames.next() {
                    if frames.seen > 1 && !pass(drops, &frame) {
                        return Ok(());
                    }
                    to.write_all(&frame).await?;
                }
            }
            changed = states.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
            }
        }
    }
}

/// The client's bytes cut into ZooKeeper frames (a 4-byte big-endian length, then that
/// many bytes); the first frame of a connection is its connect request.
#[derive(Default)]
struct Frames {
    pending: Vec<u8>,
    /// How many frames were taken so far, this one included.
    seen: usize,
}

impl Frames {
    fn next(&mut self) -> Option<Vec<u8>> {
        let header: [u8; 4] = self.pending.get(..4)?.try_into().ok()?;
        let len = 4 + usize::try_from(u32::from_be_bytes(header)).ok()?;
        if self.pending.len() < len {
            return None;
        }
        self.seen += 1;
        Some(self.pending.drain(..len).collect())
    }
}

/// Whether `frame` (a request: length, xid, opcode, ...) is to be passed on; counts it as
/// passed on or as dropped.
fn pass(drops: &Mutex<Drops>, frame: &[u8]) -> bool {
    let Some(opcode) = frame.get(8..12).and_then(|b| b.try_into().ok()) else {
        return true;
    };
    let opcode = i32::from_be_bytes(opcode);
    let mut drops = drops.lock().expect("drops");
    if drops.left == 0 || opcode != drops.opcode {
        drops.passed.push(opcode);
        return true;
    }
    drops.left -= 1;
    drops.dropped += 1;
    false
}
