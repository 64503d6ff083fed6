//! The end-to-end scenario format, declared once: what `scenario.yaml` says ([`spec`]), the
//! answer line an evaluator prints ([`admission`]), and the runner that puts each scenario
//! through `kwctl run` or `policy-host run` and prints the table of `make demo` ([`runner`]).
//!
//! ```text
//! scenarios/<name>/request.json   a raw AdmissionRequest (kwctl run --request-path)
//! scenarios/<name>/scenario.yaml  description, settings, contextAware, session, expect
//! scenarios/<name>/<session>.yml  optional kwctl replay session
//! ```
//!
//! Read by e2e-tests (the scenario test, through policy-host or kwctl), the playground (its
//! examples are the scenarios, checked against the same expectations) and the policy's CRD
//! tests.

pub mod admission;
pub mod runner;
pub mod spec;

pub use spec::{discover, Expect, Response, Scenario, ScenarioSpec};
