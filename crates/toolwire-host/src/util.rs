//! Small helpers the crate's modules share.

use sha2::{Digest as _, Sha256};

/// The SHA-256 of `bytes`, as lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Now, as RFC 3339 in UTC with milliseconds.
pub(crate) fn now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    toolwire_protocol::iso8601(ms)
}

/// Creates `dir` and its missing parents, readable by this user only (0700 on Unix); an
/// existing directory is left as it is.
pub(crate) fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates (or truncates) `file` for writing, readable by this user only (0600 on Unix) from
/// the moment it exists.
pub(crate) fn private_file(file: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let opened = options.open(file)?;
    // A file left by an earlier run keeps its mode through `open`: set it.
    #[cfg(unix)]
    std::fs::set_permissions(file, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok(opened)
}
