//! Sealed request state (M-06…M-08): the `requestState` a server hands out in an
//! `input_required` result is encrypted and authenticated (AES-256-GCM), and bound to the method,
//! the tool/prompt/resource name, a digest of the arguments, the principal and an expiry. A
//! client can neither read nor forge it, nor replay it on another request, for another
//! principal, or after it expires; in single-use mode a second redemption is refused too.
//!
//! Token: `base64url(version ‖ key id ‖ nonce(12) ‖ ciphertext+tag)`, version and key id as
//! associated data. Keys live in a ring: the newest seals, all open, so rotation never breaks a
//! round in flight.

use std::sync::Mutex;

use crate::state::StoreError;
use crate::state::expiry::ExpiringMap;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;
/// How many retired keys still open tokens.
pub(crate) const RETIRED_KEYS: usize = 4;

/// The keys that seal request state: the newest seals, every one opens.
#[derive(Clone)]
pub struct RequestStateKeys {
    /// Newest first.
    keys: Vec<(u8, Aes256Gcm)>,
}

impl std::fmt::Debug for RequestStateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u8> = self.keys.iter().map(|(id, _)| *id).collect();
        f.debug_struct("RequestStateKeys")
            .field("key_ids", &ids)
            .finish()
    }
}

impl RequestStateKeys {
    /// A ring with one 256-bit key. Replicas behind one endpoint must share their keys.
    pub fn new(key: [u8; 32]) -> Self {
        RequestStateKeys {
            keys: vec![(0, cipher(&key))],
        }
    }

    /// A ring with a random key (state cannot outlive the process).
    pub fn random() -> Self {
        Self::new(rand::random())
    }

    /// A ring of `keys` (id, key), newest first; `None` if there is none.
    #[cfg(feature = "redis")]
    pub(crate) fn from_ring(keys: &[(u8, [u8; 32])]) -> Option<Self> {
        let keys: Vec<(u8, Aes256Gcm)> = keys
            .iter()
            .take(RETIRED_KEYS + 1)
            .map(|(id, key)| (*id, cipher(key)))
            .collect();
        (!keys.is_empty()).then_some(RequestStateKeys { keys })
    }

    /// Whether the ring holds the key a token names (so that a token it cannot open was
    /// sealed with a key it does not know yet, or is not one of ours).
    #[cfg(feature = "redis")]
    pub(crate) fn knows_key_of(&self, token: &str) -> bool {
        let mut head = [0u8; 3];
        let Ok(n) = URL_SAFE_NO_PAD.decode_slice(token.get(..4).unwrap_or(token), &mut head) else {
            return true;
        };
        n < 2 || self.keys.iter().any(|(id, _)| *id == head[1])
    }

    /// Seals with `key` from now on; the previous keys (up to four) still open state sealed
    /// before the rotation.
    pub fn rotate(mut self, key: [u8; 32]) -> Self {
        let id = self.keys[0].0.wrapping_add(1);
        self.keys.insert(0, (id, cipher(&key)));
        self.keys.truncate(RETIRED_KEYS + 1);
        self
    }
}

fn cipher(key: &[u8; 32]) -> Aes256Gcm {
    Aes256Gcm::new(&Key::<Aes256Gcm>::from(*key))
}

#[cfg(test)]
thread_local! {
    /// How many argument digests this thread has computed; tests check that plain calls
    /// compute none: hashing the arguments of every call cost time for nothing.
    pub(crate) static DIGESTS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What a request state is bound to (M-07).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    pub(crate) method: String,
    pub(crate) name: String,
    pub(crate) args_digest: [u8; 32],
    pub(crate) principal: Option<String>,
}

impl Binding {
    pub(crate) fn new(
        method: &str,
        name: &str,
        arguments: &Value,
        principal: Option<&str>,
    ) -> Self {
        #[cfg(test)]
        DIGESTS.with(|d| d.set(d.get() + 1));
        let mut hasher = Sha256::new();
        write_canonical(arguments, &mut hasher);
        Binding {
            method: method.to_owned(),
            name: name.to_owned(),
            args_digest: hasher.finalize().into(),
            principal: principal.map(str::to_owned),
        }
    }
}

