//! A small Kubewarden-compatible policy host: kwctl's `run` and `annotate` for local waPC
//! modules, built on the crates Kubewarden's policy-evaluator uses (wapc, wasmtime-provider).
//! The scenarios themselves are read and run by the scenario-model crate.

pub mod admission;
pub mod annotate;
pub mod bench;
pub mod callbacks;
pub mod engine;
pub mod metadata;
pub mod oci;
pub mod run;
pub mod scenarios;
