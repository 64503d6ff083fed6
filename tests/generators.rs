//! The fixture files are what their generators write: e2e-tests/scenarios/generate.py and
//! capi-rollout-check/tests/fixtures/generate.py, both on e2e-tests/scenarios/capi_objects.py. Each runs in a copy
//! of its part of the tree (the checkout is left alone), and every file it writes must equal
//! the committed one. Needs python3 (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Runs `script` (relative to the root) in a scratch copy holding only it, the Python modules
/// beside it and the shared builders; returns the scratch root and what the script's directory
/// holds then.
fn regenerate(script: &str, label: &str) -> (PathBuf, Vec<PathBuf>) {
    let scratch = std::env::temp_dir().join(format!(
        "capi-fixture-generators-{label}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    let script_dir = Path::new(script).parent().unwrap();
    let modules = std::fs::read_dir(root().join(script_dir))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".py"))
        .map(|name| script_dir.join(name).to_string_lossy().into_owned());
    let mut copied: Vec<String> = modules.collect();
    copied.push("e2e-tests/scenarios/capi_objects.py".to_string());
    copied.sort();
    copied.dedup();
    for file in &copied {
        let target = scratch.join(file);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(root().join(file), &target).unwrap();
    }
    let output = Command::new("python3")
        .arg(scratch.join(script))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(&scratch)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 (needed for this test): {e}"));
    assert!(
        output.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = files(&scratch.join(Path::new(script).parent().unwrap()));
    (scratch, written)
}

fn assert_regenerates(script: &str, label: &str, at_least: usize) {
    let (scratch, written) = regenerate(script, label);
    let script_dir = Path::new(script).parent().unwrap();
    let dir = scratch.join(script_dir);
    let repo_dir = root().join(script_dir);
    let mut differ = Vec::new();
    for file in &written {
        let ours = std::fs::read(dir.join(file)).unwrap();
        match std::fs::read(repo_dir.join(file)) {
            Ok(committed) if committed == ours => {}
            Ok(_) => differ.push(format!("{} differs", file.display())),
            Err(_) => differ.push(format!("{} is not in the repository", file.display())),
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        differ.is_empty(),
        "{script} writes other files than the committed ones; run it and commit:\n{}",
        differ.join("\n")
    );
    assert!(
        written.len() >= at_least,
        "{script} wrote only {} files",
        written.len()
    );
}

#[test]
fn e2e_scenarios_are_what_generate_py_writes() {
    assert_regenerates("e2e-tests/scenarios/generate.py", "e2e", 150);
}

#[test]
fn capi_rollout_check_fixtures_are_what_generate_py_writes() {
    assert_regenerates(
        "capi-rollout-check/tests/fixtures/generate.py",
        "capi-rollout-check",
        20,
    );
}