/// Feeds the canonical JSON text of `value` to `hasher`: object keys in byte order whatever the
/// map's own order, so that a dependent crate turning on serde_json's `preserve_order` cannot
/// change the digest of equal arguments. Streams; nothing is buffered.
fn write_canonical(value: &Value, hasher: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            write_object(entries, hasher);
        }
        Value::Array(items) => {
            hasher.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    hasher.update(b",");
                }
                write_canonical(item, hasher);
            }
            hasher.update(b"]");
        }
        scalar => write_scalar(scalar, hasher),
    }
}

/// An object from its entries, in the order given (the caller sorts them).
fn write_object(entries: Vec<(&String, &Value)>, hasher: &mut Sha256) {
    hasher.update(b"{");
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            hasher.update(b",");
        }
        write_scalar(key, hasher);
        hasher.update(b":");
        write_canonical(value, hasher);
    }
    hasher.update(b"}");
}

/// A string, number, boolean or null as serde_json writes it.
fn write_scalar(scalar: &impl Serialize, hasher: &mut Sha256) {
    struct Feed<'a>(&'a mut Sha256);
    impl std::io::Write for Feed<'_> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // Writing a scalar into a sink that cannot fail cannot fail.
    let _ = serde_json::to_writer(Feed(hasher), scalar);
}

#[derive(Serialize, Deserialize)]
struct Plain {
    m: String,
    n: String,
    #[serde(with = "digest_hex")]
    d: [u8; 32],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<String>,
    e: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    s: Option<Value>,
}

mod digest_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&toolwire_protocol::hex::encode(d))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let text = String::deserialize(d)?;
        let bad = || serde::de::Error::custom("bad digest");
        let mut out = [0u8; 32];
        if text.len() != 64 {
            return Err(bad());
        }
        // By bytes: slicing the text by byte offsets panicked on a multi-byte character
        // (found by the `request_state` fuzz target; only reachable with the sealing key).
        for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            let digit = |b: u8| (b as char).to_digit(16).ok_or_else(bad);
            *byte = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Ok(out)
    }
}

/// Why a request state was refused; every case is -32602 (M-06).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateError {
    /// Not a token this server made, or altered.
    Tampered,
    /// Past its expiry.
    Expired,
    /// Made for another method, name or arguments.
    OtherRequest,
    /// Made for another principal.
    OtherPrincipal,
    /// Already redeemed (single-use mode).
    Replayed,
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StateError::Tampered => {
                "requestState is invalid: it was not issued by this server or was altered"
            }
            StateError::Expired => "requestState has expired; start the request again without it",
            StateError::OtherRequest => {
                "requestState belongs to a different request (method, name or arguments differ)"
            }
            StateError::OtherPrincipal => "requestState belongs to a different principal",
            StateError::Replayed => "requestState was already used",
        })
    }
}

/// An opened request state.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Opened {
    /// The handler's state.
    pub(crate) state: Option<Value>,
    /// Identifies the token, for single-use checks.
    pub(crate) token_id: [u8; NONCE_LEN],
    pub(crate) expires_ms: u64,
}

impl RequestStateKeys {
    /// Seals `state` for `binding`, valid until `expires_ms`.
    pub(crate) fn seal(&self, binding: &Binding, state: Option<Value>, expires_ms: u64) -> String {
        let plain = Plain {
            m: binding.method.clone(),
            n: binding.name.clone(),
            d: binding.args_digest,
            p: binding.principal.clone(),
            e: expires_ms,
            s: state,
        };
        let plaintext = serde_json::to_vec(&plain).expect("state serializes");
        self.seal_bytes(&plaintext)
    }

