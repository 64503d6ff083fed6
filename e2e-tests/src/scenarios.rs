//! The e2e scenarios (`e2e-tests/scenarios/`) are read and run by the scenario-model crate;
//! this is what policy-host's own tests add: where the module under test is.

use std::path::{Path, PathBuf};

/// The annotated module the end-to-end tests evaluate: env ANNOTATED_POLICY, else
/// `<workspace>/annotated-policy.wasm`. Panics, naming the make target, when it is missing.
pub fn annotated_policy() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e-tests lives in the workspace");
    let module = std::env::var_os("ANNOTATED_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("annotated-policy.wasm"));
    assert!(
        module.is_file(),
        "{} not found: build it with `make annotated-policy.wasm` or point ANNOTATED_POLICY at an annotated module",
        module.display()
    );
    module
}
