//! What a server tells its operator about the requests it serves: traces ([`trace`]).

pub(crate) mod trace;
