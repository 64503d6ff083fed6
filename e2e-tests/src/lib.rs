//! The e2e scenarios (`e2e-tests/scenarios/`) are read and run by the scenario-model crate;
//! this says where the tests find what they put through them: the annotated module, the
//! scenarios and the policy-host binary.

use std::path::{Path, PathBuf};

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e-tests lives in the workspace")
}

/// The annotated module the end-to-end tests evaluate: env ANNOTATED_POLICY, else
/// `<workspace>/annotated-policy.wasm`. Panics, naming the make target, when it is missing.
pub fn annotated_policy() -> PathBuf {
    let module = std::env::var_os("ANNOTATED_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("annotated-policy.wasm"));
    assert!(
        module.is_file(),
        "{} not found: build it with `make annotated-policy.wasm` or point ANNOTATED_POLICY at an annotated module",
        module.display()
    );
    module
}

/// The scenario directories: `e2e-tests/scenarios`.
pub fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// The policy-host binary: env POLICY_HOST, else the one cargo built next to this test
/// (`cargo test -p policy-host -p e2e-tests` builds it, as `make e2e` does).
pub fn policy_host() -> PathBuf {
    let host = std::env::var_os("POLICY_HOST")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("the test's own path");
            // target/<profile>/deps/<test>: the binary is in target/<profile>.
            let profile = exe
                .parent()
                .and_then(Path::parent)
                .expect("target/<profile>");
            profile.join(format!("policy-host{}", std::env::consts::EXE_SUFFIX))
        });
    assert!(
        host.is_file(),
        "{} not found: run the tests with `make e2e` (or `cargo test -p policy-host -p e2e-tests`), or point POLICY_HOST at a policy-host binary",
        host.display()
    );
    host
}
