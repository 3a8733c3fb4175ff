//! The small 2026-07-28 stdio server of `stdio_server.py` and the Python that runs it: shared
//! by the client's transport tests and the host's (`#[path]`-included from both crates).

/// The Python interpreter's real path (not a shim that needs the caller's environment: a
/// stdio server gets only the default environment).
pub(crate) fn python() -> String {
    let output = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// The server script (both crates sit side by side under `crates/`).
pub(crate) fn script() -> String {
    format!(
        "{}/../toolwire-client/tests/support/stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}
