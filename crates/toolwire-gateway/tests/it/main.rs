//! The gateway's tests, one binary: real servers on 127.0.0.1 behind a gateway served over
//! HTTP, called by Toolwire's client.

mod console;
mod credentials;
mod discovery;
mod gateway;
mod hold;
mod observe;
mod offers;
mod relay;
mod reload;
mod rules;
mod semantic;
mod shared_pins;
mod subscriptions;
mod support;
mod tasks;
