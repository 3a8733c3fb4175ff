//! Image and audio blocks (T-22): `data` must be base64 and `mimeType` a plausible type of the
//! block's kind. When the type is one whose file signature is well known (PNG, JPEG, GIF, WebP,
//! WAV, MP3, OGG, FLAC), the first bytes must carry it, so a tool cannot pass off arbitrary
//! bytes (or a script) as a picture.

use base64::Engine as _;

/// Why a media block is refused, if it is.
pub(crate) fn check(kind: &str, data: &str, mime_type: &str) -> Result<(), String> {
    let Some((top, sub)) = mime_type.split_once('/') else {
        return Err(format!("the MIME type {mime_type:?} is not type/subtype"));
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let sub = sub.split(';').next().unwrap_or_default().trim();
    if !top.eq_ignore_ascii_case(kind) || !token(sub) {
        return Err(format!("the MIME type {mime_type:?} is not an {kind} type"));
    }
    if !is_base64(data) {
        return Err("the data is not base64".into());
    }
    if let Some(expected) = signature(kind, &sub.to_ascii_lowercase()) {
        // Enough base64 for 16 bytes, decoded once.
        let head: String = data.chars().take(24).collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(head.trim_end_matches('='))
            .or_else(|_| {
                base64::engine::general_purpose::STANDARD_NO_PAD.decode(head.trim_end_matches('='))
            })
            .unwrap_or_default();
        if !expected(&bytes) {
            return Err(format!("the data does not start like {mime_type}"));
        }
    }
    Ok(())
}

/// Standard base64: the alphabet, padding only at the end, a length that is a multiple of 4
/// (whitespace is not allowed in MCP content).
fn is_base64(data: &str) -> bool {
    let bytes = data.as_bytes();
    if bytes.is_empty() || bytes.len() % 4 != 0 {
        return false;
    }
    let body = data.trim_end_matches('=');
    if bytes.len() - body.len() > 2 {
        return false;
    }
    body.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

type Signature = fn(&[u8]) -> bool;

/// The signature check of a well-known type.
fn signature(kind: &str, sub: &str) -> Option<Signature> {
    Some(match (kind, sub) {
        ("image", "png") => |b| b.starts_with(b"\x89PNG\r\n\x1a\n"),
        ("image", "jpeg" | "jpg") => |b| b.starts_with(&[0xff, 0xd8, 0xff]),
        ("image", "gif") => |b| b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a"),
        ("image", "webp") => |b| b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP"),
        ("audio", "wav" | "x-wav" | "wave") => {
            |b| b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WAVE")
        }
        ("audio", "mpeg" | "mp3") => {
            |b| b.starts_with(b"ID3") || (b.len() > 1 && b[0] == 0xff && b[1] & 0xe0 == 0xe0)
        }
        ("audio", "ogg") => |b| b.starts_with(b"OggS"),
        ("audio", "flac") => |b| b.starts_with(b"fLaC"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn real_media_passes() {
        let png = b64(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
        assert_eq!(check("image", &png, "image/png"), Ok(()));
        assert_eq!(
            check("image", &b64(&[0xff, 0xd8, 0xff, 0xe0, 1, 2]), "image/jpeg"),
            Ok(())
        );
        assert_eq!(
            check("audio", &b64(b"RIFF\0\0\0\0WAVEfmt "), "audio/wav"),
            Ok(())
        );
        assert_eq!(
            check("image", &b64(b"<svg/>"), "image/svg+xml"),
            Ok(()),
            "no signature known"
        );
    }

    #[test]
    fn lies_and_junk_are_refused() {
        let png = b64(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
        let script = b64(b"<script>alert(1)</script>");
        let cases = [
            ("image", script.as_str(), "image/png", "does not start like"),
            ("image", png.as_str(), "text/html", "not an image type"),
            ("audio", png.as_str(), "image/png", "not an audio type"),
            ("image", "not base64!", "image/png", "not base64"),
            ("image", "abc", "image/png", "not base64"),
            ("image", "", "image/png", "not base64"),
            ("image", png.as_str(), "png", "type/subtype"),
            ("image", png.as_str(), "image/", "not an image type"),
        ];
        for (kind, data, mime, why) in cases {
            let refused = check(kind, data, mime).unwrap_err();
            assert!(refused.contains(why), "{kind} {mime}: {refused}");
        }
    }
}
