//! The page's examples are the e2e scenarios, and the playground answers each as its own
//! `expect` says: the same engine as the policy module, reached through the page's inputs.

use std::path::Path;

use capi_rollout_playground::examples::collect;
use capi_rollout_playground::Answer;

/// Scenarios the page's inputs cannot express, with why.
const NOT_EXPRESSIBLE: &[&str] = &[
    // request.kind spelled differently from the object's kind: the page takes the kind from
    // the object, as the API server does for a real request.
    "bad-input-bypass-kind-spelled-differently",
];

fn scenarios() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e-tests/scenarios")
}

#[test]
fn every_scenario_without_lookups_is_offered_and_answered_as_expected() {
    let found = collect(&scenarios()).unwrap();
    let (offered, left_out) = (found.offered, found.left_out);
    let unexpected: Vec<_> = left_out
        .iter()
        .filter(|(name, why)| {
            !why.starts_with("context-aware") && !NOT_EXPRESSIBLE.contains(&name.as_str())
        })
        .collect();
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    for name in NOT_EXPRESSIBLE {
        assert!(
            left_out.iter().any(|(n, _)| n == name),
            "{name} is offered now: drop it from NOT_EXPRESSIBLE"
        );
    }
    assert!(offered.len() >= 60, "{}", offered.len());
}

/// The page's three example buttons (www/index.html) name offered scenarios with the verdicts
/// the browser test expects.
#[test]
fn the_example_buttons_exist_and_answer_as_labelled() {
    let offered = collect(&scenarios()).unwrap().offered;
    let html =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("www/index.html"))
            .unwrap();
    for (name, allowed) in [
        ("kubeadmconfig-v1beta2-token-rotation", true),
        ("kubeadmconfig-v1beta2-edit-in-use", false),
        ("machinepool-v1beta2-rotate-configref", true),
    ] {
        assert!(html.contains(&format!("data-example=\"{name}\"")), "{name}");
        let example = offered.iter().find(|e| e.name == name).expect(name);
        match example.answer() {
            Answer::Verdict(outcome) => assert_eq!(outcome.allowed, allowed, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// An example whose expectation the playground does not meet is left out, with the reason.
#[test]
fn a_wrong_expectation_is_caught() {
    let dir = scenarios().join("kubeadmconfig-v1beta2-edit-in-use");
    let mut example = capi_rollout_playground::examples::read(&dir)
        .unwrap()
        .unwrap();
    assert_eq!(example.check(), Ok(()));
    example.expect.allowed = Some(true);
    let why = example.check().unwrap_err();
    assert!(
        why.starts_with("expected allowed: true, got allowed: false (message: \"KubeadmConfig"),
        "{why}"
    );
}
