//! Lowercase hex, the one encoding of digests and random ids across the workspace (audit hashes,
//! pins, task ids, request-state digests), written once.

/// `bytes` as lowercase hex, two digits a byte.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Written into bytes and checked once: pushing chars checks room and encodes each one
    // (an audit record's digest took some 900 instructions that way).
    let mut out = vec![0; bytes.len() * 2];
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_two_lowercase_digits() {
        for (bytes, want) in [
            (&[][..], ""),
            (&[0x00][..], "00"),
            (&[0x0f, 0xa0, 0xff][..], "0fa0ff"),
        ] {
            assert_eq!(encode(bytes), want);
        }
        let all: Vec<u8> = (0..=255).collect();
        let want: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(encode(&all), want);
    }
}
