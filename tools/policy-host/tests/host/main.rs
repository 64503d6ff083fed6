//! Tests of the host itself, with tiny waPC guests written in WAT: the output line format,
//! failure handling (trap, timeout, garbage, guest error), settings, inputs, annotate/inspect,
//! host capabilities and the scenario runner.

mod annotate;
mod capabilities;
mod common;
mod failures;
mod requests;
mod runner;
mod settings;
