//! A [`Forwarder`]: a TCP port that can be pointed at another server while clients use it,
//! to make a client's next connection reach a server that knows neither its session nor
//! its credentials.

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Forwards `127.0.0.1:<own port>` to the client port of one server, which
/// [`retarget`](Self::retarget) changes. Dropping it stops it.
pub struct Forwarder {
    address: String,
    target: watch::Sender<u16>,
    accepted: watch::Receiver<usize>,
}

impl Forwarder {
    /// Forwards to the server on `127.0.0.1:server_port`. Must be called within a tokio
    /// runtime, which runs it.
    pub async fn start(server_port: u16) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a forwarder");
        let address = listener.local_addr().unwrap().to_string();
        let (target, targets) = watch::channel(server_port);
        let (count, accepted) = watch::channel(0);
        tokio::spawn(accept_loop(listener, targets, count));
        Forwarder {
            address,
            target,
            accepted,
        }
    }

    /// Connect string for a client that should go through the forwarder.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// Forwards new connections to `server_port` from now on, and drops the current ones.
    pub fn retarget(&self, server_port: u16) {
        self.target.send_replace(server_port);
    }

    /// How many connections it accepted so far (also those whose server refused them).
    pub fn accepted(&self) -> watch::Receiver<usize> {
        self.accepted.clone()
    }
}

async fn accept_loop(
    listener: TcpListener,
    mut targets: watch::Receiver<u16>,
    count: watch::Sender<usize>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                count.send_modify(|n| *n += 1);
                tokio::spawn(forward(client, targets.clone()));
            }
            changed = targets.changed() => {
                if changed.is_err() {
                    return; // the forwarder was dropped
                }
            }
        }
    }
}

/// Copies both ways until either side closes or the target changes.
async fn forward(mut client: TcpStream, mut target: watch::Receiver<u16>) {
    let port = *target.borrow_and_update();
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", port)).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = target.changed() => {}
    }
}
