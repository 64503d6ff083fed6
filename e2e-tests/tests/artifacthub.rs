//! artifacthub-pkg.yml is what `kwctl scaffold artifacthub` writes from metadata.yml and
//! questions-ui.yml, not a hand-edited file: Kubewarden's release pipeline regenerates it with
//! kwctl and fails on any difference but `createdAt`, and Artifact Hub shows it as it is.
//! policy-host's `scaffold artifacthub` writes kwctl's file; these tests hold the committed
//! file to it, byte for byte, and check the command line that `make artifacthub-pkg.yml` uses.

use std::path::{Path, PathBuf};
use std::process::Command;

use policy_host::artifacthub;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(name: &str) -> String {
    let path = root().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of the `createdAt:` line.
fn created_at(file: &str) -> &str {
    file.lines()
        .find_map(|line| line.strip_prefix("createdAt: "))
        .expect("artifacthub-pkg.yml has a createdAt line")
}

/// The file with its `createdAt:` line taken out (the one line that is the time of writing).
fn without_created_at(file: &str) -> String {
    file.lines()
        .filter(|line| !line.starts_with("createdAt: "))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The first differing line, to point the reader at it.
fn first_difference(expected: &str, actual: &str) -> String {
    let mut expected_lines = expected.lines();
    let mut actual_lines = actual.lines();
    for n in 1.. {
        match (expected_lines.next(), actual_lines.next()) {
            (None, None) => return "(only line endings differ)".to_string(),
            (e, a) if e != a => {
                return format!("line {n}:\n  kwctl writes: {e:?}\n  committed:    {a:?}")
            }
            _ => {}
        }
    }
    unreachable!()
}

const REGENERATE: &str =
    "run `make artifacthub-pkg.yml` (after `make release VERSION=x.y.z` for a \
                          new version) instead of editing the file";

#[test]
fn the_committed_file_is_what_kwctl_writes_from_metadata_and_questions() {
    let committed = read("artifacthub-pkg.yml");
    let metadata = artifacthub::read_metadata(&read("metadata.yml")).unwrap();
    let expected = artifacthub::scaffold(
        &metadata,
        Some(&read("questions-ui.yml")),
        created_at(&committed),
    )
    .unwrap();
    assert!(
        committed == expected,
        "artifacthub-pkg.yml is not what `kwctl scaffold artifacthub` writes from metadata.yml \
         and questions-ui.yml; {REGENERATE}. First difference, {}",
        first_difference(&expected, &committed)
    );
}

#[test]
fn the_committed_created_at_is_a_time_kwctl_prints() {
    // kwctl prints the moment it ran as RFC 3339 in UTC, the fraction without trailing zeros:
    // a time typed by hand (".000000000", "+00:00", no seconds) is not one it prints.
    let committed = read("artifacthub-pkg.yml");
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

fn policy_host() -> Command {
    Command::new(env!("CARGO_BIN_EXE_policy-host"))
}

#[test]
fn the_command_finds_metadata_and_questions_as_kwctl_does_and_stamps_the_time() {
    // In the repository's root without flags: metadata.yml and questions-ui.yml are found, and
    // the file goes to stdout with println's newline, as kwctl prints it.
    let before = artifacthub::now();
    let output = policy_host()
        .args(["scaffold", "artifacthub"])
        .current_dir(root())
        .output()
        .unwrap();
    let after = artifacthub::now();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).unwrap();
    let file = printed
        .strip_suffix('\n')
        .expect("printed with a newline after the file");
    let (printed, committed) = (
        without_created_at(file),
        without_created_at(&read("artifacthub-pkg.yml")),
    );
    assert!(
        printed == committed,
        "`policy-host scaffold artifacthub` in the root does not print artifacthub-pkg.yml; \
         first difference, {}",
        first_difference(&printed, &committed)
    );
    // RFC 3339 in UTC with the same number of digits orders as text does, mostly; compare the
    // whole seconds, which always do.
    let stamp = &created_at(file)[..19];
    assert!(
        &before[..19] <= stamp && stamp <= &after[..19],
        "createdAt {stamp} is not the time of writing ({before} .. {after})"
    );
}

#[test]
fn version_is_metadatas_and_the_deprecated_flag_only_warns() {
    let dir = std::env::temp_dir().join(format!("policy-host-artifacthub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("artifacthub-pkg.yml");
    let metadata = read("metadata.yml");
    let bumped = dir.join("metadata.yml");
    let version_line = metadata
        .lines()
        .find(|l| l.trim_start().starts_with("io.kubewarden.policy.version:"))
        .unwrap();
    std::fs::write(
        &bumped,
        metadata.replace(version_line, "  io.kubewarden.policy.version: 7.8.9"),
    )
    .unwrap();
    let output = policy_host()
        .args(["scaffold", "artifacthub", "--version", "1.0.0", "-m"])
        .arg(&bumped)
        .arg("-q")
        .arg(root().join("questions-ui.yml"))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("The 'version' flag is deprecated"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("\nversion: 7.8.9\n"), "{written}");
    assert!(
        written.contains(":v7.8.9\n") && !written.contains("1.0.0"),
        "{written}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn metadata_without_annotations_is_refused_with_kwctls_message() {
    let dir = std::env::temp_dir().join(format!(
        "policy-host-artifacthub-bad-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metadata.yml"), "rules: []\nmutating: false\n").unwrap();
    let output = policy_host()
        .args(["scaffold", "artifacthub"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("no annotations in policy metadata"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
