//! Every scenario in e2e-tests/scenarios, run through `policy-host run` (the host
//! crate's binary) with the annotated policy module — or through kwctl, unchanged, when KWCTL is set.
//!
//! ANNOTATED_POLICY: the module (default: <workspace>/annotated-policy.wasm, `make
//! annotated-policy.wasm`). KWCTL: path to a kwctl binary to run the scenarios with instead.

use std::path::Path;

use e2e_tests::annotated_policy;
use scenario_model::runner::{render_table, run_all, Evaluator};

#[test]
fn every_scenario_meets_its_expectations() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    let module = annotated_policy();
    // `make e2e KWCTL=` exports KWCTL empty: that is no kwctl.
    let evaluator = match std::env::var_os("KWCTL").filter(|k| !k.is_empty()) {
        Some(kwctl) => Evaluator::kwctl(kwctl),
        None => Evaluator::policy_host(e2e_tests::policy_host()),
    };
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = run_all(&evaluator, &package.join("scenarios"), &module, jobs)
        .unwrap_or_else(|e| panic!("cannot run the scenarios: {e:#}"));
    assert!(
        !results.is_empty(),
        "no scenario found in e2e-tests/scenarios"
    );
    let table = render_table(&results, 120);
    let failing: Vec<&str> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.name.as_str())
        .collect();
    assert!(
        failing.is_empty(),
        "{} of {} scenarios fail with {}: {}\n\n{table}",
        failing.len(),
        results.len(),
        evaluator.name(),
        failing.join(", ")
    );
    println!("{table}");
}
