//! What outlives a single request, each behind a trait that a shared backend can implement:
//! sealed [`request_state`] and its replay guard, task records ([`task_store`]), [`handles`] a
//! tool keeps between calls, and the [`sessions`] of legacy HTTP clients. The in-memory
//! backends forget what has expired through an [`expiry`] map.

pub(crate) mod expiry;
pub mod handles;
pub(crate) mod request_state;
pub(crate) mod sessions;
pub(crate) mod task_store;
