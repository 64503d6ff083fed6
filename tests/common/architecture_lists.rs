//! ARCHITECTURE.md's "To add ..." lists as the tests read them: a section, and the files and
//! folders it names.

use std::collections::BTreeMap;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// ARCHITECTURE.md's section `### {heading}`, up to the next heading.
pub fn architecture_section(heading: &str) -> String {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md"))
        .unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let start = map
        .find(&format!("\n### {heading}\n"))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section `### {heading}`"));
    let rest = &map[start + 1..];
    let end = rest[4..].find("\n#").map_or(rest.len(), |e| e + 4);
    rest[..end].to_string()
}

/// The files and folders a section names (its code spans that look like paths), each with
/// whether it exists in the checkout.
pub fn named_paths(section: &str) -> BTreeMap<String, bool> {
    let mut named = BTreeMap::new();
    for (i, span) in section.split('`').enumerate() {
        let looks_like_path = !span.contains(' ')
            && (span.contains('/')
                || [".rs", ".md", ".yml", ".yaml", ".py"]
                    .iter()
                    .any(|ext| span.ends_with(ext)));
        if i % 2 == 1 && looks_like_path && !span.contains("://") {
            named.insert(span.to_string(), root().join(span).exists());
        }
    }
    named
}
