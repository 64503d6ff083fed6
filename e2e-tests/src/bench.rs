//! Benchmarks: `policy-host bench` (kwctl's `bench`, [`command`]).
//! Nothing here asserts a timing: the numbers are reported, not tested.

pub mod command;
