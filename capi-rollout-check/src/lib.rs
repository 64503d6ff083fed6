//! The library part of capi-rollout-check: what tools (the benchmarks) call directly, and
//! the cluster client every command shares.

pub mod cluster;
pub mod drift;
/// A cluster held in memory, for the commands' tests.
#[doc(hidden)]
pub mod fake;
pub mod kubectl_words;
