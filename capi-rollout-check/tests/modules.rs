//! How the CLI's modules use each other: `rotate` runs `roll` (`--replace-instances`) and
//! reports through it, so `roll` never uses `rotate`; what they need lives in modules of their
//! own (`cluster.rs`, the kubectl client `rotate`, `roll` and `drift` share; `manifests.rs`, an
//! object's key and configRef); and no two modules import each other, directly or around a
//! circle.

use std::fs;
use std::path::{Path, PathBuf};

#[path = "../../tests/common/source_graph.rs"]
mod source_graph;
use source_graph::{code_lines, cycle, rust_files};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files
}

#[test]
fn roll_never_uses_rotate() {
    let roll = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/roll");
    let mut uses = Vec::new();
    for file in sources(&roll) {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("crate::rotate") || line.contains("super::rotate") {
                uses.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(uses.is_empty(), "roll uses rotate:\n{}", uses.join("\n"));
}

/// The top-level module a file of `src/` belongs to (`roll/pool.rs` -> `roll`); None for the
/// crate roots and for test files.
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.iter().any(|p| p == "tests" || p == "tests.rs") {
        return None;
    }
    let first = parts[0].trim_end_matches(".rs").to_string();
    (first != "main" && first != "lib").then_some(first)
}

/// The CLI's modules use each other without a circle: each names a module as `crate::x`,
/// `capi_rollout_check::x` or, from a file below it, `super::x`; a circle among them fails the
/// test, naming it, so that what two modules share moves into a module both use.
#[test]
fn no_import_circles() {
    use std::collections::{BTreeMap, BTreeSet};
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = sources(&src);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(&src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(from) = top_module(&src, file) else {
            continue;
        };
        let text = fs::read_to_string(file).unwrap();
        for line in code_lines(&text) {
            for prefix in ["crate::", "capi_rollout_check::", "super::"] {
                for (at, _) in line.match_indices(prefix) {
                    let rest = &line[at + prefix.len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if name != from && modules.contains(&name) {
                        graph.entry(from.clone()).or_default().insert(name);
                    }
                }
            }
        }
    }
    let mut done = BTreeSet::new();
    for module in &modules {
        if let Some(circle) = cycle(&graph, module, &mut Vec::new(), &mut done) {
            panic!(
                "an import circle among capi-rollout-check's modules: {}\n(the graph: {graph:?})",
                circle.join(" -> ")
            );
        }
    }
    // The shape it holds: rotate runs roll, and every command talks through cluster.
    assert!(graph["rotate"].contains("roll"), "{graph:?}");
    for command in ["rotate", "roll", "drift"] {
        assert!(graph[command].contains("cluster"), "{command}: {graph:?}");
    }
}
