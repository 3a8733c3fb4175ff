//! The layers every tool call passes through, whatever the tool: rate [`limits`], a
//! [`deadline`] with panics contained, the [`output`] guard on every result, and an [`audit`]
//! record of what became of the call (and of each [`reload`] of the configuration).

pub(crate) mod audit;
pub(crate) mod deadline;
pub(crate) mod limits;
pub(crate) mod output;
pub(crate) mod reload;
