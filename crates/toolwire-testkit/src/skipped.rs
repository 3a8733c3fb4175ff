//! Tests skipped for want of a system part: the block that says so, and the ledger that carries
//! them from the binary that skipped them to the end of the `cargo test` run.
//!
//! The ledger is a file in the temporary folder named after the process that ran the test
//! binaries (`cargo test`: every binary's parent) and its start time, so that two runs never
//! read each other's; the last binary of the run takes it (reads and removes it).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use crate::system::SystemPart;

/// A test skipped for want of a part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub(crate) test: String,
    pub(crate) missing: SystemPart,
}

/// What a block speaks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The test binary that skipped them.
    Binary,
    /// The whole `cargo test` run.
    Run,
}

/// The block a person sees at the end of the output: each missing part, the command that
/// installs it, and the tests it kept from running.
pub(crate) fn block(skipped: &[Skipped], scope: Scope) -> String {
    let mut by_part: BTreeMap<SystemPart, Vec<&str>> = BTreeMap::new();
    for skip in skipped {
        by_part.entry(skip.missing).or_default().push(&skip.test);
    }
    let rule = "=".repeat(78);
    let of = match scope {
        Scope::Binary => "of this binary",
        Scope::Run => "of this run",
    };
    let mut text = format!(
        "\n{rule}\nSKIPPED, NOT PASSED: {} test{} {of}, for want of parts only the system's\n\
         package manager provides (they are counted as ignored).\n",
        skipped.len(),
        if skipped.len() == 1 { "" } else { "s" }
    );
    for (part, tests) in &by_part {
        text.push_str(&format!(
            "\n  {} is missing; install it with: {}\n",
            part.program(),
            part.install()
        ));
        for test in tests {
            text.push_str(&format!("    - {test}\n"));
        }
    }
    text.push_str(&format!(
        "\nAll of them at once (Debian, root or sudo): scripts/parts install-system\n\
         With {}=1 a missing part fails its tests instead (CI sets it).\n{rule}\n",
        crate::REQUIRE_PARTS
    ));
    text
}

/// This run's ledger: `$TMPDIR/toolwire-testkit/skipped-PPID-START`, where PPID is the process
/// that runs the test binaries and START its start time (Linux; elsewhere PPID alone).
fn ledger() -> PathBuf {
    let parent = std::os::unix::process::parent_id();
    let started = std::fs::read_to_string(format!("/proc/{parent}/stat"))
        .ok()
        .and_then(|stat| {
            // Field 22, counted after the command's closing parenthesis (field 2).
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().nth(19).map(str::to_owned)
        })
        .unwrap_or_default();
    std::env::temp_dir()
        .join("toolwire-testkit")
        .join(format!("skipped-{parent}-{started}"))
}

/// Adds `skipped` to this run's ledger (a line each: the part's program, a tab, the test).
pub(crate) fn record(skipped: &[Skipped]) {
    let path = ledger();
    let Some(dir) = path.parent() else { return };
    let _ = std::fs::create_dir_all(dir);
    let lines: String = skipped
        .iter()
        .map(|s| format!("{}\t{}\n", s.missing.program(), s.test))
        .collect();
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(lines.as_bytes()));
    if let Err(e) = appended {
        let _ = writeln!(
            std::io::stderr(),
            "toolwire-testkit: the skipped tests could not be noted in {}: {e}",
            path.display()
        );
    }
}

/// This run's skipped tests, the ledger removed.
pub(crate) fn take() -> Vec<Skipped> {
    let path = ledger();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    parse(&text)
}

fn parse(text: &str) -> Vec<Skipped> {
    text.lines()
        .filter_map(|line| {
            let (program, test) = line.split_once('\t')?;
            let missing = SystemPart::ALL
                .into_iter()
                .find(|part| part.program() == program)?;
            Some(Skipped {
                test: test.to_owned(),
                missing,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped() -> Vec<Skipped> {
        vec![
            Skipped {
                test: "balancer::kill_9".to_owned(),
                missing: SystemPart::HAProxy,
            },
            Skipped {
                test: "console::approve".to_owned(),
                missing: SystemPart::Chromium,
            },
            Skipped {
                test: "balancer::notes".to_owned(),
                missing: SystemPart::HAProxy,
            },
        ]
    }

    #[test]
    fn the_block_names_each_part_its_install_and_its_tests() {
        let text = block(&skipped(), Scope::Binary);
        assert!(
            text.contains("SKIPPED, NOT PASSED: 3 tests of this binary"),
            "{text}"
        );
        let haproxy = text.find("haproxy is missing; install it with: scripts/cluster install");
        let chromium = text.find("chromium is missing; install it with: scripts/console install");
        assert!(haproxy.is_some() && chromium.is_some(), "{text}");
        assert!(
            text.contains("    - balancer::kill_9\n    - balancer::notes\n"),
            "{text}"
        );
        assert!(text.contains("scripts/parts install-system"), "{text}");
        let run = block(&skipped()[..1], Scope::Run);
        assert!(
            run.contains("SKIPPED, NOT PASSED: 1 test of this run"),
            "{run}"
        );
    }

    #[test]
    fn the_ledger_reads_back_what_was_noted_and_nothing_unknown() {
        let noted = "haproxy\tbalancer::kill_9\nchromium\tconsole::approve\n\
                     haproxy\tbalancer::notes\nnot-a-part\tx\nno tab\n";
        assert_eq!(parse(noted), skipped());
    }
}
