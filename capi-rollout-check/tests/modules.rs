//! How the CLI's modules use each other: `rotate` runs `roll` (`--replace-instances`) and
//! reports through it, so `roll` never uses `rotate`; what both need lives in modules of their
//! own (`cluster.rs`, the kubectl client; `manifests.rs`, an object's key and configRef).

use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
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
