use serde_json::json;

use super::*;

/// A scratch directory, removed on drop.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new(name: &str) -> Dir {
        let scratch = tempfile::Builder::new()
            .prefix(&format!("toolwire-host-audit-{name}-"))
            .tempdir()
            .unwrap();
        Dir(scratch)
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn log(&self) -> PathBuf {
        self.path().join("audit.jsonl")
    }
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

/// A log of `n` call records.
fn written(dir: &Dir, n: u64) -> PathBuf {
    let log = AuditLog::open(dir.log()).unwrap();
    for i in 1..=n {
        let head = log
            .append("call", fields(json!({"tool": "fs__read", "i": i})))
            .unwrap();
        assert_eq!(head.seq, i);
    }
    dir.log()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn rewrite(path: &Path, lines: &[String]) {
    std::fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

#[test]
fn an_untouched_log_verifies_and_reopens_where_it_stopped() {
    let dir = Dir::new("ok");
    let path = written(&dir, 5);
    let verified = verify(&path).unwrap();
    assert_eq!(verified.records, 5);
    let first: Value = serde_json::from_str(&lines(&path)[0]).unwrap();
    assert_eq!(first["prev"], GENESIS);
    assert_eq!(first["event"], "call");
    assert_eq!(first["seq"], 1);
    assert_eq!(first["tool"], "fs__read");
    // Reopened, the chain goes on.
    let log = AuditLog::open(&path).unwrap();
    assert_eq!(log.head(), verified.head);
    assert_eq!(log.append("connected", Map::new()).unwrap().seq, 6);
    assert_eq!(verify(&path).unwrap().records, 6);
}

#[test]
fn each_kind_of_tampering_is_found() {
    type Change = fn(&mut Vec<String>);
    type Expect = fn(&Tampering) -> bool;
    let cases: [(&str, Change, Expect); 7] = [
        (
            "moved-back",
            |l| {
                let x = l.remove(0);
                l.insert(3, x);
            },
            |t| {
                matches!(
                    t,
                    Tampering::Reordered {
                        line: 1,
                        expected: 1,
                        ..
                    }
                )
            },
        ),
        (
            "edited",
            |l| l[1] = l[1].replace("fs__read", "fs__wipe"),
            |t| {
                matches!(
                    t,
                    Tampering::Edited {
                        seq: 2,
                        line: 2,
                        ..
                    }
                )
            },
        ),
        (
            "edited-last",
            |l| l[4] = l[4].replace("fs__read", "fs__wipe"),
            |t| matches!(t, Tampering::Edited { seq: 5, .. }),
        ),
        (
            "deleted",
            |l| {
                l.remove(2);
            },
            |t| {
                matches!(
                    t,
                    Tampering::Deleted {
                        from: 3,
                        to: 3,
                        line: 3,
                        ..
                    }
                )
            },
        ),
        (
            "reordered",
            |l| l.swap(1, 2),
            |t| {
                matches!(
                    t,
                    Tampering::Deleted { from: 2, to: 2, .. } | Tampering::Reordered { .. }
                )
            },
        ),
        (
            "truncated",
            |l| {
                l.truncate(3);
            },
            |t| matches!(t, Tampering::Truncated { .. }),
        ),
        (
            "not-json",
            |l| l[0].push('x'),
            |t| matches!(t, Tampering::Malformed { line: 1, .. }),
        ),
    ];
    for (name, change, expected) in cases {
        let dir = Dir::new(name);
        let path = written(&dir, 5);
        let mut l = lines(&path);
        change(&mut l);
        rewrite(&path, &l);
        let found = verify(&path).unwrap_err();
        assert!(expected(&found), "{name}: {found}");
        // A log that does not verify is not appended to.
        assert!(
            matches!(AuditLog::open(&path), Err(AuditError::Tampered(_))),
            "{name}"
        );
    }
}

#[test]
fn a_line_cut_in_the_middle_is_found() {
    let dir = Dir::new("cut");
    let path = written(&dir, 3);
    let text = std::fs::read(&path).unwrap();
    std::fs::write(&path, &text[..text.len() - 10]).unwrap();
    let found = verify(&path).unwrap_err();
    assert!(matches!(found, Tampering::Truncated { .. }), "{found}");
    assert!(found.to_string().contains("cut off"), "{found}");
}

#[test]
fn a_head_one_record_behind_is_a_crash_not_tampering() {
    let dir = Dir::new("lag");
    let path = written(&dir, 3);
    let before = verify(&path).unwrap().head;
    AuditLog::open(&path)
        .unwrap()
        .append("call", Map::new())
        .unwrap();
    // The crash window: the record is written, the head not yet.
    std::fs::write(
        head_path(&path),
        format!("{} {}\n", before.seq, before.hash),
    )
    .unwrap();
    assert_eq!(verify(&path).unwrap().records, 4);
    // Two behind is not a crash.
    let two_before = format!("{} {}\n", before.seq - 1, GENESIS);
    std::fs::write(head_path(&path), two_before).unwrap();
    assert!(matches!(verify(&path), Err(Tampering::Head { .. })));
    std::fs::remove_file(head_path(&path)).unwrap();
    assert!(matches!(verify(&path), Err(Tampering::Head { .. })));
}

#[test]
fn rotation_carries_the_chain_into_the_next_file() {
    let dir = Dir::new("rotate");
    let log = AuditLog::open(dir.log()).unwrap().rotate_at(4096);
    let big = "x".repeat(1000);
    for i in 0..20 {
        log.append("call", fields(json!({"i": i, "pad": big})))
            .unwrap();
    }
    drop(log);
    let verified = verify(dir.log()).unwrap();
    assert_eq!(verified.records, 20);
    assert!(verified.files.len() >= 4, "{:?}", verified.files);
    // The first record of a rotated-in file chains to the last of the one before.
    let second = verify::numbered(&dir.log(), 2);
    let first_line: Value = serde_json::from_str(&lines(&second)[0]).unwrap();
    let last_of_first = lines(&verify::numbered(&dir.log(), 1)).pop().unwrap();
    assert_eq!(
        first_line["prev"],
        crate::util::sha256_hex(last_of_first.as_bytes())
    );
    // Deleting a rotated file breaks the chain.
    std::fs::remove_file(&second).unwrap();
    assert!(matches!(verify(dir.log()), Err(Tampering::Deleted { .. })));
}

#[test]
fn reserved_fields_and_missing_logs_are_refused() {
    let dir = Dir::new("reserved");
    let log = AuditLog::open(dir.log()).unwrap();
    assert!(matches!(
        log.append("call", fields(json!({"seq": 1}))),
        Err(AuditError::ReservedField(f)) if f == "seq"
    ));
    assert!(matches!(
        verify(dir.path().join("none.jsonl")),
        Err(Tampering::Missing { .. })
    ));
    // An empty log (opened, nothing written) verifies.
    assert_eq!(verify(dir.log()).unwrap().records, 0);
}

/// A log deleted whole while its head stays was reported as missing, the word for a log never
/// written, and opened afresh over the evidence.
#[test]
fn a_log_deleted_while_its_head_stays_is_tampering() {
    let dir = Dir::new("deleted-whole");
    let path = written(&dir, 3);
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(verify(&path), Err(Tampering::Truncated { ref detail, .. }) if detail.contains("record 3")),
        "{:?}",
        verify(&path)
    );
    assert!(matches!(
        AuditLog::open(&path),
        Err(AuditError::Tampered(Tampering::Truncated { .. }))
    ));
    // With its head gone too, nothing tells it from a log never written.
    std::fs::remove_file(head_path(&path)).unwrap();
    assert!(matches!(verify(&path), Err(Tampering::Missing { .. })));
}

#[test]
fn two_writers_of_one_log_keep_one_chain_across_rotations() {
    // Two handles on one file stand for two processes (two `toolwire call`s at once).
    let dir = Dir::new("writers");
    let one = AuditLog::open(dir.log()).unwrap().rotate_at(4096);
    let two = AuditLog::open(dir.log()).unwrap().rotate_at(4096);
    let padding = "x".repeat(300);
    std::thread::scope(|scope| {
        for (log, name) in [(&one, "one"), (&two, "two")] {
            let padding = &padding;
            scope.spawn(move || {
                for i in 0..40 {
                    log.append("call", fields(json!({"by": name, "i": i, "pad": padding})))
                        .unwrap();
                }
            });
        }
    });
    let verified = verify(dir.log()).unwrap();
    assert_eq!(verified.records, 80);
    assert!(verify::rotated(&dir.log()).unwrap().len() >= 3, "rotated");
    // Each handle goes on from the other's last record.
    assert_eq!(one.append("done", Map::new()).unwrap().seq, 81);
    assert_eq!(two.append("done", Map::new()).unwrap().seq, 82);
    assert_eq!(verify(dir.log()).unwrap().records, 82);
}

/// Every record of a rotated log in a directory made for it: the log, its rotations, its head
/// and its lock, and the directories, are readable by their owner only (they hold the calls'
/// arguments).
#[cfg(unix)]
#[test]
fn the_log_and_everything_beside_it_are_private() {
    let dir = Dir::new("private");
    let path = dir.path().join("state/audit/audit.jsonl");
    let log = AuditLog::open(&path).unwrap().rotate_at(4096);
    for i in 0..60 {
        let arguments = json!({"path": "/home/me/secret", "text": "x".repeat(100)});
        log.append("call", fields(json!({"arguments": arguments, "i": i})))
            .unwrap();
    }
    assert!(!verify::rotated(&path).unwrap().is_empty(), "rotated");
    verify(&path).unwrap();
    assert_eq!(crate::private::not_private(&dir.path().join("state")), []);
}

/// A log written before its files were private (or by another program) is made private when
/// the log is opened: every rotation, the head and the lock too.
#[cfg(unix)]
#[test]
fn a_log_others_could_read_is_made_private_when_opened() {
    let dir = Dir::new("loose");
    let path = dir.log();
    let log = AuditLog::open(&path).unwrap().rotate_at(4096);
    for i in 0..60 {
        log.append("call", fields(json!({"text": "x".repeat(100), "i": i})))
            .unwrap();
    }
    drop(log);
    let mut files = verify::rotated(&path).unwrap();
    files.extend([path.clone(), head_path(&path), lock_path(&path)]);
    for file in &files {
        crate::private::set_mode(file, 0o644);
    }
    AuditLog::open(&path).unwrap();
    crate::private::set_mode(dir.path(), 0o700);
    assert_eq!(crate::private::not_private(dir.path()), []);
}
