//! What the module-graph tests of both crates share (`tests/module_graph.rs` for the policy,
//! `capi-rollout-check/tests/modules.rs` for the CLI): the Rust files of a folder, a file's
//! code lines, and a cycle in a graph of modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().and_then(|e| e.to_str()) == Some("rs") {
            out.push(path);
        }
    }
}

/// The code of a file: its lines outside comments, up to its test module (a `#[cfg(test)]`
/// line followed by a `mod` line).
pub fn code_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut code = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).map(|l| l.trim_start()).unwrap_or("");
        if line.trim() == "#[cfg(test)]"
            && (next.starts_with("mod ") || next.starts_with("pub(crate) mod "))
        {
            break;
        }
        code.push(line.split("//").next().unwrap_or(""));
    }
    code
}

/// A cycle through `node`, if the walk from it finds one (as the list of modules on it).
pub fn cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    stack: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = stack.iter().position(|n| n == node) {
        let mut found = stack[at..].to_vec();
        found.push(node.to_string());
        return Some(found);
    }
    if done.contains(node) {
        return None;
    }
    stack.push(node.to_string());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(found) = cycle(graph, next, stack, done) {
            return Some(found);
        }
    }
    stack.pop();
    done.insert(node.to_string());
    None
}
