//! What a server may do: the profile, the default one, and how a profile becomes the list of
//! directories the kernel is told about.

pub(crate) mod defaults;
pub(crate) mod expand;
pub(crate) mod profile;
