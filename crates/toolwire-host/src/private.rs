//! Files and directories only their owner may read (0600 and 0700 on Unix): what the host
//! keeps — the audit log (call arguments), pins, remembered answers — is the person's own.
//!
//! A file gets its mode when it is created, never afterwards, so its content is never
//! readable by others even for a moment (a umask would not do: it is the whole process's, and
//! threads create files at the same time). A file replaced whole is written to a new temporary
//! file beside it, created private, then renamed over it. An existing file that others could
//! read is made private when the host opens it, with a warning that says so: it was written by
//! an older version, or by another program, and the person would rather know. Directories the
//! caller named are created private but otherwise left as they are (one may be shared on
//! purpose); the directories the host names itself (`pins/`) are made private too.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The mode of the files the host creates.
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;
/// The mode of the directories the host creates.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing parents, each readable by the owner only. Existing ones are
/// left as they are.
pub(crate) fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(DIR_MODE);
    }
    builder.create(dir)
}

/// Creates `dir` like [`create_dir_all`], and makes it private if it is not: for a directory
/// the host names itself, whose whole content is the host's.
pub(crate) fn own_dir(dir: &Path) -> io::Result<()> {
    create_dir_all(dir)?;
    #[cfg(unix)]
    {
        let mode = std::fs::metadata(dir)?.permissions();
        tighten(dir, &mode, |p| std::fs::set_permissions(dir, p))?;
    }
    Ok(())
}

/// Opens `path` with `options`, creating it private if it is missing; an existing file that
/// others could read is made private.
pub(crate) fn open(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(FILE_MODE);
    }
    let file = options.open(path)?;
    #[cfg(unix)]
    {
        let mode = file.metadata()?.permissions();
        tighten(path, &mode, |p| file.set_permissions(p))?;
    }
    Ok(file)
}

/// Opens `path` to append to, created private if missing.
pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    open(path, OpenOptions::new().create(true).append(true))
}

/// Makes the existing file or directory at `path` private if others could read it; nothing if
/// it does not exist.
pub(crate) fn make_private(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let mode = match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_file() || meta.is_dir() => meta.permissions(),
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        tighten(path, &mode, |p| std::fs::set_permissions(path, p))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Replaces the file at `path` with `bytes`: written to a new temporary file beside it
/// (created private, its name unique to this process and write), synced, then renamed over
/// `path`, so a reader sees the old file or the new one, never half of one.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let (mut file, temp) = loop {
        let temp = temp_beside(path, WRITES.fetch_add(1, Ordering::Relaxed));
        // `create_new` never follows a link nor reuses a file someone else left.
        match open(&temp, OpenOptions::new().write(true).create_new(true)) {
            Ok(file) => break (file, temp),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// `DIR/NAME.PID.N.tmp` for `DIR/NAME`.
fn temp_beside(path: &Path, n: u64) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.{n}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// Takes group and other permissions away from `path` (whose permissions are `mode`) with
/// `set`, saying so; a file that cannot be changed (another user's) is only warned about.
#[cfg(unix)]
fn tighten(
    path: &Path,
    mode: &std::fs::Permissions,
    set: impl FnOnce(std::fs::Permissions) -> io::Result<()>,
) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let bits = mode.mode() & 0o777;
    if bits & 0o077 == 0 {
        return Ok(());
    }
    match set(std::fs::Permissions::from_mode(bits & 0o700)) {
        Ok(()) => tracing::warn!(
            "{}: others could read it (mode {bits:04o}); it is now readable by its owner only",
            path.display()
        ),
        Err(e) => tracing::warn!(
            "{}: others can read it (mode {bits:04o}) and it cannot be made private: {e}",
            path.display()
        ),
    }
    Ok(())
}

/// Every path under `dir` (and `dir` itself) that is not private, with its mode: what the
/// stores' tests expect to be empty.
#[cfg(all(test, unix))]
pub(crate) fn not_private(dir: &Path) -> Vec<(PathBuf, String)> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        let expected = if meta.is_dir() { DIR_MODE } else { FILE_MODE };
        if mode != expected {
            found.push((path.clone(), format!("{mode:04o}")));
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
    }
    found.sort();
    found
}

/// Sets the mode of `path`, for tests of files left by an older version.
#[cfg(all(test, unix))]
pub(crate) fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A directory not made yet, in a scratch directory removed on drop.
    struct Scratch {
        path: PathBuf,
        _dir: tempfile::TempDir,
    }

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let scratch = tempfile::tempdir().unwrap();
            Scratch {
                path: scratch.path().join(name),
                _dir: scratch,
            }
        }
    }

    #[test]
    fn what_is_created_is_private_from_the_start() {
        let scratch = Scratch::new("created");
        let dir = scratch.path.join("a/b");
        create_dir_all(&dir).unwrap();
        replace(&dir.join("replaced.json"), b"{}").unwrap();
        replace(&dir.join("replaced.json"), b"{\"again\": true}").unwrap();
        open_append(&dir.join("log")).unwrap();
        own_dir(&dir.join("own")).unwrap();
        assert_eq!(not_private(&scratch.path), []);
        assert_eq!(
            std::fs::read_to_string(dir.join("replaced.json")).unwrap(),
            "{\"again\": true}"
        );
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            !names.iter().any(|n| n.ends_with(".tmp")),
            "no temporary file is left: {names:?}"
        );
    }

    #[test]
    fn what_others_could_read_is_made_private_when_opened() {
        let scratch = Scratch::new("loose");
        std::fs::create_dir_all(scratch.path.join("named/own")).unwrap();
        for (file, mode) in [
            ("log", 0o644),
            ("lock", 0o666),
            ("read", 0o640),
            ("mine", 0o400),
        ] {
            std::fs::write(scratch.path.join(file), "x").unwrap();
            set_mode(&scratch.path.join(file), mode);
        }
        set_mode(&scratch.path.join("named"), 0o755);
        set_mode(&scratch.path.join("named/own"), 0o755);
        open_append(&scratch.path.join("log")).unwrap();
        open(
            &scratch.path.join("lock"),
            OpenOptions::new().create(true).truncate(false).write(true),
        )
        .unwrap();
        make_private(&scratch.path.join("read")).unwrap();
        make_private(&scratch.path.join("missing")).unwrap();
        make_private(&scratch.path.join("mine")).unwrap();
        own_dir(&scratch.path.join("named/own")).unwrap();
        create_dir_all(&scratch.path.join("named")).unwrap();
        set_mode(&scratch.path, 0o700);
        // Only the directory the caller named is left as it was; a read-only file stays so.
        let loose = not_private(&scratch.path);
        let shown: Vec<(String, &str)> = loose
            .iter()
            .map(|(p, m)| {
                let p = p.strip_prefix(&scratch.path).unwrap();
                (p.display().to_string(), m.as_str())
            })
            .collect();
        assert_eq!(
            shown,
            [("mine".to_owned(), "0400"), ("named".to_owned(), "0755")]
        );
    }
}
