//! The `toolwire` binary's client transports end to end: what a stdio server inherits from the
//! command's environment, and HTTPS with a private CA (`--ca-file`, `SSL_CERT_FILE`).

#[path = "../../toolwire-client/tests/support/tls.rs"]
mod tls;

use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// The client crate's scripted stdio server, run by the real Python interpreter (not a shim that
/// needs the caller's environment).
fn python_server() -> String {
    let output = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    let python = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    format!(
        "{python} {}/../toolwire-client/tests/support/stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `toolwire` with its state and notes in `scratch`, never the home directory.
fn scratch_command(scratch: &tempfile::TempDir) -> Command {
    let mut command = Command::new(BIN);
    command
        .env("TOOLWIRE_STATE_DIR", scratch.path().join("state"))
        .env("TOOLWIRE_DATA_DIR", scratch.path().join("data"));
    command
}

#[test]
fn a_stdio_server_does_not_get_the_bearer_token() {
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch_command(&scratch)
        .args(["call", "--yes", "--json", &python_server(), "env"])
        .args(["--env", "GIVEN=on the command line", "--env", "PASSED"])
        .env("TOOLWIRE_BEARER_TOKEN", "s3cret")
        .env("PASSED", "named with --env")
        .env("UNNAMED", "stays here")
        .output()
        .expect("toolwire runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    let env: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(env.get("TOOLWIRE_BEARER_TOKEN"), None, "{env}");
    assert_eq!(env.get("UNNAMED"), None, "{env}");
    assert_eq!(env["GIVEN"], "on the command line");
    assert_eq!(env["PASSED"], "named with --env");
    assert_eq!(env["PATH"], std::env::var("PATH").unwrap());
}

/// Runs `toolwire` with `args` and extra environment, off the async runtime.
async fn toolwire(args: Vec<String>, env: Vec<(&'static str, String)>) -> Output {
    tokio::task::spawn_blocking(move || {
        let scratch = tempfile::tempdir().unwrap();
        scratch_command(&scratch)
            .args(args)
            .envs(env)
            .env_remove("RUST_LOG")
            .output()
            .expect("toolwire runs")
    })
    .await
    .unwrap()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

#[tokio::test]
async fn discover_over_https_with_a_private_ca() {
    let pki = tls::TestPki::new();
    let url = pki.toolwire().await;
    let ca = pki.ca_file("ca.pem");
    let ca_path = ca.0.display().to_string();

    // Without the CA: a certificate error that says what to do.
    let refused = toolwire(args(&["discover", &url]), vec![]).await;
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("invalid peer certificate: UnknownIssuer") && stderr.contains("--ca-file"),
        "{stderr}"
    );

    // --ca-file adds the CA to the system's roots.
    let trusted = toolwire(args(&["discover", &url, "--ca-file", &ca_path]), vec![]).await;
    let stdout = String::from_utf8_lossy(&trusted.stdout);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    assert!(stdout.contains("server: tls-test 1"), "{stdout}");

    // SSL_CERT_FILE takes the place of the system's bundle, as with OpenSSL.
    let by_env = toolwire(
        args(&["discover", &url]),
        vec![("SSL_CERT_FILE", ca_path.clone())],
    )
    .await;
    assert!(
        by_env.status.success(),
        "{}",
        String::from_utf8_lossy(&by_env.stderr)
    );

    // A CA file that cannot be used is named.
    let missing = format!("{ca_path}.missing");
    for (flag, env) in [
        (vec!["--ca-file", missing.as_str()], vec![]),
        (vec![], vec![("SSL_CERT_FILE", missing.clone())]),
    ] {
        let mut list = args(&["discover", &url]);
        list.extend(args(&flag));
        let bad = toolwire(list, env).await;
        assert_eq!(bad.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(
            stderr.contains(&missing) && stderr.contains("No such file"),
            "{stderr}"
        );
    }
}
