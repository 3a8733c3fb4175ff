//! Streamable HTTP header rules that both sides share, as pure functions: the standard header
//! names, the `=?base64?…?=` value encoding (H-14, H-23), and the `x-mcp-header` parameter
//! declarations of a tool's `inputSchema` (T-20), with the matching of header values against
//! argument values (H-15).

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::JsonObject;

/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `Mcp-Method`.
pub const METHOD: &str = "mcp-method";
/// `Mcp-Name`.
pub const NAME: &str = "mcp-name";
/// Prefix of mirrored tool parameters, `Mcp-Param-{Name}`.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// The schema keyword that marks a parameter for mirroring.
pub const X_MCP_HEADER: &str = "x-mcp-header";

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Why a header value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValueError {
    /// The value wraps invalid base64 in the sentinel.
    InvalidBase64(String),
    /// The decoded bytes are not UTF-8.
    NotUtf8,
}

impl std::fmt::Display for HeaderValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderValueError::InvalidBase64(why) => {
                write!(f, "invalid base64 in header value: {why}")
            }
            HeaderValueError::NotUtf8 => write!(f, "base64 header value is not UTF-8"),
        }
    }
}

impl std::error::Error for HeaderValueError {}

/// Decodes a received header value: surrounding whitespace is trimmed, and a value of the exact
/// form `=?base64?<standard padded base64>?=` is decoded (H-14). Anything else is literal.
pub fn decode_value(raw: &str) -> Result<Cow<'_, str>, HeaderValueError> {
    let value = raw.trim_matches(|c| c == ' ' || c == '\t');
    match value
        .strip_prefix(SENTINEL_START)
        .and_then(|v| v.strip_suffix(SENTINEL_END))
    {
        Some(b64) => {
            let bytes = STANDARD
                .decode(b64)
                .map_err(|e| HeaderValueError::InvalidBase64(e.to_string()))?;
            String::from_utf8(bytes)
                .map(Cow::Owned)
                .map_err(|_| HeaderValueError::NotUtf8)
        }
        // Most values are plain: borrowed, not copied.
        None => Ok(Cow::Borrowed(value)),
    }
}

/// Encodes a value for a header (H-23): plain when it is visible ASCII without edge whitespace
/// and does not look like the sentinel; otherwise `=?base64?…?=`.
pub fn encode_value(value: &str) -> String {
    let visible_ascii = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    let edge_space = value.starts_with(' ') || value.ends_with(' ');
    let looks_encoded = value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END);
    if visible_ascii && !edge_space && !looks_encoded {
        value.to_owned()
    } else {
        format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value))
    }
}

/// The JSON type of a mirrored parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A string, mirrored as is.
    String,
    /// An integer, mirrored in decimal and compared numerically.
    Integer,
    /// A boolean, mirrored as `true` / `false`.
    Boolean,
}

/// One `x-mcp-header` declaration of a tool: the header name and where its value lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// The name as declared; the header is `Mcp-Param-{name}`.
    pub name: String,
    /// Property names from the root of the arguments to the value.
    pub path: Vec<String>,
    /// The value's type.
    pub kind: ParamKind,
}

