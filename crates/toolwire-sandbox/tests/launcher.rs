//! The `toolwire-sandbox` launcher as a program runs it: a command confined by the
//! profile it is given, and the errors of a launcher started wrongly. (Its being built for the
//! test also puts it beside the other crates' test binaries, where the host library's tests
//! find it as their launcher.)

use std::process::Command;

use toolwire_sandbox::{LAUNCHER_FLAG, Network, Profile};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_toolwire-sandbox");

#[test]
fn a_command_runs_confined_to_its_profile() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("secret")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("secret/key"), "KEY").unwrap();
    std::fs::write(root.join("note"), "NOTE\n").unwrap();
    let profile = Profile::builder()
        .read("/")
        .write(root.join("out"))
        .write("/dev/null")
        .hide(root.join("secret"))
        .network(Network::None)
        .build();
    let script = format!(
        "cat {root}/note; cat {root}/secret/key || echo no-key; \
         echo x > {root}/out/made && echo made; echo x > {root}/elsewhere || echo no-write",
        root = root.display()
    );
    let output = Command::new(LAUNCHER)
        .arg(LAUNCHER_FLAG)
        .arg(serde_json::to_string(&profile).unwrap())
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["NOTE", "no-key", "made", "no-write"]
    );
    assert!(root.join("out/made").exists());
    assert!(!root.join("elsewhere").exists());
}

#[test]
fn a_launcher_started_wrongly_says_so_and_starts_nothing() {
    let bad = Command::new(LAUNCHER)
        .args([LAUNCHER_FLAG, "{not json", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(126));
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(said.contains("the sandbox profile is not valid"), "{said}");
    assert!(said.contains("the server was not started"), "{said}");
    let missing = Command::new(LAUNCHER)
        .args([LAUNCHER_FLAG, "{}", "--", "/definitely/not/a/program"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(126));
    let bare = Command::new(LAUNCHER).output().unwrap();
    assert_eq!(bare.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bare.stderr).contains("usage"));
}