    /// Seals any plaintext in the token format (the fuzz target's way past the cipher).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn seal_raw(&self, plaintext: &[u8]) -> String {
        self.seal_bytes(plaintext)
    }

    fn seal_bytes(&self, plaintext: &[u8]) -> String {
        let (id, cipher) = &self.keys[0];
        let nonce_bytes: [u8; NONCE_LEN] = rand::random();
        let header = [VERSION, *id];
        let sealed = cipher
            .encrypt(
                &Nonce::from(nonce_bytes),
                Payload {
                    msg: plaintext,
                    aad: &header,
                },
            )
            .expect("AES-GCM encryption does not fail for these sizes");
        let mut token = Vec::with_capacity(2 + NONCE_LEN + sealed.len());
        token.extend_from_slice(&header);
        token.extend_from_slice(&nonce_bytes);
        token.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(token)
    }

    /// Opens a token and checks it against the request it came with.
    pub(crate) fn open(
        &self,
        token: &str,
        binding: &Binding,
        now_ms: u64,
    ) -> Result<Opened, StateError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| StateError::Tampered)?;
        if bytes.len() < 2 + NONCE_LEN + 16 || bytes[0] != VERSION {
            return Err(StateError::Tampered);
        }
        let (header, rest) = bytes.split_at(2);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let cipher = self
            .keys
            .iter()
            .find(|(id, _)| *id == header[1])
            .map(|(_, c)| c)
            .ok_or(StateError::Tampered)?;
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| StateError::Tampered)?;
        let plaintext = cipher
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: sealed,
                    aad: header,
                },
            )
            .map_err(|_| StateError::Tampered)?;
        let plain: Plain = serde_json::from_slice(&plaintext).map_err(|_| StateError::Tampered)?;
        if plain.m != binding.method || plain.n != binding.name || plain.d != binding.args_digest {
            return Err(StateError::OtherRequest);
        }
        if plain.p != binding.principal {
            return Err(StateError::OtherPrincipal);
        }
        if now_ms >= plain.e {
            return Err(StateError::Expired);
        }
        Ok(Opened {
            state: plain.s,
            token_id: nonce,
            expires_ms: plain.e,
        })
    }
}

/// Remembers redeemed request states, for single-use mode (M-08). Implement it on a shared
/// store when several server processes serve one endpoint; `toolwire_server::contract` (feature `contract-tests`) is the test
/// suite every implementation must pass.
pub trait ReplayGuard: Send + Sync + 'static {
    /// Records the redemption of `token_id` (valid until `expires_ms`): `Ok(true)` for the first
    /// redemption, `Ok(false)` if it was redeemed before. An error when the store cannot say,
    /// on which the request is refused: a token that might have been used is never accepted.
    fn redeem(
        &self,
        token_id: [u8; 12],
        expires_ms: u64,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;
}

/// An in-memory [`ReplayGuard`] for a single process; forgets tokens once they expire, in
/// O(log n) per token forgotten (an expiry queue, not a sweep).
#[derive(Debug, Default)]
pub struct MemoryReplayGuard {
    used: Mutex<ExpiringMap<[u8; 12], ()>>,
}

impl MemoryReplayGuard {
    fn redeem_now(&self, token_id: [u8; 12], expires_ms: u64, now_ms: u64) -> bool {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.prune(now_ms);
        if used.get(&token_id, now_ms).is_some() {
            return false;
        }
        used.insert(token_id, expires_ms, ());
        true
    }
}

