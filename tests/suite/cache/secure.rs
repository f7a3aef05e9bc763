//! The cache over TLS: its own session is made with the `Session`'s TLS settings, on a
//! server whose TLS port needs a client certificate (the `Session` knows only that port).

use std::time::Duration;

use zk_harness::pki::Pki;
use zk_harness::{bounded, Ensemble, Fixture, PATIENCE};
use zk_recipes::{Cache, Session};

use super::{await_session_gone, in_cache, make, on_servers, one_watch, remove_all};

const TIMEOUT: Duration = Duration::from_secs(4);

#[tokio::test(flavor = "multi_thread")]
async fn a_cache_follows_over_tls() {
    let pki = Pki::shared();
    let zk = Ensemble::shared_with(1, pki.tls_server()).await;
    let fx = Fixture::new(zk, "cache-tls", 0, TIMEOUT).await;
    let (root, client) = (&fx.root, &fx.observer);
    let s = Session::builder()
        .session_timeout(TIMEOUT)
        .tls_ca_pem(&pki.ca_pem)
        .tls_identity_pem(&pki.client_cert_pem, &pki.client_key_pem)
        .connect(&zk.secure_connect_string())
        .await
        .expect("a TLS session");
    let node = format!("{root}/a");
    make(client, root, b"").await;
    make(client, &node, b"1").await;

    let cache = bounded("the cache starts", PATIENCE, Cache::start(&s, root))
        .await
        .unwrap();
    assert_eq!(in_cache(&cache), on_servers(client, root).await);
    let own = one_watch(zk, root, &s).await;
    client.set_data(&node, b"2", None).await.unwrap();
    bounded("synced", PATIENCE, cache.sync()).await.unwrap();
    assert_eq!(cache.get(&node).unwrap().data(), Some(&b"2"[..]));

    drop(cache);
    await_session_gone(zk, &own).await;
    remove_all(client, root).await;
    s.close();
    fx.nothing_left().await;
}
