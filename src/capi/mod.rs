//! What CAPI and its providers are, as the rules need to know it: facts, no verdicts.

pub mod config_ref;
pub mod kinds;
pub mod paths;
pub mod provider_writes;
