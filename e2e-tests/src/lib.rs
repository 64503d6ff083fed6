//! A small Kubewarden-compatible policy host: kwctl's `run` and `annotate` for local waPC
//! modules, built on the crates Kubewarden's policy-evaluator uses (wapc, wasmtime-provider),
//! plus a scenario runner for this policy's end-to-end tests.

pub mod admission;
pub mod annotate;
pub mod artifacthub;
pub mod bench;
pub mod callbacks;
pub mod engine;
pub mod metadata;
pub mod oci;
pub mod run;
pub mod scenarios;
