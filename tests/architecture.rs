//! ARCHITECTURE.md is the repository's map, and stays one:
//!
//! - its "Folders" table names every folder at the root (and every tool under `tools/`), and
//!   every folder it names exists;
//! - its "The modules of `src/`" table names every module of `src/` (a file, or a folder for its
//!   `mod.rs`), and every module it names exists;
//! - its relative links name files or folders of the checkout.
//!
//! And the files it maps stay readable: none over 700 lines without saying, at its top, why
//! it is one file; the documentation describes the present (no commit of this repository, no
//! "now fixed").

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

/// A source or documentation file longer than this says why it is one file in its first
/// lines (`Why one file: ...`), or is split by job.
const MAX_LINES: usize = 700;

/// Files over the limit that are being split elsewhere and do not say why yet. The test fails
/// when one of them is back under the limit or says why: then its entry goes.
const BEING_SPLIT: &[&str] = &[];

/// Every file under `dir` whose name ends with one of `extensions` (or is a Makefile),
/// skipping build output, installed packages and the CRD copies.
fn files_under(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            let skip = [
                ".git",
                "target",
                "node_modules",
                "corpus",
                "artifacts",
                "pkg",
            ];
            if !skip.contains(&name.as_str()) && !path.ends_with("tests/crds") {
                files_under(&path, extensions, out);
            }
        } else if name == "Makefile" || extensions.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn no_file_is_longer_than_its_job_without_saying_why() {
    let mut files = Vec::new();
    let sources = [".rs", ".go", ".py", ".sh", ".mjs", ".md", ".toml"];
    files_under(&root(), &sources, &mut files);
    let mut long = Vec::new();
    let mut stale = Vec::new();
    for path in files {
        let rel = relative(&path);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let says_why = text.lines().take(20).any(|l| l.contains("Why one file:"));
        let over = text.lines().count() > MAX_LINES && !says_why;
        match (over, BEING_SPLIT.contains(&rel.as_str())) {
            (true, false) => long.push(format!("{rel}: {} lines", text.lines().count())),
            (false, true) => stale.push(rel),
            _ => {}
        }
    }
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines: split by job, or say at the top `Why one file: ...`:\n{}",
        long.join("\n")
    );
    assert!(
        stale.is_empty(),
        "no longer over the limit, or says why: take it out of BEING_SPLIT: {stale:?}"
    );
}

/// A commit of this repository: 7 to 40 hex digits with a letter and a digit, not part of a
/// name (`pool-1-a-e5112c83`), not an action pinned by commit (`@3d3c...`), not rustc's version.
fn commit_like(line: &str) -> Option<String> {
    if line.contains("rustc 1.") {
        return None;
    }
    let mut prev = ' ';
    let mut word: Option<(usize, char)> = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        if c.is_ascii_alphanumeric() {
            word.get_or_insert((i, prev));
        } else if let Some((start, before)) = word.take() {
            let w = &line[start..i];
            let hex = w
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if (7..=40).contains(&w.len())
                && hex
                && w.bytes().any(|b| b.is_ascii_digit())
                && w.bytes().any(|b| b.is_ascii_alphabetic())
                && !matches!(before, '-' | '@' | '.' | '/')
            {
                return Some(w.to_string());
            }
        }
        prev = c;
    }
    None
}

#[test]
fn documentation_describes_the_present() {
    let mut files = Vec::new();
    files_under(&root(), &[".md"], &mut files);
    let narration = ["now fixed", "fresh machine found", "has grown since"];
    let mut found = Vec::new();
    for path in files {
        let rel = relative(&path);
        if rel == "CHANGELOG.md" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(word) = commit_like(line) {
                found.push(format!("{rel}:{}: a commit? {word}", n + 1));
            }
            for phrase in narration.iter().filter(|p| line.contains(*p)) {
                found.push(format!("{rel}:{}: history: {phrase:?}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "docs say what is, not what happened (history is git's and CHANGELOG.md's):\n{}",
        found.join("\n")
    );
}
