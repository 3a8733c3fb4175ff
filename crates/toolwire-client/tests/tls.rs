//! HTTPS against a real Toolwire server behind TLS on 127.0.0.1, with a CA made for the test:
//! refused without the CA (a certificate error, not a scheme error), a real MCP exchange with
//! it, and bad CA files named in the error. (`SSL_CERT_FILE` is tested through the CLI binary,
//! so this process's environment is never changed.)

#[path = "support/tls.rs"]
mod tls;

use std::time::Duration;

use serde_json::json;
use tls::{TempFile, TestPki};
use toolwire_client::{ClientBuilder, Error};

fn builder() -> ClientBuilder {
    ClientBuilder::new("tls-test", "1.0").timeout(Duration::from_secs(10))
}

#[tokio::test]
async fn https_without_the_ca_fails_with_a_certificate_error() {
    let pki = TestPki::new();
    let url = pki.toolwire().await;
    let error = builder()
        .http(&url)
        .unwrap()
        .list_tools()
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Transport(m) if m.contains("invalid peer certificate: UnknownIssuer") && m.contains("add its CA")),
        "{error}"
    );
}

#[tokio::test]
async fn https_with_the_ca_file_speaks_mcp() {
    let pki = TestPki::new();
    let url = pki.toolwire().await;
    let ca = pki.ca_file("ca.pem");
    let client = builder().ca_file(&ca.0).http(&url).unwrap();
    let discover = client.discover().await.unwrap();
    assert_eq!(discover.supported_versions, ["2026-07-28"]);
    let result = client
        .call_tool("echo", json!({"message": "over TLS"}))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&result.content).unwrap()[0]["text"],
        "over TLS"
    );
}

#[tokio::test]
async fn a_bad_ca_file_is_refused_with_its_name() {
    let url = "https://127.0.0.1:9/mcp";
    let nowhere = tempfile::tempdir().unwrap();
    let missing = nowhere.path().join("missing.pem");
    let empty = TempFile::new("empty.pem", b"");
    let not_pem = TempFile::new("not-pem.pem", b"hello\n");
    for (path, why) in [
        (&missing, "No such file"),
        (&empty.0, "no PEM certificate"),
        (&not_pem.0, "no PEM certificate"),
    ] {
        let error = builder().ca_file(path).http(url).unwrap_err();
        assert!(
            matches!(&error, Error::Transport(m) if m.contains(&path.display().to_string()) && m.contains(why)),
            "{error}"
        );
    }
    // A plain HTTP endpoint never uses CA files, so they are not read.
    assert!(
        builder()
            .ca_file(&missing)
            .http("http://127.0.0.1:9/mcp")
            .is_ok()
    );
}
