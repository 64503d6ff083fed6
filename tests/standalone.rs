//! The repository stands alone: no tracked file names a folder outside the checkout, such as a
//! `shared` folder beside it or an absolute path of the machine it was written on. A stranger's
//! clone has neither, so tests and docs that lean on them break or mislead there. Test data
//! lives in the repository (tests/crds/, e2e-tests/scenarios/).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// CI's entry point, the one file that may name the sibling folder (for Kubewarden's tools).
const CI_RUN: &str = ".ci/run";

/// The sibling folder the project's test data once came from, and CI's Kubewarden tools are.
fn sibling() -> String {
    ["..", "shared"].join("/")
}

/// What no tracked file may contain. Each is assembled from pieces, so that this file does not
/// contain it and need not exempt itself.
fn forbidden() -> Vec<String> {
    let mut patterns = vec![
        sibling(),
        // Absolute paths of the machines the project is developed on.
        ["", "work", ""].join("/"),
        ["", "root", ""].join("/"),
        ["", "home", ""].join("/"),
    ];
    // Wherever this checkout sits: the folder holding it, unless that is `/` itself.
    if let Some(parent) = root().parent().filter(|p| p.parent().is_some()) {
        patterns.push(format!("{}/", parent.display()));
    }
    patterns.sort();
    patterns.dedup();
    patterns
}

/// Files git tracks, relative to the root; None outside a git checkout (a source archive).
fn tracked_files() -> Option<Vec<String>> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) if !root().join(".git").exists() => {
            eprintln!("no git ({e}) and no .git: not a checkout, nothing to check");
            return None;
        }
        Err(e) => panic!("git ls-files: {e} (this test needs git)"),
    };
    if !output.status.success() {
        assert!(
            !root().join(".git").exists(),
            "git ls-files failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!("not a git checkout: nothing to check");
        return None;
    }
    let files = String::from_utf8(output.stdout).expect("file names are UTF-8");
    Some(
        files
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// The file's text, or None for a binary file (a NUL byte, or not UTF-8) or one deleted from
/// the work tree but not yet from the index.
fn text(path: &Path) -> Option<String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// `file:line: pattern` for every line of `text` that names a pattern.
fn hits(file: &str, text: &str, patterns: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for pattern in patterns {
            if line.contains(pattern.as_str()) {
                out.push(format!("{file}:{}: {pattern}", n + 1));
            }
        }
    }
    out
}

#[test]
fn no_tracked_file_names_a_path_outside_the_checkout() {
    let Some(files) = tracked_files() else {
        return;
    };
    assert!(
        files.iter().any(|f| f == "Cargo.toml"),
        "git ls-files does not list Cargo.toml: wrong folder?"
    );
    let patterns = forbidden();
    let mut problems = Vec::new();
    let mut read = 0;
    for file in &files {
        // Package names such as `cranelift-codegen-shared`, and nothing a person writes.
        if file == "Cargo.lock" {
            continue;
        }
        if let Some(text) = text(&root().join(file)) {
            read += 1;
            // .ci/run alone hands the Kubewarden tools of the folder beside CI's checkout on to
            // make (they are in no registry); everything else takes them as KWCTL=, ... .
            let patterns: Vec<String> = if file == CI_RUN {
                patterns
                    .iter()
                    .filter(|p| **p != sibling())
                    .cloned()
                    .collect()
            } else {
                patterns.clone()
            };
            problems.extend(hits(file, &text, &patterns));
        }
    }
    assert!(read > 100, "only {read} tracked text files read");
    assert!(
        problems.is_empty(),
        "tracked files name paths outside the checkout; keep what they need in the repository \
         and name it relative to the root:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_patterns_catch_what_they_should() {
    let patterns = forbidden();
    let sibling = format!("read {}/crds/x.yaml", ["..", "shared"].join("/"));
    assert_eq!(hits("a", &sibling, &patterns).len(), 1);
    let absolute = format!("see {}", ["", "root", ".cargo", "registry"].join("/"));
    let root_pattern = ["", "root", ""].join("/");
    assert_eq!(
        hits("a", &absolute, &patterns),
        [format!("a:1: {root_pattern}")]
    );
    // A namespace or a package called shared is fine, and so are paths inside the checkout.
    let fine = "namespace: shared-configs\nname = \"wasm-bindgen-shared\"\ncrds/cluster-api/x.json\n/etc/sysctl.d/90-kubernetes.conf";
    assert!(hits("a", fine, &patterns).is_empty());
}
