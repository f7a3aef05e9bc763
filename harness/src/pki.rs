//! Key material for secured test servers, made at test time and never committed.
//!
//! A test CA signs the server's certificate (valid for `127.0.0.1` and `localhost`) and a
//! client certificate for `CN=orders-svc`; a second, unrelated CA stands in for a wrong
//! one. Keys and certificates are made with `openssl` in a temporary folder, the server's
//! PKCS12 keystore with `openssl pkcs12` and its truststore with `keytool` (Java's trusted
//! certificate entries), all read into memory, and the folder is removed: the servers get
//! their stores as files of their own folder (see [`Pki::tls_server`]), the clients get
//! PEM strings.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::ServerConfig;

/// The password of the server's stores: they live only in the test servers' folders.
pub const STORE_PASSWORD: &str = "zk-recipes-test";

/// Everything the tests and the secured servers need.
#[derive(Debug)]
pub struct Pki {
    pub ca_pem: String,
    pub other_ca_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// A key that does not belong to `client_cert_pem`.
    pub stranger_key_pem: String,
    pub server_keystore: Vec<u8>,
    pub server_truststore: Vec<u8>,
}

impl Pki {
    /// One for the whole test binary, made on first use.
    pub fn shared() -> &'static Pki {
        static PKI: OnceLock<Pki> = OnceLock::new();
        PKI.get_or_init(Pki::generate)
    }

    /// Makes it all in a fresh temporary folder, which is removed again.
    pub fn generate() -> Pki {
        let dir = std::env::temp_dir().join(format!("zk-recipes-pki-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the PKI folder");
        let pki = make(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        pki
    }

    /// A server with a TLS client port that needs a client certificate signed by the test
    /// CA (`ssl.clientAuth=need`), besides its plaintext port.
    pub fn tls_server(&self) -> ServerConfig {
        ServerConfig::default()
            .secure_client_port()
            .file("keystore.p12", &self.server_keystore)
            .file("truststore.p12", &self.server_truststore)
            .cfg("ssl.keyStore.location={dir}/keystore.p12")
            .cfg(format!("ssl.keyStore.password={STORE_PASSWORD}"))
            .cfg("ssl.trustStore.location={dir}/truststore.p12")
            .cfg(format!("ssl.trustStore.password={STORE_PASSWORD}"))
            .cfg("ssl.clientAuth=need")
    }
}

fn make(dir: &Path) -> Pki {
    let file = |name: &str| dir.join(name);
    self_signed_ca(&file("ca"), "zk-recipes test CA");
    self_signed_ca(&file("other-ca"), "zk-recipes unrelated CA");
    signed(
        dir,
        "server",
        1,
        "localhost",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    );
    signed(
        dir,
        "client",
        2,
        "orders-svc",
        "extendedKeyUsage=clientAuth\n",
    );
    new_key(&file("stranger.key"));
    let keystore = file("server.p12");
    run(
        "openssl",
        &[
            "pkcs12",
            "-export",
            "-name",
            "server",
            "-in",
            path(&file("server.pem")),
            "-inkey",
            path(&file("server.key")),
            "-certfile",
            path(&file("ca.pem")),
            "-out",
            path(&keystore),
            "-passout",
            &format!("pass:{STORE_PASSWORD}"),
        ],
    );
    let truststore = file("trust.p12");
    run(
        "keytool",
        &[
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            path(&file("ca.pem")),
            "-keystore",
            path(&truststore),
            "-storetype",
            "PKCS12",
            "-storepass",
            STORE_PASSWORD,
        ],
    );
    let text = |name: &str| std::fs::read_to_string(file(name)).expect("read PEM");
    let bytes = |path: &PathBuf| std::fs::read(path).expect("read store");
    Pki {
        ca_pem: text("ca.pem"),
        other_ca_pem: text("other-ca.pem"),
        client_cert_pem: text("client.pem"),
        client_key_pem: text("client.key"),
        stranger_key_pem: text("stranger.key"),
        server_keystore: bytes(&keystore),
        server_truststore: bytes(&truststore),
    }
}

/// `<base>.key` and a self-signed CA certificate `<base>.pem`.
fn self_signed_ca(base: &Path, name: &str) {
    run(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{}.key", base.display()),
            "-out",
            &format!("{}.pem", base.display()),
            "-subj",
            &format!("/CN={name}"),
            "-days",
            "2",
            "-addext",
            "basicConstraints=critical,CA:true",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// `<dir>/<name>.key` and `<name>.pem`: a key and a certificate for `CN=<cn>` signed by the
/// test CA, with the given serial number and X.509 v3 extensions.
fn signed(dir: &Path, name: &str, serial: u32, cn: &str, extensions: &str) {
    let file = |ext: &str| dir.join(format!("{name}.{ext}"));
    new_key(&file("key"));
    std::fs::write(file("ext"), extensions).expect("write extensions");
    run(
        "openssl",
        &[
            "req",
            "-new",
            "-key",
            path(&file("key")),
            "-subj",
            &format!("/CN={cn}"),
            "-out",
            path(&file("csr")),
        ],
    );
    run(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            path(&file("csr")),
            "-days",
            "2",
            "-CA",
            path(&dir.join("ca.pem")),
            "-CAkey",
            path(&dir.join("ca.key")),
            "-set_serial",
            &serial.to_string(),
            "-extfile",
            path(&file("ext")),
            "-out",
            path(&file("pem")),
        ],
    );
}

/// A P-256 private key in PKCS#8 PEM.
fn new_key(out: &Path) {
    run(
        "openssl",
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            path(out),
        ],
    );
}

fn path(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (bash scripts/test.sh installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
