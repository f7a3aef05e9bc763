//! Readers and writers, each on its own ZooKeeper session, share a "catalog" kept in two
//! znodes: a writer updates both in two steps (the version, then the items), so a reader
//! that looked in between would see them disagree. Under the read/write lock readers read
//! together, a writer writes alone, and no reader ever sees a half-written catalog.
//!
//! ```text
//! cargo run --example rwlock -- [readers] [writers] [rounds]   # ZK_HOSTS overrides the ensemble
//! ```
//!
//! Against a secured ensemble, see `examples/common/mod.rs` (`ZK_AUTH_FILE`, `ZK_TLS_*`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::RwLock;
use zookeeper_client::{Acls, Client, CreateMode};

const ROOT: &str = "/zk-recipes-demo";
const LOCK: &str = "/zk-recipes-demo/catalog-lock";
const VERSION: &str = "/zk-recipes-demo/catalog-version";
const ITEMS: &str = "/zk-recipes-demo/catalog-items";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let hosts = common::hosts();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let readers = args.next().transpose()?.unwrap_or(4);
    let writers = args.next().transpose()?.unwrap_or(2);
    let rounds = args.next().transpose()?.unwrap_or(5);

    let setup = common::builder()?.connect(&hosts).await?;
    reset_catalog(&setup.client().ok_or("no live session")?).await?;
    println!("{readers} readers and {writers} writers, {rounds} rounds each, under {LOCK}");

    let reading = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for id in 0..readers + writers {
        let (hosts, reading, most) = (hosts.clone(), reading.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            let session = common::builder()?.connect(&hosts).await?;
            let lock = RwLock::new(&session, LOCK)?;
            let client = session.client().ok_or("no live session")?;
            for _ in 0..rounds {
                if id < writers {
                    let guard = lock.write().await?;
                    let version = write(&client).await?;
                    println!("writer {id}: catalog version {version}");
                    guard.release().await?;
                } else {
                    let guard = lock.read().await?;
                    let now = reading.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let version = read(&client).await?;
                    println!("reader {id}: catalog version {version} ({now} reading)");
                    reading.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await?;
                }
            }
            Ok::<_, BoxError>(())
        }));
    }
    for task in tasks {
        task.await?.map_err(|e| e.to_string())?;
    }
    let most = most.load(Ordering::SeqCst);
    println!("no reader saw a half-written catalog; at most {most} read at once");
    Ok(())
}

async fn reset_catalog(admin: &Client) -> Result<(), zookeeper_client::Error> {
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for (path, data) in [(ROOT, ""), (VERSION, "0"), (ITEMS, "0")] {
        match admin.create(path, data.as_bytes(), &persistent).await {
            Ok(_) => {}
            Err(zookeeper_client::Error::NodeExists) => {
                admin.set_data(path, data.as_bytes(), None).await?;
            }
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

async fn number(client: &Client, path: &str) -> Result<u64, BoxError> {
    let (data, _) = client.get_data(path).await?;
    Ok(String::from_utf8(data)?.trim().parse()?)
}

/// Reads both halves of the catalog (slowly, as a real reader would); they must agree.
async fn read(client: &Client) -> Result<u64, BoxError> {
    let version = number(client, VERSION).await?;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let items = number(client, ITEMS).await?;
    if version != items {
        return Err(format!("half-written catalog: version {version}, items {items}").into());
    }
    Ok(version)
}

/// Writes the next version in two steps: torn for a moment, unless readers are kept out.
async fn write(client: &Client) -> Result<u64, BoxError> {
    let next = number(client, VERSION).await? + 1;
    client
        .set_data(VERSION, next.to_string().as_bytes(), None)
        .await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    client
        .set_data(ITEMS, next.to_string().as_bytes(), None)
        .await?;
    Ok(next)
}
