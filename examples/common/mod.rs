//! The examples' connection settings, from the environment, so that they run against the
//! plain ensemble of `zk-docker/` and against its TLS + auth variant alike. Secrets come
//! from files named by the environment, never from the command line.
//!
//! * `ZK_HOSTS`: the connect string (default: the plain ensemble, 2181–2183).
//! * `ZK_AUTH_FILE`: a file holding `user:password` for digest authentication; the
//!   recipes' nodes are then creator-only.
//! * `ZK_TLS_CA`, and optionally `ZK_TLS_CERT` with `ZK_TLS_KEY`: PEM files for TLS (build
//!   the examples with `--features tls`).

use std::error::Error;

use zk_recipes::{NodeAcl, Session, SessionBuilder};

type BoxError = Box<dyn Error + Send + Sync>;

/// The connect string.
pub fn hosts() -> String {
    std::env::var("ZK_HOSTS")
        .unwrap_or_else(|_| "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183".into())
}

/// A session builder with the credentials and TLS settings the environment names.
pub fn builder() -> Result<SessionBuilder, BoxError> {
    let mut builder = Session::builder();
    if let Some(auth) = file("ZK_AUTH_FILE")? {
        let (user, password) = auth
            .trim_end()
            .split_once(':')
            .ok_or("ZK_AUTH_FILE: the file must hold one line user:password")?;
        builder = builder
            .digest_auth(user, password)
            .node_acl(NodeAcl::CreatorOnly);
    }
    tls(builder)
}

#[cfg(feature = "tls")]
fn tls(mut builder: SessionBuilder) -> Result<SessionBuilder, BoxError> {
    if let Some(ca) = file("ZK_TLS_CA")? {
        builder = builder.tls_ca_pem(ca);
    }
    if let (Some(cert), Some(key)) = (file("ZK_TLS_CERT")?, file("ZK_TLS_KEY")?) {
        builder = builder.tls_identity_pem(cert, key);
    }
    Ok(builder)
}

#[cfg(not(feature = "tls"))]
fn tls(builder: SessionBuilder) -> Result<SessionBuilder, BoxError> {
    if std::env::var_os("ZK_TLS_CA").is_some() {
        return Err("ZK_TLS_CA is set: build the examples with --features tls".into());
    }
    Ok(builder)
}

/// The contents of the file the variable `name` points to, if it is set.
fn file(name: &str) -> Result<Option<String>, BoxError> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(path) => std::fs::read_to_string(&path)
            .map(Some)
            .map_err(|err| format!("{name}={}: {err}", path.to_string_lossy()).into()),
    }
}
