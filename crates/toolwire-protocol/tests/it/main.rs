//! Integration tests of toolwire-protocol: the official examples round-trip through our types
//! and what we write validates against the official JSON Schema.

mod examples;
