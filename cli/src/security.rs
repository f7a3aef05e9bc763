//! Credentials and TLS from files named on the command line or in the environment
//! (`--auth-file`, `--tls-ca`, `--tls-cert`, `--tls-key`): never a secret on the command
//! line itself, where `ps` shows it.
//!
//! * **Unusable files** (missing, unreadable, an auth file that is not one line
//!   `user:password`) are refused before connecting, with a message naming the option:
//!   exit 64, like any bad argument. PEMs are checked by the library before anything is
//!   sent (also 64).
//! * **Files others may read.** An auth file or a private key readable by the group or by
//!   everyone gets a warning on stderr, and is used all the same: secrets mounted into a
//!   container (Kubernetes secret volumes, Docker secrets) are often mode 0644 or 0444 in a
//!   file system of their own, and refusing them would break those set-ups.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use zk_recipes::{NodeAcl, SessionBuilder};

use crate::args::{NodeAclOption, Security};
use crate::say::say;

/// Permission bits that let the group or everyone read a file.
const READABLE_BY_OTHERS: u32 = 0o044;

/// Adds the credentials and the TLS settings of `security` to `builder`.
///
/// # Errors
/// A one-line message naming the option whose file cannot be read or is malformed.
pub fn apply(security: &Security, mut builder: SessionBuilder) -> Result<SessionBuilder, String> {
    if let Some(path) = &security.auth_file {
        let text = read_secret("--auth-file", path)?;
        let (user, password) = credentials(&text).map_err(|what| {
            format!(
                "--auth-file {}: credentials must be one line user:password ({what})",
                path.display()
            )
        })?;
        builder = match security.sasl {
            true => builder.sasl_digest_md5(user, password),
            false => builder.digest_auth(user, password),
        };
    }
    if let Some(ca) = &security.tls_ca {
        builder = builder.tls_ca_pem(read("--tls-ca", ca)?);
    }
    if let (Some(cert), Some(key)) = (&security.tls_cert, &security.tls_key) {
        builder =
            builder.tls_identity_pem(read("--tls-cert", cert)?, read_secret("--tls-key", key)?);
    }
    Ok(builder)
}

/// Splits the text of an auth file into a user name and a password: one line
/// `user:password` (split at the first `':'`, as ZooKeeper's `addauth digest` does), with
/// or without a final line ending.
///
/// # Errors
/// What is wrong, never showing the password: no `':'`, an empty user name or password,
/// more than one line.
fn credentials(text: &str) -> Result<(&str, &str), &'static str> {
    let line = text
        .strip_suffix('\n')
        .map_or(text, |line| line.strip_suffix('\r').unwrap_or(line));
    if line.contains(['\n', '\r']) {
        return Err("more than one line");
    }
    match line.split_once(':') {
        None => Err("no ':'"),
        Some(("", _)) => Err("empty user name"),
        Some((_, "")) => Err("empty password"),
        Some(parts) => Ok(parts),
    }
}

/// Refuses a creator ACL without an identity to be its creator.
///
/// # Errors
/// A one-line message naming the options that give one.
pub fn check_acl(security: &Security, acl: NodeAcl) -> Result<(), String> {
    let identity = security.auth_file.is_some() || security.tls_cert.is_some();
    match (acl, identity) {
        (NodeAcl::Open, _) | (_, true) => Ok(()),
        _ => Err(
            "--node-acl creator-only and creator-all-world-read need an identity: \
             --auth-file, or a client certificate (--tls-cert)"
                .to_owned(),
        ),
    }
}

/// The library's ACL for `--node-acl`.
pub fn node_acl(option: NodeAclOption) -> NodeAcl {
    match option {
        NodeAclOption::Open => NodeAcl::Open,
        NodeAclOption::CreatorOnly => NodeAcl::CreatorOnly,
        NodeAclOption::CreatorAllWorldRead => NodeAcl::CreatorAllWorldRead,
    }
}

/// The text of the file `path` given with `option`.
fn read(option: &str, path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|err| format!("{option} {}: {err}", path.display()))
}

/// As [`read`], with a warning on stderr if others may read the file.
fn read_secret(option: &str, path: &Path) -> Result<String, String> {
    let text = read(option, path)?;
    if let Ok(metadata) = fs::metadata(path) {
        let mode = metadata.permissions().mode();
        if mode & READABLE_BY_OTHERS != 0 {
            say!(
                "warning: {option} {} may be read by others (mode {:o}); \
                 chmod go-rwx it",
                path.display(),
                mode & 0o777
            );
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::credentials;

    #[test]
    fn credentials_are_one_line_user_colon_password() {
        for text in ["svc:pw", "svc:pw\n", "svc:pw\r\n"] {
            assert_eq!(credentials(text), Ok(("svc", "pw")), "{text:?}");
        }
        assert_eq!(credentials("svc:a:b"), Ok(("svc", "a:b")));
        for text in [
            "",
            "\n",
            "svc",
            ":pw",
            "svc:",
            "svc:s3cret\n\n",
            "svc:s3cret\nmore",
            "a\rb:s3cret",
        ] {
            assert!(credentials(text).is_err(), "{text:?}");
        }
    }
}
