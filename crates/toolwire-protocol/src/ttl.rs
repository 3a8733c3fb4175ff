//! Reading `ttlMs` leniently (K-05, Q-10): any JSON number is accepted; integral floats read as
//! integers, fractions are truncated, and zero, negative or absent values mean "stale now".

use serde::{Deserialize, Deserializer};

/// Deserializes a `ttlMs` value as whole non-negative milliseconds.
pub(crate) fn lenient<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let value = serde_json::Number::deserialize(deserializer)?;
    Ok(match (value.as_u64(), value.as_f64()) {
        (Some(ms), _) => ms,
        (None, Some(ms)) if ms.is_finite() && ms > 0.0 => ms.min(u64::MAX as f64) as u64,
        _ => 0,
    })
}

#[cfg(test)]
mod tests {
    use crate::ListToolsResult;

    fn ttl(raw: &str) -> u64 {
        let json = format!(
            r#"{{"resultType":"complete","tools":[],"cacheScope":"public","ttlMs":{raw}}}"#
        );
        serde_json::from_str::<ListToolsResult>(&json)
            .expect("parses")
            .ttl_ms
    }

    #[test]
    fn accepts_any_number() {
        assert_eq!(ttl("60000"), 60_000);
        assert_eq!(ttl("60000.0"), 60_000);
        assert_eq!(ttl("1.9"), 1);
        assert_eq!(ttl("-5"), 0);
        assert_eq!(ttl("0"), 0);
        assert_eq!(ttl("1e300"), u64::MAX);
    }

    #[test]
    fn rejects_non_numbers() {
        let json = r#"{"resultType":"complete","tools":[],"ttlMs":"60"}"#;
        assert!(serde_json::from_str::<ListToolsResult>(json).is_err());
    }
}
