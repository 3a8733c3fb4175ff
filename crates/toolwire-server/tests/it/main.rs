//! End-to-end tests of toolwire-server: real HTTP servers on 127.0.0.1 port 0 and stdio over
//! in-memory pipes, checked message by message against the official JSON Schema.

#![allow(unreachable_pub)]

#[cfg(all(feature = "redis", feature = "contract-tests"))]
mod redis_latency;
#[cfg(all(feature = "redis", feature = "contract-tests"))]
mod redis_relay;
mod support;

mod audit;
mod auth;
mod auth_oidc;
mod deadlines;
mod handles;
mod hostile;
mod http_errors;
mod http_faults;
mod http_listen;
mod http_tools;
mod legacy;
mod limits;
mod listed;
mod mrtr;
mod observe;
mod offers;
mod output_guard;
mod props;
mod reconfigure;
#[cfg(all(feature = "redis", feature = "contract-tests"))]
mod redis_shared;
#[cfg(all(feature = "redis", feature = "contract-tests"))]
mod redis_store;
#[cfg(all(feature = "redis", feature = "contract-tests"))]
mod redis_tasks;
mod state_store;
mod stdio;
mod tasks;
