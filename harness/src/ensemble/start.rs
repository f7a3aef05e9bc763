//! Starting an ensemble: waiting until every server serves (one leads, each answers as
//! itself), or the report of why not, with each server's log tail.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::server::Server;
use crate::launcher;

/// Start failure because another process took a port first: retried.
pub(super) const PORT_CLASH: &str = "port clash";

/// Waits until every one of `servers` serves and one leads (or is standalone), and
/// each answers as itself; why not after `timeout`.
pub(super) async fn wait_all_serving(servers: &[Server], timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut modes = Vec::new();
        for s in servers {
            if !s.is_running() {
                return Err(format!("server {} exited during startup", s.id));
            }
            modes.push(s.mode().await);
        }
        let all = modes.iter().all(Option::is_some);
        let led = modes
            .iter()
            .any(|m| matches!(m.as_deref(), Some("leader") | Some("standalone")));
        if all && led {
            for s in servers {
                if !s.answers_itself().await {
                    return Err(format!(
                        "{PORT_CLASH}: another process answers on {}",
                        s.address()
                    ));
                }
            }
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("not serving after {timeout:?}: modes {modes:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What failed to start and why: each server's log tail.
pub(super) fn failure_report(servers: &[Server], why: &str) -> String {
    let mut report = format!(
        "ZooKeeper ensemble of {} failed to start: {why}\n(class path: {})\n",
        servers.len(),
        launcher::classpath()
    );
    for s in servers {
        let _ = write!(
            report,
            "--- server {} ({}) log tail ---\n{}\n",
            s.id,
            s.log_path().display(),
            s.log_tail(40)
        );
    }
    report
}
