//! Crawlers, each on its own ZooKeeper session, share a semaphore of at most 3 leases: each
//! crawls only while it holds a lease. Every crawler announces itself with an ephemeral
//! znode under a "crawling" node while it crawls and counts who else is there: never more
//! than the maximum, across every session.
//!
//! ```text
//! cargo run --example semaphore -- [crawlers] [rounds] [max]   # ZK_HOSTS overrides the ensemble
//! ```
//!
//! Against a secured ensemble, see `examples/common/mod.rs` (`ZK_AUTH_FILE`, `ZK_TLS_*`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::Semaphore;
use zookeeper_client::{Acls, Client, CreateMode};

const ROOT: &str = "/zk-recipes-demo";
const SEMAPHORE: &str = "/zk-recipes-demo/crawlers";
const CRAWLING: &str = "/zk-recipes-demo/crawling";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let hosts = common::hosts();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u32>());
    let crawlers = args.next().transpose()?.unwrap_or(8);
    let rounds = args.next().transpose()?.unwrap_or(3);
    let max = args.next().transpose()?.unwrap_or(3);

    let setup = common::builder()?.connect(&hosts).await?;
    create_parents(&setup.client().ok_or("no live session")?).await?;
    println!("{crawlers} crawlers × {rounds} rounds, at most {max} at once ({SEMAPHORE})");

    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for id in 0..crawlers {
        let (hosts, most) = (hosts.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            let session = common::builder()?.connect(&hosts).await?;
            let semaphore = Semaphore::new(&session, SEMAPHORE, max)?;
            let client = session.client().ok_or("no live session")?;
            for _ in 0..rounds {
                let lease = semaphore.acquire().await?;
                let crawling = crawl(&client, id).await?;
                most.fetch_max(crawling, Ordering::SeqCst);
                println!("crawler {id}: crawling with {crawling} of at most {max}");
                if crawling > max as usize {
                    return Err(format!("{crawling} crawlers at once, over {max}").into());
                }
                lease.release().await?;
            }
            Ok::<_, BoxError>(())
        }));
    }
    for task in tasks {
        task.await?.map_err(|e| e.to_string())?;
    }
    let most = most.load(Ordering::SeqCst);
    println!("never more than {max} crawled at once (at most {most} were seen together)");
    Ok(())
}

async fn create_parents(admin: &Client) -> Result<(), zookeeper_client::Error> {
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for path in [ROOT, CRAWLING] {
        match admin.create(path, b"", &persistent).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Crawls for a moment, announced under `CRAWLING`; how many crawled then, itself included.
async fn crawl(client: &Client, id: u32) -> Result<usize, BoxError> {
    let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let prefix = format!("{CRAWLING}/crawler-{id}-");
    let (_, seq) = client.create(&prefix, b"", &ephemeral).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let crawling = client.list_children(CRAWLING).await?.len();
    client.delete(&format!("{prefix}{seq}"), None).await?;
    Ok(crawling)
}
