//! The directories Toolwire keeps its state and data in: readable by their owner only (0700
//! on Unix), as the files the libraries write in them are (0600): call arguments, pins,
//! remembered answers, tokens, handles.

use std::io;
use std::path::Path;

/// Who chose a directory, which decides whether an existing one others could open is made
/// private.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chosen {
    /// The default directory, which Toolwire names and fills alone.
    ByToolwire,
    /// A directory the person named: it may be shared on purpose.
    ByPerson,
}

/// Creates `dir` and its missing parents readable by their owner only. When Toolwire chose it,
/// an existing `dir` that others could open is made private too, with a warning; a directory
/// the person named is left as it is (it may be shared on purpose: the files in it are private
/// all the same).
pub(crate) fn dir(dir: &Path, chosen: Chosen) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    #[cfg(unix)]
    if chosen == Chosen::ByToolwire {
        use std::os::unix::fs::PermissionsExt as _;
        let bits = std::fs::metadata(dir)?.permissions().mode() & 0o777;
        if bits & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(bits & 0o700))?;
            tracing::warn!(
                "{}: others could open it (mode {bits:04o}); it is now private",
                dir.display()
            );
        }
    }
    #[cfg(not(unix))]
    let _ = chosen;
    Ok(())
}

/// Replaces `file` with `bytes`, readable by its owner only from its creation: written to a
/// file beside it, then renamed into place.
pub(crate) fn replace(file: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut temp = file.as_os_str().to_owned();
    temp.push(format!(".{}.tmp", std::process::id()));
    let temp = std::path::PathBuf::from(temp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&temp)?.write_all(bytes)?;
    std::fs::rename(&temp, file)
}