impl HeaderParam {
    /// The argument value this parameter mirrors; `None` when absent or null (H-15, H-24).
    pub fn value_in<'a>(&self, arguments: &'a Value) -> Option<&'a Value> {
        let mut at = arguments;
        for key in &self.path {
            at = at.get(key)?;
        }
        (!at.is_null()).then_some(at)
    }

    /// The header value a client sends for `value` (H-24), before sentinel encoding.
    pub fn render(&self, value: &Value) -> Option<String> {
        match (self.kind, value) {
            (ParamKind::String, Value::String(s)) => Some(s.clone()),
            (ParamKind::Integer, Value::Number(n)) => n
                .as_i64()
                .map(|i| i.to_string())
                .or_else(|| n.as_u64().map(|u| u.to_string()))
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0)
                        .map(|f| format!("{f:.0}"))
                }),
            (ParamKind::Boolean, Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        }
    }

    /// Whether a decoded header value matches the argument value; integers compare
    /// numerically, so `042` matches 42 (H-15).
    pub fn matches(&self, header: &str, value: &Value) -> bool {
        match (self.kind, value) {
            (ParamKind::String, Value::String(s)) => header == s,
            (ParamKind::Boolean, Value::Bool(b)) => header == if *b { "true" } else { "false" },
            (ParamKind::Integer, Value::Number(n)) => {
                let Some(header) = exact_integer(header) else {
                    return false;
                };
                match (n.as_i64(), n.as_u64(), n.as_f64()) {
                    (Some(i), _, _) => header == i.to_string(),
                    (_, Some(u), _) => header == u.to_string(),
                    // An integral float beyond 64 bits: both sides through the same rounding,
                    // so the digits a client renders for 4e302 match it, as does `4e302`
                    // (found by the `headers` fuzz target; a cast saturated at i128::MAX).
                    (_, _, Some(f)) if f.fract() == 0.0 => header.parse::<f64>() == Ok(f),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// The digits more than any JSON number a client can send has (an f64 reaches 309).
const MAX_INTEGER_DIGITS: usize = 400;

/// The integer a decimal number denotes exactly (`42`, `042`, `+42`, `42.0`, `4.2e1`), as its
/// canonical decimal text (`-0` is `0`), or `None` if it is not an integer, not a number, or
/// longer than [`MAX_INTEGER_DIGITS`]. Exact digit arithmetic, not floating point, so large
/// values compare correctly in both directions (H-15).
fn exact_integer(text: &str) -> Option<String> {
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], unsigned[at + 1..].parse::<i32>().ok()?),
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits_only(whole)
        || !digits_only(fraction)
        || (mantissa.contains('.') && fraction.is_empty())
    {
        return None;
    }
    // The value is digits × 10^scale; a negative scale must only drop zeros.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some("0".to_owned());
    }
    let scale = i64::from(exponent) - fraction.len() as i64;
    let mut canonical = String::with_capacity(digits.len() + 1);
    if negative {
        canonical.push('-');
    }
    if scale < 0 {
        let cut = digits.len().checked_sub(usize::try_from(-scale).ok()?)?;
        if !digits[cut..].bytes().all(|b| b == b'0') {
            return None;
        }
        if cut == 0 {
            return None;
        }
        canonical.push_str(&digits[..cut]);
    } else {
        let zeros = usize::try_from(scale).ok()?;
        if digits.len().checked_add(zeros)? > MAX_INTEGER_DIGITS {
            return None;
        }
        canonical.push_str(digits);
        canonical.extend(std::iter::repeat_n('0', zeros));
    }
    Some(canonical)
}

/// Why an `x-mcp-header` declaration is invalid (T-20, C-08).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderDeclarationError {
    /// JSON pointer of the schema node carrying the declaration.
    pub schema_path: String,
    /// The rule broken.
    pub rule: &'static str,
}

impl std::fmt::Display for HeaderDeclarationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.schema_path.is_empty() {
            "/"
        } else {
            &self.schema_path
        };
        write!(f, "x-mcp-header at {at}: {}", self.rule)
    }
}

impl std::error::Error for HeaderDeclarationError {}

/// Whether `name` is a non-empty RFC 9110 token.
pub fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Reads every `x-mcp-header` declaration of an `inputSchema`, enforcing T-20: a non-empty
/// token, unique case-insensitively, on a string, integer or boolean property (not number),
/// reachable from the root only through `properties`.
pub fn header_params(
    input_schema: &JsonObject,
) -> Result<Vec<HeaderParam>, HeaderDeclarationError> {
    let mut found = Vec::new();
    walk(input_schema, Some(&mut Vec::new()), "", &mut found)?;
    let mut seen = std::collections::HashSet::new();
    for p in &found {
        if !seen.insert(p.name.to_ascii_lowercase()) {
            return Err(HeaderDeclarationError {
                schema_path: pointer(&p.path),
                rule: "header names must be unique (case-insensitively) within a tool",
            });
        }
    }
    Ok(found)
}

/// Keywords whose value is data, not a subschema.
const DATA_KEYWORDS: &[&str] = &[
    "enum",
    "const",
    "default",
    "examples",
    "required",
    "x-mcp-header",
];
/// Keywords whose value maps names to subschemas.
const MAP_KEYWORDS: &[&str] = &[
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];

