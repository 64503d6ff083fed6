//! ARCHITECTURE.md is the repository's map, and stays one:
//!
//! - its "Folders" table names every folder at the root (and every tool under `tools/`), and
//!   every folder it names exists;
//! - its "The modules of `src/`" table names every module of `src/` (a file, or a folder for its
//!   `mod.rs`), and every module it names exists;
//! - its relative links name files or folders of the checkout.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn map() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the root")
}

/// The first cell of each row of the table under the heading `## {heading}`, without its
/// backticks: `src/`, `webhooks/bootstrap_config.rs`.
fn first_column(map: &str, heading: &str) -> Vec<String> {
    let section = map
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section `## {heading}`"));
    section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cell = line
                .trim_start_matches("| ")
                .split(" |")
                .next()
                .unwrap_or("");
            cell.trim().trim_matches('`').to_string()
        })
        .collect()
}

/// Root entries git ignores (`/target`), from .gitignore: not part of the repository.
fn ignored_at_root() -> BTreeSet<String> {
    std::fs::read_to_string(root().join(".gitignore"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix('/'))
        .filter(|rest| !rest.contains('/'))
        .map(str::to_string)
        .collect()
}

fn folders_in(dir: &Path, prefix: &str, skip: &BTreeSet<String>) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_type().unwrap().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".git" && !skip.contains(name))
        .map(|name| format!("{prefix}{name}/"))
        .collect()
}

#[test]
fn the_map_names_every_folder_and_only_folders_that_exist() {
    let named: BTreeSet<String> = first_column(&map(), "Folders").into_iter().collect();
    for folder in &named {
        assert!(
            folder.ends_with('/') && root().join(folder).is_dir(),
            "ARCHITECTURE.md names the folder `{folder}`, which does not exist"
        );
    }
    let mut present = folders_in(&root(), "", &ignored_at_root());
    let tool_skip = ["target", "node_modules", "corpus", "artifacts"]
        .map(str::to_string)
        .into();
    present.extend(folders_in(&root().join("tools"), "tools/", &tool_skip));
    let unnamed: Vec<&String> = present.difference(&named).collect();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's Folders table does not name {unnamed:?}: add a line saying its job"
    );
}

/// Every module of src/: `engine.rs`, `rules/rotation.rs`; a folder's `mod.rs` as `rules/`.
fn src_modules(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            src_modules(&entry.path(), &format!("{prefix}{name}/"), out);
        } else if name == "mod.rs" {
            out.insert(prefix.to_string());
        } else if name.ends_with(".rs") {
            out.insert(format!("{prefix}{name}"));
        }
    }
}

#[test]
fn the_map_names_every_module_of_src_and_only_modules_that_exist() {
    let named: BTreeSet<String> = first_column(&map(), "The modules of `src/`")
        .into_iter()
        .collect();
    let mut present = BTreeSet::new();
    src_modules(&root().join("src"), "", &mut present);
    let missing: Vec<&String> = named.difference(&present).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names modules src/ does not have: {missing:?}"
    );
    let unnamed: Vec<&String> = present.difference(&named).collect();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's table of src/ does not name {unnamed:?}: add a line saying its job"
    );
}

#[test]
fn the_maps_links_name_files_of_the_checkout() {
    let map = map();
    let mut broken = Vec::new();
    for (i, _) in map.match_indices("](") {
        let rest = &map[i + 2..];
        let target = &rest[..rest.find(')').unwrap_or(rest.len())];
        let path = target.split('#').next().unwrap_or("");
        if path.is_empty() || path.contains("://") {
            continue;
        }
        if !root().join(path).exists() {
            broken.push(target.to_string());
        }
    }
    assert!(
        broken.is_empty(),
        "ARCHITECTURE.md links to nothing: {broken:?}"
    );
}
