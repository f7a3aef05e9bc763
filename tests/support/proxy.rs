//! A TCP proxy in front of one server, to cut one client off the ensemble.

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Open,
    Cut,
    Closed,
}

/// Forwards 127.0.0.1:<own port> to one server's client port. Dropping it stops it.
pub struct Proxy {
    address: String,
    state: watch::Sender<State>,
}

impl Proxy {
    pub(super) fn start(listener: std::net::TcpListener, server_port: u16) -> Proxy {
        listener
            .set_nonblocking(true)
            .expect("non-blocking proxy listener");
        let listener = TcpListener::from_std(listener).expect("proxy listener in tokio");
        let address = listener.local_addr().unwrap().to_string();
        let (state, _) = watch::channel(State::Open);
        let states = state.subscribe();
        tokio::spawn(accept_loop(listener, server_port, states));
        Proxy { address, state }
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

    /// Accepts and forwards again.
    pub fn restore(&self) {
        self.state.send_replace(State::Open);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.send_replace(State::Closed);
    }
}

async fn accept_loop(listener: TcpListener, server_port: u16, mut states: watch::Receiver<State>) {
    loop {
        tokio::select! {
            changed = states.changed() => {
                if changed.is_err() || *states.borrow() == State::Closed {
                    return;
                }
            }
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                if *states.borrow() != State::Open {
                    drop(client);
                    continue;
                }
                tokio::spawn(forward(client, server_port, states.clone()));
            }
        }
    }
}

async fn forward(mut client: TcpStream, server_port: u16, mut states: watch::Receiver<State>) {
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", server_port)).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let cut = async {
        loop {
            if states.changed().await.is_err() || *states.borrow() != State::Open {
                return;
            }
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut => {}
    }
    // Both sockets drop here: the client sees its connection end.
}
