//! `make bench`: the rule engine natively and the annotated module in policy-host, the module's
//! size and memory, written into docs/performance.md. Nothing here asserts a timing: the numbers are
//! reported, not tested. [`suite`] runs the rest in order; each module measures one thing.

pub mod drift;
pub mod inputs;
pub mod machine;
pub mod measure;
pub mod probe;
pub mod report;
pub mod scale;
pub mod size;
pub mod stats;
pub mod suite;
