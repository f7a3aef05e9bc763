//! The security options of `zk-recipes`: TLS with a client certificate, digest and SASL
//! credentials from a file, `--node-acl`, and the statuses of refusals, against a real
//! ZooKeeper server with a TLS port (`ssl.clientAuth=need`), SASL users and its plaintext
//! port. Key material is made at test time (`zk_harness::pki`).

use crate::support;

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::{lines, zk_recipes, Test};
use zk_harness::pki::Pki;
use zk_harness::{bounded, children, digest_observer, Ensemble, PATIENCE};

const USER: &str = "orders-svc";
const PASSWORD: &str = "correct horse battery staple";

/// The test binary's server: TLS port needing a client certificate, SASL user `USER`.
async fn secured() -> &'static Ensemble {
    let config = Pki::shared().tls_server().sasl_users(&[(USER, PASSWORD)]);
    Ensemble::shared_with(1, config).await
}

/// Writes `text` to `path`, readable by its owner only unless `mode` says otherwise.
fn write(path: &Path, text: &str, mode: u32) -> PathBuf {
    std::fs::write(path, text).expect("write a test file");
    let permissions = std::fs::Permissions::from_mode(mode);
    std::fs::set_permissions(path, permissions).expect("set its mode");
    path.to_owned()
}

/// Arguments of any kind, as the command gets them.
fn argv(parts: &[&dyn AsRef<OsStr>]) -> Vec<OsString> {
    parts.iter().map(|part| part.as_ref().to_owned()).collect()
}

/// `--tls-ca --tls-cert --tls-key` with the test's client certificate, the CA's PEM being
/// `ca_pem`.
fn tls_options(test: &Test, ca_pem: &str) -> Vec<OsString> {
    let pki = Pki::shared();
    let file = |name: &str| test.scratch.file(name);
    argv(&[
        &"--tls-ca",
        &write(&file("ca.pem"), ca_pem, 0o644),
        &"--tls-cert",
        &write(&file("client.pem"), &pki.client_cert_pem, 0o644),
        &"--tls-key",
        &write(&file("client.key"), &pki.client_key_pem, 0o600),
    ])
}