/// Visits a schema node. `chain` is the property path when the node is reachable from the root
/// through `properties` only, `None` otherwise.
fn walk(
    node: &JsonObject,
    chain: Option<&mut Vec<String>>,
    at: &str,
    found: &mut Vec<HeaderParam>,
) -> Result<(), HeaderDeclarationError> {
    let err = |rule| {
        Err(HeaderDeclarationError {
            schema_path: at.to_owned(),
            rule,
        })
    };
    let mut chain = chain;
    if let Some(declared) = node.get(X_MCP_HEADER) {
        match declaration(node, declared, chain.as_deref().map(Vec::as_slice)) {
            Ok(param) => found.push(param),
            Err(rule) => return err(rule),
        }
    }
    for (key, value) in node {
        let here = format!("{at}/{}", escape(key));
        match (key.as_str(), value) {
            ("properties", Value::Object(props)) => {
                for (name, sub) in props {
                    let Value::Object(sub) = sub else { continue };
                    let sub_at = format!("{here}/{}", escape(name));
                    match chain.as_deref_mut() {
                        Some(path) => {
                            path.push(name.clone());
                            let r = walk(sub, Some(path), &sub_at, found);
                            path.pop();
                            r?;
                        }
                        None => walk(sub, None, &sub_at, found)?,
                    }
                }
            }
            (k, _) if DATA_KEYWORDS.contains(&k) => {}
            (k, Value::Object(map)) if MAP_KEYWORDS.contains(&k) => {
                for (name, sub) in map {
                    if let Value::Object(sub) = sub {
                        walk(sub, None, &format!("{here}/{}", escape(name)), found)?;
                    }
                }
            }
            (_, Value::Object(sub)) => walk(sub, None, &here, found)?,
            (_, Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if let Value::Object(sub) = item {
                        walk(sub, None, &format!("{here}/{i}"), found)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The header a node declares with `x-mcp-header` (`declared`), or the rule it breaks. `path`
/// is the property path when the node is reachable from the root through `properties` only.
fn declaration(
    node: &JsonObject,
    declared: &Value,
    path: Option<&[String]>,
) -> Result<HeaderParam, &'static str> {
    let Some(path) = path else {
        return Err(
            "allowed only on properties reachable from the root through `properties` (not items, combinators, conditionals or $ref)",
        );
    };
    if path.is_empty() {
        return Err("not allowed on the schema root");
    }
    let Some(name) = declared.as_str() else {
        return Err("the header name must be a string");
    };
    if name.is_empty() {
        return Err("the header name must not be empty");
    }
    if !is_token(name) {
        return Err(
            "the header name must be an RFC 9110 token (no spaces, colons, control or non-ASCII characters)",
        );
    }
    let Some(kind) = primitive_kind(node) else {
        return Err("allowed only on string, integer or boolean properties");
    };
    Ok(HeaderParam {
        name: name.to_owned(),
        path: path.to_vec(),
        kind,
    })
}

/// The primitive type of a property: `type` is one of string/integer/boolean, optionally
/// together with `"null"`.
fn primitive_kind(node: &JsonObject) -> Option<ParamKind> {
    let kind = |t: &str| match t {
        "string" => Some(ParamKind::String),
        "integer" => Some(ParamKind::Integer),
        "boolean" => Some(ParamKind::Boolean),
        _ => None,
    };
    match node.get("type")? {
        Value::String(t) => kind(t),
        Value::Array(types) => {
            let named: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match named.as_slice() {
                [one] if types.len() <= 2 => kind(one),
                _ => None,
            }
        }
        _ => None,
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|k| format!("/properties/{}", escape(k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn decodes_values() {
        let cases = [
            ("us-west1", "us-west1"),
            ("  padded  ", "padded"),
            ("=?base64?SGVsbG8=?=", "Hello"),
            (" =?base64?SGVsbG8=?= ", "Hello"),
            ("SGVsbG8=", "SGVsbG8="),
            ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
            ("=?base64?5LiW55WM?=", "世界"),
            ("=?base64??=", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(decode_value(raw).unwrap(), want, "{raw}");
        }
        for bad in [
            "=?base64?SGVsbG8?=",
            "=?base64?SGVs!!!bG8=?=",
            "=?base64?/w==?=",
        ] {
            assert!(decode_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn encodes_only_what_needs_it() {
        let cases = [
            ("us-west1", "us-west1"),
            ("us west 1", "us west 1"),
            ("", ""),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("\tindented", "=?base64?CWluZGVudGVk?="),
            ("=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="),
        ];
        for (value, want) in cases {
            assert_eq!(encode_value(value), want, "{value:?}");
            assert_eq!(
                decode_value(&encode_value(value)).unwrap(),
                value,
                "round-trip {value:?}"
            );
        }
    }

    #[test]
    fn finds_declarations_on_property_chains() {
        let schema = object(json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "opts": {"type": "object", "properties": {
                    "priority": {"type": ["integer", "null"], "x-mcp-header": "Priority"}
                }},
                "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
                "x-mcp-header": {"type": "string"}
            }
        }));
        let params = header_params(&schema).unwrap();
        let names: Vec<_> = params
            .iter()
            .map(|p| (p.name.as_str(), p.path.join("."), p.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("Priority", "opts.priority".to_owned(), ParamKind::Integer),
                ("Region", "region".to_owned(), ParamKind::String),
                ("Verbose", "verbose".to_owned(), ParamKind::Boolean),
            ]
        );
    }

    #[test]
    fn rejects_invalid_declarations() {
        let prop = |p: Value| object(json!({"type": "object", "properties": {"a": p}}));
        let cases = [
            prop(json!({"type": "string", "x-mcp-header": ""})),
            prop(json!({"type": "string", "x-mcp-header": "My Header"})),
            prop(json!({"type": "string", "x-mcp-header": "Région"})),
            prop(json!({"type": "string", "x-mcp-header": "a:b"})),
            prop(json!({"type": "string", "x-mcp-header": "a\tb"})),
            prop(json!({"type": "string", "x-mcp-header": 5})),
            prop(json!({"type": "number", "x-mcp-header": "N"})),
            prop(json!({"type": "object", "x-mcp-header": "O"})),
            prop(json!({"type": "array", "x-mcp-header": "A"})),
            prop(json!({"type": "null", "x-mcp-header": "Z"})),
            prop(json!({"x-mcp-header": "Untyped"})),
            prop(json!({"type": "array", "items": {"type": "string", "x-mcp-header": "I"}})),
            prop(json!({"anyOf": [{"type": "string", "x-mcp-header": "C"}]})),
            object(json!({"type": "object", "x-mcp-header": "Root"})),
            object(
                json!({"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}),
            ),
            object(
                json!({"type": "object", "if": {"properties": {"a": {"type": "string", "x-mcp-header": "If"}}}}),
            ),
            object(json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "region"}
            }})),
        ];
        for schema in cases {
            assert!(header_params(&schema).is_err(), "{}", Value::Object(schema));
        }
    }

    #[test]
    fn matches_values_by_kind() {
        let p = |kind| HeaderParam {
            name: "X".into(),
            path: vec!["x".into()],
            kind,
        };
        let cases = [
            (ParamKind::String, "us-west1", json!("us-west1"), true),
            (ParamKind::String, "us-west1", json!("us-west2"), false),
            (ParamKind::Integer, "42", json!(42), true),
            (ParamKind::Integer, "042", json!(42), true),
            (ParamKind::Integer, "42", json!(43), false),
            (ParamKind::Integer, "x", json!(42), false),
            (
                ParamKind::Integer,
                "-9007199254740991",
                json!(-9007199254740991i64),
                true,
            ),
            // Both directions compare numerically (H-15): `42.0` and `42` are the same integer.
            (ParamKind::Integer, "42.0", json!(42), true),
            (ParamKind::Integer, "42.000", json!(42), true),
            (ParamKind::Integer, "4.2e1", json!(42), true),
            (ParamKind::Integer, "+42", json!(42), true),
            (ParamKind::Integer, "42", json!(42.0), true),
            (ParamKind::Integer, "42.0", json!(42.0), true),
            (ParamKind::Integer, "42.5", json!(42), false),
            (ParamKind::Integer, "42.", json!(42), false),
            (ParamKind::Integer, "1e400", json!(42), false),
            // Integral floats beyond i128 compare by their exact digits (found by fuzzing).
            (
                ParamKind::Integer,
                &format!("4{}", "0".repeat(302)),
                json!(4e302),
                true,
            ),
            (ParamKind::Integer, "4e302", json!(4e302), true),
            (
                ParamKind::Integer,
                "170141183460469231731687303715884105727",
                json!(1.7e38),
                false,
            ),
            (ParamKind::Integer, "-0", json!(0), true),
            (ParamKind::Integer, "NaN", json!(42), false),
            (ParamKind::Integer, "inf", json!(42), false),
            (
                ParamKind::Integer,
                "9007199254740993.0",
                json!(9007199254740993u64),
                true,
            ),
            (
                ParamKind::Integer,
                "9007199254740992",
                json!(9007199254740993u64),
                false,
            ),
            (
                ParamKind::Integer,
                "18446744073709551615",
                json!(u64::MAX),
                true,
            ),
            (ParamKind::Boolean, "true", json!(true), true),
            (ParamKind::Boolean, "false", json!(true), false),
            (ParamKind::Boolean, "TRUE", json!(true), false),
            (ParamKind::String, "42", json!(42), false),
        ];
        for (kind, header, value, want) in cases {
            assert_eq!(
                p(kind).matches(header, &value),
                want,
                "{kind:?} {header} {value}"
            );
        }
        assert_eq!(
            p(ParamKind::Integer).render(&json!(42)).as_deref(),
            Some("42")
        );
        assert_eq!(
            p(ParamKind::Boolean).render(&json!(false)).as_deref(),
            Some("false")
        );
        let param = HeaderParam {
            name: "P".into(),
            path: vec!["o".into(), "p".into()],
            kind: ParamKind::Integer,
        };
        assert_eq!(param.value_in(&json!({"o": {"p": 3}})), Some(&json!(3)));
        assert_eq!(param.value_in(&json!({"o": {"p": null}})), None);
        assert_eq!(param.value_in(&json!({"o": {}})), None);
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::exact_integer;

    proptest! {
        /// Every way of writing an integer reads back as that integer (H-15).
        #[test]
        fn integers_read_back_in_every_notation(n in any::<i64>(), zeros in 0usize..4, shift in 0u32..4) {
            let n = i128::from(n);
            let canonical = |v: i128| Some(v.to_string());
            prop_assert_eq!(exact_integer(&n.to_string()), canonical(n));
            prop_assert_eq!(exact_integer(&format!("{n}.{}", "0".repeat(zeros + 1))), canonical(n));
            let scaled = n * 10i128.pow(shift);
            prop_assert_eq!(exact_integer(&format!("{scaled}e-{shift}")), canonical(n));
            prop_assert_eq!(exact_integer(&format!("{n}e{shift}")), canonical(scaled));
        }

        /// Arbitrary text never panics.
        #[test]
        fn any_text_is_safe(text in ".{0,24}") {
            let _ = exact_integer(&text);
        }

        /// Any value survives a header: encoded, it is visible ASCII a header can carry, and it
        /// decodes to itself, padded with spaces and tabs or not (H-14, H-23): header values are
        /// untrusted bytes.
        #[test]
        fn header_values_round_trip(value in any::<String>(), pad in "[ \t]{0,3}") {
            let encoded = super::encode_value(&value);
            prop_assert!(encoded.bytes().all(|b| (0x20..0x7f).contains(&b)), "{:?}", encoded);
            prop_assert!(http_header_safe(&encoded));
            let padded = format!("{pad}{encoded}{pad}");
            let decoded = super::decode_value(&padded);
            prop_assert_eq!(decoded.as_deref().ok(), Some(value.as_str()));
        }
    }

    /// A value `http::HeaderValue` accepts as is.
    fn http_header_safe(value: &str) -> bool {
        !value.starts_with(' ') && !value.ends_with(' ') && !value.contains(['\r', '\n', '\0'])
    }
}
