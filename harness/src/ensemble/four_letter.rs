//! Four-letter words: [`four_letter_at`], and reading what the servers answer to the
//! words about watches (`wchs`, `wchp`, `mntr`).

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a four-letter word may take before it counts as "no answer".
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends `cmd` to the server at `address`, reads the answer to EOF.
/// Empty when the server cannot be reached or does not answer in time.
pub async fn four_letter_at(address: &str, cmd: &str) -> String {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await?;
        stream.write_all(cmd.as_bytes()).await?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await?;
        io::Result::Ok(String::from_utf8_lossy(&out).into_owned())
    };
    match tokio::time::timeout(FOUR_LETTER_TIMEOUT, exchange).await {
        Ok(Ok(out)) => out,
        _ => String::new(),
    }
}

/// The `Total watches:N` of a `wchs` answer (0 without one).
pub(super) fn total_watches(wchs: &str) -> usize {
    wchs.lines()
        .find_map(|l| l.trim().strip_prefix("Total watches:"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0)
}

/// The `zk_watch_count` of a `mntr` answer (0 without one): data and child watches.
pub(super) fn mntr_watch_count(mntr: &str) -> usize {
    mntr.lines()
        .find_map(|l| l.strip_prefix("zk_watch_count"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0)
}

/// The (path, session) pairs of a `wchp` answer: each path on a line of its own, then the
/// sessions that watch it, indented, one a line.
pub(super) fn path_watches(wchp: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut path = None;
    wchp.lines().filter_map(move |line| {
        if !line.starts_with(char::is_whitespace) {
            path = Some(line.trim());
            return None;
        }
        path.map(|path| (path, line.trim()))
    })
}
