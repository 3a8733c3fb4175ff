//! Small helpers the crate's modules share.

use sha2::{Digest as _, Sha256};

/// The SHA-256 of `bytes`, as lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    toolwire_protocol::hex::encode(&Sha256::digest(bytes))
}

/// Now, as RFC 3339 in UTC with milliseconds.
pub(crate) fn now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    toolwire_protocol::iso8601(ms)
}
