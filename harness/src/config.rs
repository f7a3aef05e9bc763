//! [`ServerConfig`]: what a test adds to the servers it starts (secured servers, for
//! example): extra `zoo.cfg` lines, extra JVM options, files in each server's folder, and
//! a TLS client port.

use std::path::Path;

/// Additions to every server of an [`Ensemble`](crate::Ensemble); the default adds
/// nothing. In `cfg` lines and JVM options, `{dir}` stands for the server's own folder,
/// where the `file`s are written before it starts (and removed with the ensemble).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ServerConfig {
    pub(crate) cfg: Vec<String>,
    pub(crate) jvm: Vec<String>,
    pub(crate) files: Vec<(String, Vec<u8>)>,
    pub(crate) secure_client_port: bool,
}

impl ServerConfig {
    /// A `zoo.cfg` line, appended after the harness's own.
    pub fn cfg(mut self, line: impl Into<String>) -> ServerConfig {
        self.cfg.push(line.into());
        self
    }

    /// A JVM option (`-Dname=value`), given before the main class.
    pub fn jvm(mut self, option: impl Into<String>) -> ServerConfig {
        self.jvm.push(option.into());
        self
    }

    /// A file written into the server's folder as `name` before it starts.
    pub fn file(mut self, name: impl Into<String>, contents: &[u8]) -> ServerConfig {
        self.files.push((name.into(), contents.to_vec()));
        self
    }

    /// A TLS client port besides the plaintext one (`secureClientPort`, on the Netty
    /// connection factory, which TLS needs); see
    /// [`Ensemble::secure_connect_string`](crate::Ensemble::secure_connect_string). The
    /// `ssl.*` settings are the test's own `cfg` lines.
    pub fn secure_client_port(mut self) -> ServerConfig {
        self.secure_client_port = true;
        self
    }

    /// SASL DIGEST-MD5 users `(name, password)`: the servers' JAAS `Server` section and
    /// the SASL authentication provider.
    pub fn sasl_users(self, users: &[(&str, &str)]) -> ServerConfig {
        let entries: String = users
            .iter()
            .map(|(name, password)| format!("\n  user_{name}=\"{password}\""))
            .collect();
        let jaas = format!(
            "Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required{entries};\n}};\n"
        );
        self.file("jaas.conf", jaas.as_bytes())
            .cfg("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
            .jvm("-Djava.security.auth.login.config={dir}/jaas.conf")
    }

    /// `text` with `{dir}` replaced by `dir`.
    pub(crate) fn expand(text: &str, dir: &Path) -> String {
        text.replace("{dir}", &dir.display().to_string())
    }
}
