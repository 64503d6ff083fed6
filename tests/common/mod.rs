//! The CRD schemas in tests/crds/ (tests/crds/README.md): one JSON file per kind and served version, with
//! `group`, `kind`, `plural`, `version`, `subresources` and the version's `openAPIV3Schema`.

use std::path::PathBuf;

use serde_json::Value;

/// Every tests/crds/<folder>/<Kind>.<version>.json, parsed, in path order.
pub fn crd_schemas() -> Vec<(PathBuf, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/crds");
    let mut paths = Vec::new();
    for folder in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let folder = folder.unwrap().path();
        if folder.is_dir() {
            for file in std::fs::read_dir(&folder).unwrap() {
                let path = file.unwrap().path();
                if path.extension().is_some_and(|e| e == "json") {
                    paths.push(path);
                }
            }
        }
    }
    paths.sort();
    assert!(!paths.is_empty(), "no CRD schemas in {}", dir.display());
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let schema: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, schema)
        })
        .collect()
}
