//! `make bench`: the rule engine natively and the annotated module in policy-host, the module's
//! size and memory, written into BENCHMARKS.md. Nothing here asserts a timing: the numbers are
//! reported, not tested.

pub mod inputs;
pub mod probe;
pub mod stats;
pub mod suite;
