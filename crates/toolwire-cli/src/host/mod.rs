//! The terminal host: `servers`, `tools`, `call`, `pins`, `audit`, `watch`, `trust`, `login` and
//! `logout` over the servers of a configuration file (or one server named on the command line),
//! through `toolwire-host`. A project's configuration file is used only once the person trusts
//! it (`project`).
//! Every call is shown to the person before it is sent and needs their yes unless a rule
//! allows it; a changed tool definition is refused until approved; pins, "always" answers and
//! the hash-chained audit log live in a state directory.

mod approve;
mod arguments;
pub(crate) mod audit;
pub(crate) mod call;
mod ended;
mod form;
pub(crate) mod login;
mod open;
pub(crate) mod pins;
mod project;
mod questions;
mod render;
pub(crate) mod servers;
pub(crate) mod tools;
pub(crate) mod trust;
pub(crate) mod watch;

pub(crate) use ended::Ended;
pub(crate) use open::{ConfigArgs, ConnectArgs, HostArgs, StateArgs};
