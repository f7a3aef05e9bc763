//! The identity a session authenticates with: a digest user, or (feature `sasl`) a SASL
//! DIGEST-MD5 user. Passwords are kept as [`Secret`]s, which never show in `Debug` output
//! or logs.
//!
//! * **Digest** (`addauth digest user:password`) is sent after every connect and reconnect,
//!   and on the new session after expiry. ZooKeeper never refuses a digest identity: it
//!   computes `user:base64(sha1(user:password))` and only the nodes' ACLs decide. A wrong
//!   password therefore shows as [`Error::NoAuth`] on the first node it is not allowed to
//!   touch, not at connect.
//! * **SASL DIGEST-MD5** is a challenge-response with the servers' JAAS user list: a wrong
//!   password fails the connect with [`Error::AuthFailed`]. It is run on every connection.

use std::fmt;

use zookeeper_client::Connector;

use crate::error::{Error, Result};

/// A password or private key: shown as `<redacted>` by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn new(secret: String) -> Secret {
        Secret(secret)
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A user name and its password.
#[derive(Clone, Debug)]
pub(crate) struct Login {
    pub(crate) user: String,
    pub(crate) password: Secret,
}

/// How a session authenticates; nothing by default.
#[derive(Clone, Debug, Default)]
pub(crate) struct Credentials {
    pub(crate) digest: Option<Login>,
    #[cfg(feature = "sasl")]
    pub(crate) sasl: Option<Login>,
}

impl Credentials {
    /// Whether the session will have an identity of its own for `auth` ACLs.
    pub(crate) fn any(&self) -> bool {
        #[cfg(feature = "sasl")]
        if self.sasl.is_some() {
            return true;
        }
        self.digest.is_some()
    }

    /// The schemes in use, for logs: `"digest"`, `"sasl"`, `"digest+sasl"` or `"none"`.
    pub(crate) fn schemes(&self) -> &'static str {
        #[cfg(feature = "sasl")]
        let sasl = self.sasl.is_some();
        #[cfg(not(feature = "sasl"))]
        let sasl = false;
        match (self.digest.is_some(), sasl) {
            (true, true) => "digest+sasl",
            (true, false) => "digest",
            (false, true) => "sasl",
            (false, false) => "none",
        }
    }

    /// The reason of an [`Error::AuthFailed`]: whose credentials the servers refused.
    pub(crate) fn refused(&self) -> String {
        #[cfg(feature = "sasl")]
        if let Some(login) = &self.sasl {
            return format!("SASL authentication as {:?} failed", login.user);
        }
        "authentication failed".to_owned()
    }

    /// The SASL user the servers must confirm, if SASL is asked for.
    pub(crate) fn sasl_user(&self) -> Option<String> {
        #[cfg(feature = "sasl")]
        if let Some(login) = &self.sasl {
            return Some(login.user.clone());
        }
        None
    }

    /// Checks the user names; nothing is sent.
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if a user name is empty, or a digest user name contains
    ///   `':'` (ZooKeeper splits `user:password` at the first colon).
    pub(crate) fn validate(&self) -> Result<()> {
        if let Some(login) = &self.digest {
            check_user("digest", &login.user)?;
            if login.user.contains(':') {
                return Err(Error::InvalidArgument(format!(
                    "digest user name {:?} contains ':'",
                    login.user
                )));
            }
        }
        #[cfg(feature = "sasl")]
        if let Some(login) = &self.sasl {
            check_user("SASL", &login.user)?;
        }
        Ok(())
    }

    /// Adds the credentials to `connector`; call [`validate`](Self::validate) first.
    pub(crate) fn apply(&self, mut connector: Connector) -> Connector {
        if let Some(login) = &self.digest {
            let auth = format!("{}:{}", login.user, login.password.expose());
            connector = connector.with_auth("digest", auth.as_bytes());
        }
        #[cfg(feature = "sasl")]
        if let Some(login) = &self.sasl {
            let options = zookeeper_client::SaslOptions::digest_md5(
                login.user.clone(),
                login.password.expose().to_owned(),
            );
            connector = connector.with_sasl(options);
        }
        connector
    }
}

fn check_user(scheme: &str, user: &str) -> Result<()> {
    if user.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{scheme} user name is empty"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(user: &str) -> Credentials {
        Credentials {
            digest: Some(Login {
                user: user.into(),
                password: Secret::new("hunter2".into()),
            }),
            #[cfg(feature = "sasl")]
            sasl: None,
        }
    }

    #[test]
    fn debug_output_hides_the_password() {
        let shown = format!("{:?}", digest("orders-svc"));
        assert!(shown.contains("orders-svc"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn refuses_unusable_user_names() {
        assert!(digest("orders-svc").validate().is_ok());
        for user in ["", "a:b"] {
            match digest(user).validate() {
                Err(Error::InvalidArgument(_)) => {}
                other => panic!("{user:?}: {other:?}"),
            }
        }
    }
}
