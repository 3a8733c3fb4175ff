//! Single-pass deserialization for objects that keep unknown keys in an `extra` map.
//!
//! `#[serde(flatten)]` buffers the whole object before reading it, which costs several times a
//! plain struct; the objects read on every request (`_meta`, capabilities, client info) use
//! [`deserialize_with_extra!`] instead: known keys are read in place, the others go to `extra`.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A map key, borrowed from the input when it has no escapes.
pub(crate) struct Key<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string key")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// What a JSON value is, for an "invalid type" error.
pub(crate) fn unexpected(value: &serde_json::Value) -> de::Unexpected<'_> {
    use serde_json::Value;
    match value {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => match n.as_f64() {
            Some(f) => de::Unexpected::Float(f),
            None => de::Unexpected::Other("a number"),
        },
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

/// Implements `Deserialize` for a struct with required fields, optional (`Option`) fields and
/// an `extra: JsonObject` that collects every other key; and, in its longer form, fields read
/// as themselves with their default when absent (`defaulted`) and `Option<Value>` fields that
/// are `Some` whenever the key is there, `null` included (`present`).
macro_rules! deserialize_with_extra {
    ($ty:ident { required: [$($req:ident = $req_key:literal),* $(,)?], optional: [$($opt:ident = $opt_key:literal),* $(,)?] $(,)? }) => {
        $crate::extra::deserialize_with_extra!($ty {
            required: [$($req = $req_key),*],
            optional: [$($opt = $opt_key),*],
            defaulted: [],
            present: [],
        });
    };
    ($ty:ident {
        required: [$($req:ident = $req_key:literal),* $(,)?],
        optional: [$($opt:ident = $opt_key:literal),* $(,)?],
        defaulted: [$($def:ident = $def_key:literal),* $(,)?],
        present: [$($pre:ident = $pre_key:literal),* $(,)?] $(,)?
    }) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct ExtraVisitor;
                impl<'de> serde::de::Visitor<'de> for ExtraVisitor {
                    type Value = $ty;

                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("an object (", stringify!($ty), ")"))
                    }

                    #[allow(unused_mut)]
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$ty, A::Error> {
                        $(let mut $req = None;)*
                        $(let mut $opt = None;)*
                        $(let mut $def = None;)*
                        $(let mut $pre = None;)*
                        let mut extra = $crate::JsonObject::new();
                        while let Some(key) = map.next_key::<$crate::extra::Key<'de>>()? {
                            match &*key.0 {
                                $($req_key => $req = Some(map.next_value()?),)*
                                $($opt_key => $opt = Some(map.next_value()?),)*
                                $($def_key => $def = Some(map.next_value()?),)*
                                $($pre_key => $pre = Some(map.next_value::<serde_json::Value>()?),)*
                                _ => {
                                    extra.insert(key.0.into_owned(), map.next_value()?);
                                }
                            }
                        }
                        Ok($ty {
                            $($req: $req.ok_or_else(|| serde::de::Error::missing_field($req_key))?,)*
                            $($opt: $opt.flatten(),)*
                            $($def: $def.unwrap_or_default(),)*
                            $($pre,)*
                            extra,
                        })
                    }
                }
                d.deserialize_map(ExtraVisitor)
            }
        }
    };
}

pub(crate) use deserialize_with_extra;
