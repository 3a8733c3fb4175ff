//! The gateway's console as an operator starts it: a console token that is missing or too short
//! stops the gateway saying why, never showing the token. The console in a real browser is in
//! tests/system_parts/console.rs.

use serde_json::json;

#[path = "support/gateway.rs"]
mod support;

use support::toolwire;

/// What `toolwire gateway` with `--admin` and `--console-token-env NAME` says on stderr when
/// it stops at once, the variable set to `token` (or unset).
fn refused_start(token: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.json");
    std::fs::write(&config, json!({"mcpServers": {}}).to_string()).unwrap();
    let mut command = toolwire(&dir);
    command
        .args(["gateway", "--admin", "127.0.0.1:0", "--console-token-env"])
        .arg("TOOLWIRE_TEST_CONSOLE_TOKEN")
        .arg("--config")
        .arg(&config)
        .env_remove("TOOLWIRE_TEST_CONSOLE_TOKEN")
        .stdin(std::process::Stdio::null());
    if let Some(token) = token {
        command.env("TOOLWIRE_TEST_CONSOLE_TOKEN", token);
    }
    let output = command.output().expect("toolwire runs");
    assert!(!output.status.success(), "it stops");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_console_token_that_is_missing_or_short_stops_the_gateway_saying_so() {
    let unset = refused_start(None);
    assert!(
        unset.contains("TOOLWIRE_TEST_CONSOLE_TOKEN is not set"),
        "{unset}"
    );
    let short = refused_start(Some("hunter2"));
    assert!(short.contains("at least 16"), "{short}");
    assert!(
        !short.contains("hunter2"),
        "the token is never shown: {short}"
    );
}
