//! A small Kubewarden-compatible policy host: kwctl's `run` and `annotate` for local waPC
//! modules, built on the crates Kubewarden's policy-evaluator uses (wapc, wasmtime-provider).
//! kwctl's `bench` (feature `bench`) and policy-server's HTTP API (`serve`, feature `serve`)
//! are built only when asked for: evaluating a scenario needs neither. The scenarios
//! themselves are read and run by the scenario-model crate.

pub mod admission;
pub mod annotate;
#[cfg(feature = "bench")]
pub mod bench;
pub mod callbacks;
pub mod engine;
pub mod host_capabilities;
pub mod metadata;
pub mod run;
#[cfg(feature = "serve")]
pub mod serve;
pub mod wasm_scanner;
