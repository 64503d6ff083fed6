//! The library part of capi-rollout-check: what tools (the benchmarks) call directly.

pub mod drift;
pub mod kubectl_words;