impl ReplayGuard for MemoryReplayGuard {
    fn redeem(
        &self,
        token_id: [u8; 12],
        expires_ms: u64,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let first = self.redeem_now(token_id, expires_ms, now_ms);
        Box::pin(std::future::ready(Ok(first)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use serde_json::json;

    fn binding() -> Binding {
        Binding::new("tools/call", "t", &json!({"a": 1, "b": [2]}), Some("alice"))
    }

    /// The digest is of the canonical text, keys sorted, whatever order a map iterates in: a
    /// `preserve_order` build elsewhere in the dependency graph cannot break binding. This
    /// build's maps are sorted already, so the writer is fed unsorted entries.
    #[test]
    fn the_argument_digest_is_canonical() {
        let digest = |value: &Value| {
            let mut hasher = Sha256::new();
            write_canonical(value, &mut hasher);
            <[u8; 32]>::from(hasher.finalize())
        };
        let value = json!({"b": [1, {"y": "é\n", "x": null}], "a": 2.5});
        let text = r#"{"a":2.5,"b":[1,{"x":null,"y":"é\n"}]}"#;
        assert_eq!(digest(&value), <[u8; 32]>::from(Sha256::digest(text)));
        let (b, a) = (json!([1]), json!(2));
        let (kb, ka) = ("b".to_owned(), "a".to_owned());
        let mut forward = Sha256::new();
        write_object(vec![(&ka, &a), (&kb, &b)], &mut forward);
        let mut sorted_by_us = Sha256::new();
        write_canonical(&json!({"b": [1], "a": 2}), &mut sorted_by_us);
        assert_eq!(forward.finalize(), sorted_by_us.finalize());
        assert_eq!(
            Binding::new("m", "n", &json!({"b": 1, "a": 2}), None),
            Binding::new("m", "n", &json!({"a": 2, "b": 1}), None)
        );
    }

    /// Found by the `request_state` fuzz target: a digest with a multi-byte
    /// character panicked the reader. Sealed with the key, such a plaintext is now refused.
    #[test]
    fn a_sealed_plaintext_with_a_bad_digest_is_refused_not_a_panic() {
        let keys = RequestStateKeys::new([1; 32]);
        let digest = format!("{}ΰ{}", "0".repeat(47), "0".repeat(15));
        assert_eq!(digest.len(), 64);
        let plain = json!({"m": "tools/call", "n": "t", "d": digest, "e": 5}).to_string();
        let token = keys.seal_bytes(plain.as_bytes());
        assert_eq!(keys.open(&token, &binding(), 0), Err(StateError::Tampered));
    }

    #[test]
    fn round_trips_and_binds() {
        let keys = RequestStateKeys::new([1; 32]);
        let token = keys.seal(&binding(), Some(json!({"step": 2})), 1_000);
        let opened = keys.open(&token, &binding(), 999).unwrap();
        assert_eq!(opened.state, Some(json!({"step": 2})));
        assert_eq!(opened.expires_ms, 1_000);
        let same_args_other_order =
            Binding::new("tools/call", "t", &json!({"b": [2], "a": 1}), Some("alice"));
        assert!(keys.open(&token, &same_args_other_order, 0).is_ok());
    }

    #[test]
    fn refuses_every_attack() {
        let keys = RequestStateKeys::new([1; 32]);
        let token = keys.seal(&binding(), Some(json!("s")), 1_000);
        let mut raw = URL_SAFE_NO_PAD.decode(&token).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        let flipped = URL_SAFE_NO_PAD.encode(&raw);
        let cases = [
            (
                format!("{token}-TAMPERED"),
                binding(),
                0,
                StateError::Tampered,
            ),
            (flipped, binding(), 0, StateError::Tampered),
            ("".to_owned(), binding(), 0, StateError::Tampered),
            (
                RequestStateKeys::new([2; 32]).seal(&binding(), None, 1_000),
                binding(),
                0,
                StateError::Tampered,
            ),
            (token.clone(), binding(), 1_000, StateError::Expired),
            (
                token.clone(),
                Binding::new(
                    "prompts/get",
                    "t",
                    &json!({"a": 1, "b": [2]}),
                    Some("alice"),
                ),
                0,
                StateError::OtherRequest,
            ),
            (
                token.clone(),
                Binding::new("tools/call", "u", &json!({"a": 1, "b": [2]}), Some("alice")),
                0,
                StateError::OtherRequest,
            ),
            (
                token.clone(),
                Binding::new("tools/call", "t", &json!({"a": 2, "b": [2]}), Some("alice")),
                0,
                StateError::OtherRequest,
            ),
            (
                token.clone(),
                Binding::new(
                    "tools/call",
                    "t",
                    &json!({"a": 1, "b": [2]}),
                    Some("mallory"),
                ),
                0,
                StateError::OtherPrincipal,
            ),
            (
                token.clone(),
                Binding::new("tools/call", "t", &json!({"a": 1, "b": [2]}), None),
                0,
                StateError::OtherPrincipal,
            ),
        ];
        for (token, binding, now, want) in cases {
            assert_eq!(keys.open(&token, &binding, now), Err(want), "{token:.20}");
        }
    }

    #[test]
    fn rotation_keeps_rounds_in_flight() {
        let old = RequestStateKeys::new([1; 32]);
        let token = old.seal(&binding(), None, 1_000);
        let rotated = old.rotate([9; 32]);
        assert!(
            rotated.open(&token, &binding(), 0).is_ok(),
            "sealed before the rotation"
        );
        let fresh = rotated.seal(&binding(), None, 1_000);
        assert!(rotated.open(&fresh, &binding(), 0).is_ok());
        assert_eq!(
            RequestStateKeys::new([1; 32]).open(&fresh, &binding(), 0),
            Err(StateError::Tampered)
        );
        let mut ring = RequestStateKeys::new([0; 32]);
        for k in 1..=6u8 {
            ring = ring.rotate([k; 32]);
        }
        assert_eq!(
            ring.open(&token, &binding(), 0),
            Err(StateError::Tampered),
            "old keys retire"
        );
    }

    #[test]
    fn replay_guard_redeems_once_until_expiry() {
        let guard = MemoryReplayGuard::default();
        assert!(guard.redeem_now([1; 12], 100, 0));
        assert!(!guard.redeem_now([1; 12], 100, 50));
        assert!(guard.redeem_now([2; 12], 100, 50));
        assert!(
            guard.redeem_now([1; 12], 300, 150),
            "forgotten after expiry"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_memory_replay_guard_keeps_the_contract() {
        crate::state::contract::replay_guard(|| Arc::new(MemoryReplayGuard::default())).await;
    }

    #[test]
    fn the_replay_guard_forgets_expired_tokens_as_time_moves() {
        let guard = MemoryReplayGuard::default();
        for i in 0..10_000u64 {
            let mut id = [0u8; 12];
            id[..8].copy_from_slice(&i.to_be_bytes());
            // Each token lives 100 ms; one arrives per millisecond.
            assert!(guard.redeem_now(id, i + 100, i));
        }
        let held = guard.used.lock().unwrap().len();
        assert!(held <= 101, "only unexpired tokens are held: {held}");
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn arguments() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!({})),
            any::<i64>().prop_map(|n| json!({"n": n})),
            ".{0,8}".prop_map(|s| json!({"s": s, "list": [1, 2]})),
        ]
    }

    proptest! {
        /// A state opens for exactly the request it was sealed for: the same method, name,
        /// arguments (in any key order) and principal, before it expires; anything else is
        /// refused with the reason, and any flipped bit is tampering (M-07).
        #[test]
        fn request_state_is_bound_to_its_request(
            name in "[a-z]{1,6}",
            other_name in "[a-z]{1,6}",
            args in arguments(),
            other_args in arguments(),
            principal in proptest::option::of("[a-z]{1,4}"),
            other_principal in proptest::option::of("[a-z]{1,4}"),
            expires in 1u64..u64::MAX / 2,
            flip in any::<prop::sample::Index>(),
        ) {
            let keys = RequestStateKeys::new([5; 32]);
            let bound = Binding::new("tools/call", &name, &args, principal.as_deref());
            let token = keys.seal(&bound, Some(json!({"k": 1})), expires);
            prop_assert!(keys.open(&token, &bound, expires - 1).is_ok());
            prop_assert_eq!(keys.open(&token, &bound, expires).unwrap_err(), StateError::Expired);
            let other = Binding::new("tools/call", &other_name, &other_args, principal.as_deref());
            if other != bound {
                prop_assert_eq!(keys.open(&token, &other, 0).unwrap_err(), StateError::OtherRequest);
            }
            let someone_else = Binding::new("tools/call", &name, &args, other_principal.as_deref());
            if other_principal != principal {
                prop_assert_eq!(keys.open(&token, &someone_else, 0).unwrap_err(), StateError::OtherPrincipal);
            }
            let mut raw = URL_SAFE_NO_PAD.decode(&token).unwrap();
            let at = flip.index(raw.len());
            raw[at] ^= 0x80;
            prop_assert_eq!(
                keys.open(&URL_SAFE_NO_PAD.encode(&raw), &bound, 0).unwrap_err(),
                StateError::Tampered
            );
        }
    }
}
