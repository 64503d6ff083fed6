//! Benchmarks: `policy-host bench` (kwctl's `bench`, [`command`]) and the suite behind
//! `make bench` ([`suite`]), which measures the rule engine natively and the annotated module
//! the way policy-server runs it, writes BENCHMARKS.md and checks the size targets.
//! Nothing here asserts a timing: the numbers are reported, not tested.

pub mod command;
pub mod inputs;
pub mod probe;
pub mod stats;
pub mod suite;
