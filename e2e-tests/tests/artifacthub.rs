//! artifacthub-pkg.yml is what `kwctl scaffold artifacthub` writes from metadata.yml and
//! questions-ui.yml, not a hand-edited file: Kubewarden's release pipeline regenerates it with
//! kwctl and fails on any difference but `createdAt`, and Artifact Hub shows it as it is.
//!
//! KWCTL: the kwctl binary that holds the committed file to its output (the test workflow's
//! kwctl job sets it). Without it only the `createdAt` line is checked here.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn committed() -> String {
    let path = root().join("artifacthub-pkg.yml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of the `createdAt:` line.
fn created_at(file: &str) -> &str {
    file.lines()
        .find_map(|line| line.strip_prefix("createdAt: "))
        .expect("artifacthub-pkg.yml has a createdAt line")
}

/// The file with its `createdAt:` line taken out (the one line that is the time of writing), and
/// without trailing blank lines: kwctl 1.35.0 prints the document to stdout with one more newline
/// than it writes with `--output` (seen when .ci/run first handed the real kwctl on).
fn without_created_at(file: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = file
        .lines()
        .filter(|line| !line.starts_with("createdAt: "))
        .collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines
}

const REGENERATE: &str = "run `make artifacthub-pkg.yml` (after `make release VERSION=x.y.z` for \
                          a new version) instead of editing the file";

#[test]
fn the_committed_file_is_what_kwctl_writes_from_metadata_and_questions() {
    // `make e2e KWCTL=` exports KWCTL empty: that is no kwctl.
    let Some(kwctl) = std::env::var_os("KWCTL").filter(|k| !k.is_empty()) else {
        eprintln!("KWCTL not set: artifacthub-pkg.yml is held to kwctl's output by the kwctl job");
        return;
    };
    // In the repository's root without flags, as Kubewarden's push-artifacthub step runs it.
    let output = Command::new(&kwctl)
        .args(["scaffold", "artifacthub"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).unwrap();
    let committed = committed();
    let (expected, actual) = (without_created_at(&printed), without_created_at(&committed));
    let first = (0..expected.len().max(actual.len()))
        .find(|&n| expected.get(n) != actual.get(n))
        .map(|n| (n, expected.get(n), actual.get(n)));
    assert!(
        first.is_none(),
        "artifacthub-pkg.yml is not what `kwctl scaffold artifacthub` writes; {REGENERATE}. \
         First difference (line, kwctl, committed; createdAt left out): {first:?}"
    );
}

#[test]
fn the_committed_created_at_is_a_time_kwctl_prints() {
    // kwctl prints the moment it ran as RFC 3339 in UTC, the fraction without trailing zeros:
    // a time typed by hand (".000000000", "+00:00", no seconds) is not one it prints.
    let committed = committed();
    let created = created_at(&committed);
    let b = created.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let fixed = b.len() >= 20
        && digits(0..4)
        && &created[4..5] == "-"
        && digits(5..7)
        && &created[7..8] == "-"
        && digits(8..10)
        && &created[10..11] == "T"
        && digits(11..13)
        && &created[13..14] == ":"
        && digits(14..16)
        && &created[16..17] == ":"
        && digits(17..19);
    let rest = &created[19.min(created.len())..];
    let fraction_ok = match rest.strip_suffix('Z') {
        Some("") => true,
        Some(fraction) => fraction.strip_prefix('.').is_some_and(|f| {
            (1..=9).contains(&f.len()) && f.bytes().all(|c| c.is_ascii_digit()) && !f.ends_with('0')
        }),
        None => false,
    };
    assert!(
        fixed && fraction_ok,
        "artifacthub-pkg.yml: createdAt {created:?} is not a time kwctl writes; {REGENERATE}"
    );
}
