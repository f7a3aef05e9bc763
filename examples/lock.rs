//! Several workers, each on its own ZooKeeper session, increment one counter stored in a
//! znode: read it, think, write it back. Without the lock, increments would be lost; with
//! it the final count is exactly `workers × rounds`.
//!
//! The counter also keeps the fencing token of the last writer, and a write carrying an
//! older token is refused: what a resource should do so that a holder that lost its lock
//! without knowing cannot overwrite a newer holder's work.
//!
//! ```text
//! cargo run --example lock -- [workers] [rounds]      # ZK_HOSTS overrides the ensemble
//! ```
//!
//! Against a secured ensemble, see `examples/common/mod.rs` (`ZK_AUTH_FILE`, `ZK_TLS_*`).

use std::time::Duration;

mod common;

use zk_recipes::Mutex;
use zookeeper_client::{Acls, Client, CreateMode};

const ROOT: &str = "/zk-recipes-demo";
const LOCK: &str = "/zk-recipes-demo/counter-lock";
const COUNTER: &str = "/zk-recipes-demo/counter";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let hosts = common::hosts();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let workers = args.next().transpose()?.unwrap_or(4);
    let rounds = args.next().transpose()?.unwrap_or(10);

    let setup = common::builder()?.connect(&hosts).await?;
    let admin = setup.client().ok_or("no live session")?;
    reset_counter(&admin).await?;
    println!("{workers} workers × {rounds} increments on {COUNTER}, under the lock {LOCK}");

    let mut tasks = Vec::new();
    for worker in 0..workers {
        let hosts = hosts.clone();
        tasks.push(tokio::spawn(async move {
            let session = common::builder()?.connect(&hosts).await?;
            let mutex = Mutex::new(&session, LOCK)?;
            for _ in 0..rounds {
                let guard = mutex.lock().await?;
                let token = guard.fencing_token();
                let client = session.client().ok_or("no live session")?;
                let value = increment(&client, token).await?;
                println!("worker {worker}: counter = {value:>3}  (fencing token {token:#x})");
                guard.release().await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for task in tasks {
        task.await?.map_err(|e| e.to_string())?;
    }

    let (count, _) = read(&admin).await?;
    let expected = workers * rounds;
    println!("final count: {count} (expected {expected})");
    if count != expected {
        return Err(format!("lost updates: {count} != {expected}").into());
    }
    println!("mutual exclusion held: no update was lost");
    Ok(())
}

async fn reset_counter(admin: &Client) -> Result<(), zookeeper_client::Error> {
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    match admin.create(ROOT, b"", &persistent).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(err) => return Err(err),
    }
    match admin.create(COUNTER, b"0 0", &persistent).await {
        Ok(_) => Ok(()),
        Err(zookeeper_client::Error::NodeExists) => {
            admin.set_data(COUNTER, b"0 0", None).await.map(|_| ())
        }
        Err(err) => Err(err),
    }
}

/// The counter and the token of its last writer.
async fn read(client: &Client) -> Result<(u64, u64), Box<dyn std::error::Error + Send + Sync>> {
    let (data, _) = client.get_data(COUNTER).await?;
    let text = String::from_utf8(data)?;
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    let count = fields.next().ok_or("empty counter")??;
    let token = fields.next().ok_or("no token")??;
    Ok((count, token))
}

/// Read, think, write: loses updates unless the caller holds the lock. Refuses a stale
/// token (fencing).
async fn increment(
    client: &Client,
    token: u64,
) -> Result<u64, Box<dyn std::error::Error + Send + Sync>> {
    let (count, last_token) = read(client).await?;
    if token < last_token {
        return Err(
            format!("stale fencing token {token:#x} < {last_token:#x}: write refused").into(),
        );
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let next = count + 1;
    client
        .set_data(COUNTER, format!("{next} {token}").as_bytes(), None)
        .await?;
    Ok(next)
}
