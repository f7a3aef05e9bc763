//! TLS to the ensemble (feature `tls`): the PEM settings of a session, checked before
//! anything is sent.
//!
//! Every host of the connect string is reached over TLS (zookeeper-client's
//! `secure_connect`), the server's certificate must chain to the given CA and name the host
//! as written in the connect string (a DNS name, or an IP address in a `subjectAltName`),
//! and the client certificate, if given, is offered to servers that ask for one. The CA and
//! the client identity are parsed once at connect: a PEM that holds no certificate or no
//! key, or a key that does not belong to the certificate, fails the connect with
//! [`Error::InvalidArgument`] before any connection is opened.

use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use zookeeper_client::TlsOptions;

use super::credentials::Secret;
use crate::error::{Error, Result};

/// The PEMs given to the builder. `Debug` shows their sizes, never the key.
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    pub(crate) ca_pem: Option<String>,
    pub(crate) identity: Option<(String, Secret)>,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ca = self
            .ca_pem
            .as_ref()
            .map(|pem| format!("<{} bytes PEM>", pem.len()));
        let identity = self
            .identity
            .as_ref()
            .map(|(cert, key)| format!("<{} bytes PEM certificate>, key: {key:?}", cert.len()));
        f.debug_struct("TlsSettings")
            .field("ca", &ca)
            .field("identity", &identity)
            .finish()
    }
}

/// Checked TLS settings: the options for zookeeper-client, and a rustls configuration made
/// from the same PEMs for looking at hosts that refused a session (see `probe`).
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) options: TlsOptions,
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) has_identity: bool,
}

impl TlsSettings {
    /// Whether TLS is asked for at all.
    pub(crate) fn enabled(&self) -> bool {
        self.ca_pem.is_some() || self.identity.is_some()
    }

    /// Parses and checks the PEMs; `None` if TLS is not asked for.
    ///
    /// # Notable errors
    /// * [`Error::InvalidArgument`] if a client identity is given without a CA, the CA PEM
    ///   holds no usable certificate, the identity PEM no certificate or no private key, or
    ///   the key does not fit the certificate.
    pub(crate) fn prepare(&self) -> Result<Option<Tls>> {
        let Some(ca_pem) = &self.ca_pem else {
            return match self.identity {
                Some(_) => Err(invalid(
                    "tls_identity_pem",
                    "a client identity needs the servers' CA (tls_ca_pem) too",
                )),
                None => Ok(None),
            };
        };
        let roots = roots(ca_pem)?;
        let builder = config_builder()?.with_root_certificates(roots);
        let (config, options) = match &self.identity {
            None => (builder.with_no_client_auth(), with_ca(ca_pem)?),
            Some((cert, key)) => {
                let (chain, key_der) = identity(cert, key)?;
                let config = builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|err| invalid("tls_identity_pem", err))?;
                let options = with_ca(ca_pem)?
                    .with_pem_identity(cert, key.expose())
                    .map_err(|err| invalid("tls_identity_pem", err))?;
                (config, options)
            }
        };
        Ok(Some(Tls {
            options,
            config: Arc::new(config),
            has_identity: self.identity.is_some(),
        }))
    }
}

fn invalid(setting: &str, reason: impl fmt::Display) -> Error {
    Error::InvalidArgument(format!("{setting}: {reason}"))
}

/// The trust anchors of `pem`: every certificate in it must be usable as one.
fn roots(pem: &str) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|err| invalid("tls_ca_pem", err))?;
        roots
            .add(cert)
            .map_err(|err| invalid("tls_ca_pem", format!("unusable CA certificate: {err}")))?;
    }
    if roots.is_empty() {
        return Err(invalid("tls_ca_pem", "no certificate in the PEM"));
    }
    Ok(roots)
}

/// The certificate chain and private key of a client identity.
fn identity(
    cert: &str,
    key: &Secret,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| invalid("tls_identity_pem", err))?;
    if chain.is_empty() {
        return Err(invalid("tls_identity_pem", "no certificate in the PEM"));
    }
    // The parser's error may quote the PEM; say only that it failed.
    let key = PrivateKeyDer::from_pem_slice(key.expose().as_bytes())
        .map_err(|_| invalid("tls_identity_pem", "no usable private key in the key PEM"))?;
    Ok((chain, key))
}

fn with_ca(ca_pem: &str) -> Result<TlsOptions> {
    TlsOptions::default()
        .with_pem_ca(ca_pem)
        .map_err(|err| invalid("tls_ca_pem", err))
}

/// A rustls configuration builder with the process's crypto provider (the one
/// zookeeper-client uses too), or rustls's default one.
fn config_builder() -> Result<rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier>> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| Error::InvalidArgument(format!("TLS: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_pems_there_is_no_tls() {
        assert!(TlsSettings::default().prepare().unwrap().is_none());
    }

    #[test]
    fn malformed_pems_are_invalid_arguments() {
        let cases = [
            TlsSettings {
                ca_pem: Some("not a PEM".into()),
                identity: None,
            },
            TlsSettings {
                ca_pem: Some(
                    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
                ),
                identity: None,
            },
            TlsSettings {
                ca_pem: None,
                identity: Some(("cert".into(), Secret::new("key".into()))),
            },
        ];
        for settings in cases {
            match settings.prepare() {
                Err(Error::InvalidArgument(_)) => {}
                other => panic!("{settings:?}: {:?}", other.map(|_| ())),
            }
        }
    }

    #[test]
    fn debug_output_hides_the_key() {
        let settings = TlsSettings {
            ca_pem: Some("ca".into()),
            identity: Some(("cert".into(), Secret::new("PRIVATE KEY BYTES".into()))),
        };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("PRIVATE KEY BYTES"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