/// Runs `zk-recipes ARGS` against `hosts` to its end; its status and stderr.
async fn run(hosts: &str, args: &[OsString]) -> (Option<i32>, String) {
    let mut command = zk_recipes(hosts);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let output = bounded("zk-recipes to exit", PATIENCE, command.output())
        .await
        .expect("run zk-recipes");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

#[tokio::test]
async fn lock_over_tls_with_digest_auth_makes_creator_only_nodes() {
    let ensemble = secured().await;
    let test = Test::new("tls-auth").await;
    let auth = write(
        &test.scratch.file("auth"),
        &format!("{USER}:{PASSWORD}\n"),
        0o600,
    );
    let seen = test.scratch.file("seen");
    let report = r#"echo "$ZK_FENCING_TOKEN" > "$0""#;
    let mut args = argv(&[
        &"lock",
        &"--auth-file",
        &auth,
        &"--node-acl",
        &"creator-only",
    ]);
    args.extend(tls_options(&test, &Pki::shared().ca_pem));
    args.extend(argv(&[&test.root, &"--", &"sh", &"-c", &report, &seen]));

    let (status, stderr) = run(&ensemble.secure_connect_string(), &args).await;

    assert_eq!(status, Some(0), "{stderr}");
    // The client may log a failed first attempt at the TLS port; only our own warning
    // about readable secrets matters here.
    assert!(
        !stderr.contains("may be read by others"),
        "no warning for files of mode 0600: {stderr}"
    );
    assert!(
        lines(&seen)[0].parse::<u64>().is_ok(),
        "CMD ran with a token"
    );
    let owner = digest_observer(&ensemble.connect_string(), USER, PASSWORD).await;
    let (acls, _) = owner.get_acl(&test.root).await.expect("the root's ACL");
    let ids: Vec<(&str, &str)> = acls.iter().map(|acl| (acl.scheme(), acl.id())).collect();
    // The creator's identities: the digest user, and the certificate's subject.
    let digest = |(scheme, id): &(&str, &str)| *scheme == "digest" && id.starts_with(USER);
    assert!(ids.iter().any(digest), "not the digest user's: {ids:?}");
    assert!(
        ids.iter().all(|(scheme, _)| *scheme != "world"),
        "open: {ids:?}"
    );
    assert!(children(&owner, &test.root).await.is_empty());

    // Another password: the digest identity differs, the root's ACL refuses it.
    let wrong = write(&test.scratch.file("wrong"), &format!("{USER}:guess"), 0o600);
    let args = argv(&[&"lock", &"--auth-file", &wrong, &test.root, &"--", &"true"]);
    let (status, stderr) = run(&ensemble.connect_string(), &args).await;
    assert_eq!(status, Some(69), "{stderr}");
    assert!(stderr.contains("not authorized"), "{stderr}");
}

#[tokio::test]
async fn sasl_checks_the_password_at_connect() {
    let hosts = secured().await.connect_string();
    let test = Test::new("sasl").await;
    let lock = |auth: PathBuf| {
        argv(&[
            &"lock",
            &"--sasl",
            &"--auth-file",
            &auth,
            &test.root,
            &"--",
            &"true",
        ])
    };
    let right = write(
        &test.scratch.file("right"),
        &format!("{USER}:{PASSWORD}"),
        0o600,
    );
    let (status, stderr) = run(&hosts, &lock(right)).await;
    assert_eq!(status, Some(0), "{stderr}");

    let wrong = write(&test.scratch.file("wrong"), &format!("{USER}:guess"), 0o600);
    let (status, stderr) = run(&hosts, &lock(wrong)).await;
    assert_eq!(status, Some(69), "{stderr}");
    assert!(stderr.contains("refused the credentials"), "{stderr}");
    assert!(
        !stderr.contains("guess"),
        "the password was shown: {stderr}"
    );
    assert!(test.children().await.is_empty());
}

#[tokio::test]
async fn a_wrong_ca_exits_69_at_once_saying_tls() {
    let hosts = secured().await.secure_connect_string();
    let test = Test::new("wrong-ca").await;
    let ran = test.scratch.file("ran");
    let mut args = argv(&[&"lock", &"--connect-timeout", &"10s"]);
    args.extend(tls_options(&test, &Pki::shared().other_ca_pem));
    args.extend(argv(&[&test.root, &"--", &"touch", &ran]));

    let started = Instant::now();
    let (status, stderr) = run(&hosts, &args).await;
    let took = started.elapsed();

    assert_eq!(status, Some(69), "{stderr}");
    assert!(stderr.contains("TLS"), "{stderr}");
    assert!(
        stderr.contains("--tls-ca") && !stderr.contains("tls_ca_pem"),
        "not the option's name: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(!ran.exists(), "CMD ran");
}

#[tokio::test]
async fn an_unusable_auth_file_exits_64_before_connecting() {
    let test = Test::new("bad-auth").await;
    let ran = test.scratch.file("ran");
    // Nothing listens there: a connect would fail with 69, not 64.
    let hosts = "127.0.0.1:1";
    let malformed = write(&test.scratch.file("malformed"), USER, 0o644);
    let missing = test.scratch.file("missing");
    for (auth, says) in [(&malformed, "user:password"), (&missing, "No such file")] {
        let args = argv(&[
            &"lock",
            &"--auth-file",
            auth,
            &test.root,
            &"--",
            &"touch",
            &ran,
        ]);
        let (status, stderr) = run(hosts, &args).await;
        assert_eq!(status, Some(64), "{stderr}");
        assert!(
            stderr.contains("--auth-file") && stderr.contains(says),
            "{stderr}"
        );
    }
    let (_, stderr) = run(
        hosts,
        &argv(&[&"status", &"--auth-file", &malformed, &"/x"]),
    )
    .await;
    assert!(
        stderr.contains("may be read by others"),
        "no warning for mode 0644: {stderr}"
    );
    assert!(!ran.exists(), "CMD ran");
}

#[tokio::test]
async fn tls_messages_name_the_options_not_the_library() {
    let ensemble = secured().await;
    let test = Test::new("tls-names").await;
    let pki = Pki::shared();
    let ca = write(&test.scratch.file("ca.pem"), &pki.ca_pem, 0o644);
    let not_pem = write(&test.scratch.file("not.pem"), "not a certificate\n", 0o644);
    let plain = ensemble.connect_string();
    let secure = ensemble.secure_connect_string();
    let cases: [(&str, Vec<OsString>, i32, &str); 3] = [
        // Checked before connecting.
        (
            &plain,
            argv(&[&"status", &"--tls-ca", &not_pem, &test.root]),
            64,
            "--tls-ca",
        ),
        // The TLS port, in plaintext.
        (&secure, argv(&[&"status", &test.root]), 69, "--tls-ca"),
        // The TLS port, which needs a client certificate, without one.
        (
            &secure,
            argv(&[&"status", &"--tls-ca", &ca, &test.root]),
            69,
            "--tls-cert",
        ),
    ];
    for (hosts, args, expected, option) in cases {
        let (status, stderr) = run(hosts, &args).await;
        assert_eq!(status, Some(expected), "{args:?}: {stderr}");
        assert!(stderr.contains(option), "{args:?}: {stderr}");
        for library in ["tls_ca_pem", "tls_identity_pem", "feature"] {
            assert!(!stderr.contains(library), "{args:?}: {stderr}");
        }
    }
}
