//! The rule library reads top-down, and its folders say so: the waPC glue (`lib.rs`), then the
//! engine, which routes; then one file per kind judged (`webhooks/`); then the rule families
//! (`rules/`); then the pieces they share: the request reader (`reader/`), Go's semantics
//! (`go_compat/`), the CAPI facts (`capi/`), `diff`, `canonical_form`, `fingerprint`,
//! `settings/`, `verdict`, `lookups`; the reader names nothing above it, the CAPI facts nothing
//! but the reader and Go's semantics. A module that names `crate::x` (or `crate::folder::x`) in
//! its code depends on it; this test fails on any cycle among the modules of `src/` and on any
//! module that names one of a layer above its own, naming them, so shared pieces keep moving
//! down instead of being borrowed back from above. Test modules are not scanned: a test may
//! judge through the engine.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "common/source_graph.rs"]
mod source_graph;
use source_graph::{code_lines, cycle, rust_files};

/// `src/a/b.rs` -> `a::b`, `src/a/mod.rs` -> `a`, `src/x.rs` -> `x`.
fn module_name(src: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    parts.join("::")
}

/// module -> the modules it names as `crate::<module>` in its code.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<String, String> = files
        .iter()
        .map(|path| {
            (
                module_name(&src, path),
                std::fs::read_to_string(path).unwrap(),
            )
        })
        .collect();
    let mut graph = BTreeMap::new();
    for (module, text) in &modules {
        if module == "lib" {
            continue;
        }
        let mut uses = BTreeSet::new();
        for code in code_lines(text) {
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                // The longest prefix of the path that is a module: `crate::rules::rotation::check`
                // names `rules::rotation`, `crate::diff::FieldRules` names `diff`.
                let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
                let named = (1..=segments.len())
                    .rev()
                    .map(|n| segments[..n].join("::"))
                    .find(|candidate| modules.contains_key(candidate));
                if let Some(named) = named {
                    if &named != module {
                        uses.insert(named);
                    }
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

#[test]
fn src_modules_form_no_cycle() {
    let graph = graph();
    assert!(graph.contains_key("engine") && graph.contains_key("rules::rotation"));
    assert!(
        graph["webhooks::config_ref_holder"].contains("rules::rotation"),
        "the scan sees use lines"
    );
    assert!(
        graph["webhooks::bootstrap_config"].contains("rules::in_place_edit"),
        "the scan sees paths inside folders"
    );
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(found) = cycle(&graph, module, &mut Vec::new(), &mut done) {
            panic!("module cycle in src/: {}", found.join(" -> "));
        }
    }
}

/// 3: the engine; 2: the judged kinds; 1: the rule families; 0: the shared pieces.
fn layer(module: &str) -> u8 {
    match module.split("::").next().unwrap() {
        "engine" => 3,
        "webhooks" => 2,
        "rules" => 1,
        _ => 0,
    }
}

#[test]
fn no_module_names_a_layer_above_its_own() {
    let graph = graph();
    for (module, uses) in &graph {
        for used in uses {
            assert!(
                layer(used) <= layer(module),
                "{module} names {used}: the engine routes to the judged kinds, which ask the \
                 rules, which use the shared pieces; never the other way"
            );
        }
    }
}

#[test]
fn each_judged_kind_stands_alone() {
    let graph = graph();
    let kinds: Vec<&String> = graph
        .keys()
        .filter(|m| m.starts_with("webhooks::"))
        .collect();
    assert_eq!(
        kinds,
        [
            "webhooks::bootstrap_config",
            "webhooks::bootstrap_template",
            "webhooks::config_ref_holder"
        ]
    );
    for kind in &kinds {
        for other in &kinds {
            assert!(
                kind == other || !graph[*kind].contains(*other),
                "{kind} names {other}: one file per kind judged"
            );
        }
    }
}

#[test]
fn the_reader_and_the_capi_facts_sit_at_the_bottom() {
    let graph = graph();
    for (module, uses) in &graph {
        let allowed: &[&str] = if module.starts_with("reader::") {
            // The request reader reads JSON into views (and a GroupKind): it names nothing else.
            &["reader::"]
        } else if module.starts_with("go_compat") {
            // Go's semantics read texts into the reader's nodes, nothing else.
            &["go_compat", "reader::"]
        } else if module.starts_with("capi::") {
            // The CAPI facts are facts: no settings, no verdicts, not even the comparison
            // (`diff` applies their FieldRules; they do not name it).
            &["capi::", "reader::", "go_compat"]
        } else {
            continue;
        };
        for used in uses {
            assert!(
                allowed.iter().any(|a| used.starts_with(a)),
                "{module} names {used}: only {allowed:?} sit beside or below it"
            );
        }
    }
}

#[test]
fn the_reader_reads_bytes_into_values() {
    let graph = graph();
    // The byte scans name nothing; the values name the scans; the parser both.
    let allowed: [(&str, &[&str]); 3] = [
        ("reader::bytes", &[]),
        ("reader::node", &["reader::bytes"]),
        ("reader::json", &["reader::bytes", "reader::node"]),
    ];
    for (module, names) in allowed {
        let uses = &graph[module];
        assert!(
            uses.iter().all(|used| names.contains(&used.as_str())),
            "{module} names {uses:?}: only {names:?} sit below it"
        );
    }
}
