//! The shipped module annotated again with metadata.yml and the README, as the Makefile and
//! Kubewarden's build workflow annotate it: by kwctl when KWCTL is set (CI sets kwctl 1.35),
//! by this package's policy-host otherwise. The host capabilities the module calls are the ones
//! metadata.yml declares, so neither prints kwctl's host-capability warnings, and policy-host
//! stores the metadata the module under test carries (its `io.kubewarden.kwctl` aside).

use std::path::{Path, PathBuf};
use std::process::Command;

use e2e_tests::annotated_policy;
use policy_host::metadata::{
    read_custom_section, ANNOTATED_BY, KWCTL_ANNOTATION, METADATA_SECTION,
};
use serde_json::Value;

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e-tests lives in the workspace")
}

fn stored_metadata(module: &Path) -> Value {
    let bytes = std::fs::read(module).unwrap();
    let section = read_custom_section(&bytes, METADATA_SECTION)
        .unwrap()
        .unwrap_or_else(|| panic!("{} is not annotated", module.display()));
    serde_json::from_slice(&section).unwrap()
}

#[test]
fn annotating_the_shipped_module_warns_about_no_host_capability() {
    let shipped = annotated_policy();
    let output: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reannotated-policy.wasm");
    let _ = std::fs::remove_file(&output);
    // `make e2e KWCTL=` exports KWCTL empty: that is no kwctl.
    let kwctl = std::env::var_os("KWCTL").filter(|k| !k.is_empty());
    let program = kwctl
        .clone()
        .unwrap_or_else(|| e2e_tests::policy_host().into());
    let run = Command::new(&program)
        .current_dir(workspace())
        .args(["annotate", "-m", "metadata.yml", "-u", "README.md", "-o"])
        .arg(&output)
        .arg(&shipped)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "{program:?} annotate failed: {stderr}"
    );
    assert!(
        !stderr.contains("host capabilities"),
        "metadata.yml's hostCapabilities are not what the module calls:\n{stderr}"
    );
    if kwctl.is_some() {
        // kwctl keeps the module's own metadata section next to the new one; its words on
        // capabilities were the point.
        return;
    }
    assert_eq!(stderr, "", "policy-host annotate printed more than nothing");

    let mut expected = stored_metadata(&shipped);
    let mut actual = stored_metadata(&output);
    assert_eq!(actual["annotations"][KWCTL_ANNOTATION], ANNOTATED_BY);
    assert_eq!(
        actual["hostCapabilities"],
        serde_json::json!(["kubernetes/list_resources_by_namespace"])
    );
    for metadata in [&mut expected, &mut actual] {
        metadata["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(KWCTL_ANNOTATION);
    }
    assert_eq!(
        actual, expected,
        "the module under test was annotated from another metadata.yml or README.md"
    );
}
