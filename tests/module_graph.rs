//! The rule library reads top-down: the waPC glue, then the engine, then the rule families,
//! then the pieces they share (diff, paths, fingerprint, request, verdict, ...). A module that
//! names `crate::x` depends on `x`; this test fails on any cycle among the modules of `src/`,
//! naming it, so shared pieces keep moving down instead of being borrowed back from above.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// module -> the modules it names as `crate::<module>` outside comments.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let module = path.file_stem().unwrap().to_string_lossy().into_owned();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut uses = BTreeSet::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    uses.insert(name);
                }
            }
        }
        graph.insert(module, uses);
    }
    graph
}

/// A cycle through `node`, if the walk from it finds one (as the list of modules on it).
fn cycle(
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

#[test]
fn src_modules_form_no_cycle() {
    let graph = graph();
    assert!(graph.contains_key("engine") && graph.contains_key("rotation"));
    assert!(
        graph["engine"].contains("rotation"),
        "the scan sees use lines"
    );
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(found) = cycle(&graph, module, &mut Vec::new(), &mut done) {
            panic!("module cycle in src/: {}", found.join(" -> "));
        }
    }
}

#[test]
fn the_shared_pieces_sit_below_the_rules() {
    let graph = graph();
    for base in [
        "diff",
        "paths",
        "fingerprint",
        "verdict",
        "kinds",
        "config_ref",
    ] {
        for rule in [
            "engine",
            "rotation",
            "in_place_edit",
            "template",
            "ownership",
            "contract",
        ] {
            assert!(
                !graph[base].contains(rule),
                "{base} names {rule}: a shared piece may not depend on a rule family"
            );
        }
    }
}
