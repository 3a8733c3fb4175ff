//! The `toolwire` binary's client transports end to end: what a stdio server inherits from the
//! command's environment.

use std::process::Command;

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

#[test]
fn a_stdio_server_does_not_get_the_bearer_token() {
    let output = Command::new(BIN)
        .args(["call", "--json", &python_server(), "env"])
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
