//! The GitHub Action (action.yml) installs capi-rollout-check with capi-rollout-check/action/install.sh
//! and runs it with capi-rollout-check/action/run.sh. These tests run both scripts as the runner would,
//! with releases served from 127.0.0.1 (this crate's own binary as the released one) and a
//! stand-in for cargo, so that what a user of the action sees is checked without GitHub: a
//! verified binary is installed and runs, a binary that does not match its published sha256 is
//! never run, an unreleased version is built from source, an explicit version that does not
//! exist fails; the `policies` input runs `capi-rollout-check settings` on the manifests it names,
//! alone or beside the comparison.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const AMD64: &str = "capi-rollout-check-linux-amd64";

/// The repository's root: the workflow's working directory.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The action's own directory (GITHUB_ACTION_PATH): this crate's, beside its action.yml.
fn action_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn binary() -> Vec<u8> {
    std::fs::read(env!("CARGO_BIN_EXE_capi-rollout-check")).unwrap()
}

fn sha256_line(bytes: &[u8], name: &str) -> Vec<u8> {
    let dir = TempDir::new("sha");
    let file = dir.0.join(name);
    std::fs::write(&file, bytes).unwrap();
    let output = Command::new("sha256sum")
        .arg(name)
        .current_dir(&dir.0)
        .output()
        .expect("sha256sum (coreutils)");
    assert!(output.status.success());
    output.stdout
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "capi-rollout-check-action-{label}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// GitHub's release downloads, on 127.0.0.1: the files it holds, 404 for anything else. Serves
/// until the test process ends.
fn serve(files: HashMap<String, Vec<u8>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let files = Arc::new(files);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                    break;
                }
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or("");
            let (status, body) = match files.get(path) {
                Some(body) => ("200 OK", body.clone()),
                None => ("404 Not Found", b"Not Found".to_vec()),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
        }
    });
    format!("http://{address}/releases/download")
}

/// The released files for `version`: the binary for linux-amd64 and its checksum.
fn release(version: &str, binary: &[u8], checksum: Option<Vec<u8>>) -> HashMap<String, Vec<u8>> {
    let mut files = HashMap::new();
    let base = format!("/releases/download/v{version}/{AMD64}");
    if let Some(checksum) = checksum {
        files.insert(format!("{base}.sha256"), checksum);
    }
    files.insert(base, binary.to_vec());
    files
}

/// A stand-in for `cargo install --path ... --root DIR`: logs its arguments, puts this crate's
/// binary at DIR/bin/capi-rollout-check.
fn fake_cargo(dir: &Path) -> PathBuf {
    let script = dir.join("cargo");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{log}'\nwhile [ \"$1\" != --root ]; do shift; done\n\
             mkdir -p \"$2/bin\" && cp '{binary}' \"$2/bin/capi-rollout-check\"\n",
            log = dir.join("cargo.log").display(),
            binary = env!("CARGO_BIN_EXE_capi-rollout-check"),
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    script
}

struct Install {
    output: Output,
    /// `path=` in $GITHUB_OUTPUT.
    path: Option<PathBuf>,
    /// What the stand-in cargo was asked, if it was.
    cargo: Option<String>,
    _dir: TempDir,
}

impl Install {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// The install failed with exit code 1, said `message`, and named no binary to run.
    fn assert_refused(&self, message: &str) {
        let stdout = self.stdout();
        assert_eq!(self.output.status.code(), Some(1), "{stdout}");
        assert!(stdout.contains(message), "{message:?} not in {stdout}");
        assert_eq!(self.path, None, "{stdout}");
    }
}

fn install(releases: &str, version: &str, os: &str, arch: &str) -> Install {
    let dir = TempDir::new("runner");
    let output_file = dir.0.join("github-output");
    std::fs::write(&output_file, "").unwrap();
    let output = Command::new(action_path().join("action/install.sh"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("VERSION", version)
        .env("GITHUB_ACTION_PATH", action_path())
        .env("RUNNER_OS", os)
        .env("RUNNER_ARCH", arch)
        .env("RUNNER_TEMP", &dir.0)
        .env("GITHUB_OUTPUT", &output_file)
        .env("CAPI_ROLLOUT_CHECK_RELEASES", releases)
        .env("CARGO", fake_cargo(&dir.0))
        .output()
        .unwrap();
    let path = std::fs::read_to_string(&output_file)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("path=").map(PathBuf::from));
    let cargo = std::fs::read_to_string(dir.0.join("cargo.log")).ok();
    Install {
        output,
        path,
        cargo,
        _dir: dir,
    }
}

fn run_action(check: &Path, head: &str, settings: &str) -> Output {
    Command::new(action_path().join("action/run.sh"))
        .env("CHECK", check)
        .env("BASE", "capi-rollout-check/tests/fixtures/base")
        .env(
            "HEAD",
            format!("capi-rollout-check/tests/fixtures/heads/{head}"),
        )
        .env("SETTINGS", settings)
        .env("POLICIES", "")
        .env("OUTPUT", "github")
        .current_dir(root())
        .output()
        .unwrap()
}

/// run.sh with the `policies` input, and `base`/`head` when given (this crate's binary as the
/// installed one).
fn run_policies(policies: &str, head: Option<&str>) -> (i32, String) {
    let output = Command::new(action_path().join("action/run.sh"))
        .env("CHECK", env!("CARGO_BIN_EXE_capi-rollout-check"))
        .env(
            "BASE",
            head.map_or("", |_| "capi-rollout-check/tests/fixtures/base"),
        )
        .env(
            "HEAD",
            head.map_or(String::new(), |h| {
                format!("capi-rollout-check/tests/fixtures/heads/{h}")
            }),
        )
        .env("SETTINGS", "")
        .env("POLICIES", policies)
        .env("OUTPUT", "github")
        .current_dir(root())
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

const POLICIES: &str = "capi-rollout-check/tests/fixtures/policies";

#[test]
fn policies_are_checked_alone_and_annotated_on_the_misspelt_key() {
    let (code, stdout) = run_policies(&format!("policy.yaml\n{POLICIES}/t*.yaml"), None);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "::error file={POLICIES}/typo.yaml,line=11,title=capi-rollout-check settings%3A \
             ClusterAdmissionPolicy capi-bootstrap-rollout (document 1)::inPlaceEdit: unknown setting"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("%0AinPlaceEdit: did you mean \"inPlaceEdits\"?\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("capi-rollout-check settings: 2 policies checked: 1 with invalid settings, 1 valid; 0 documents skipped\n"),
        "{stdout}"
    );
}

#[test]
fn policies_and_manifests_fail_the_step_when_either_fails() {
    // Valid settings, a rejected change.
    let (code, stdout) = run_policies("policy.yaml", Some("in-place-edit.yaml"));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("1 policy checked: 0 with invalid settings"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "::error file=capi-rollout-check/tests/fixtures/heads/in-place-edit.yaml,line=3"
        ),
        "{stdout}"
    );
    // Invalid settings, an allowed change: both are run.
    let (code, stdout) = run_policies(&format!("{POLICIES}/bad-value.yaml"), Some("rotation.yaml"));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!("::error file={POLICIES}/bad-value.yaml,line=10,")),
        "{stdout}"
    );
    assert!(stdout.contains("0 rejected"), "{stdout}");
    // Both fine.
    let (code, stdout) = run_policies("policy.yaml", Some("rotation.yaml"));
    assert_eq!(code, 0, "{stdout}");
}

#[test]
fn a_glob_matching_nothing_is_a_notice_and_no_input_at_all_an_error() {
    let (code, stdout) = run_policies("clusters/**/policy*.yaml", None);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "::notice title=capi-rollout-check settings::no file matches policies: clusters/**/policy*.yaml\n")
    );
    let (code, stdout) = run_policies("", None);
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("nothing to check"), "{stdout}");
    let (code, stdout) = run_policies(&format!("{POLICIES}/missing.yaml"), None);
    assert_eq!(code, 2, "{stdout}");
    assert!(
        stdout.contains(&format!("{POLICIES}/missing.yaml: cannot read")),
        "{stdout}"
    );
}

#[test]
fn the_released_binary_is_installed_when_its_sha256_matches_and_then_judges() {
    let binary = binary();
    let releases = serve(release(VERSION, &binary, Some(sha256_line(&binary, AMD64))));
    let installed = install(&releases, "", "Linux", "X64");
    assert!(installed.output.status.success(), "{}", installed.stdout());
    assert!(
        installed.stdout().contains("sha256 verified"),
        "{}",
        installed.stdout()
    );
    assert_eq!(installed.cargo, None, "nothing is built");
    let path = installed.path.clone().expect("path= in GITHUB_OUTPUT");
    assert!(path.ends_with(AMD64), "{}", path.display());

    let rotation = run_action(&path, "rotation.yaml", "");
    assert_eq!(rotation.status.code(), Some(0), "{rotation:?}");
    let edit = run_action(&path, "in-place-edit.yaml", "policy.yaml");
    assert_eq!(edit.status.code(), Some(1), "{edit:?}");
    let annotations = String::from_utf8_lossy(&edit.stdout);
    assert!(
        annotations.contains(
            "::error file=capi-rollout-check/tests/fixtures/heads/in-place-edit.yaml,line=3"
        ),
        "{annotations}"
    );
}

#[test]
fn a_binary_that_does_not_match_its_sha256_is_never_run_nor_replaced_by_a_build() {
    let binary = binary();
    let mut tampered = binary.clone();
    tampered.extend_from_slice(b"tampered");
    let releases = serve(release(
        VERSION,
        &tampered,
        Some(sha256_line(&binary, AMD64)),
    ));
    let installed = install(&releases, "", "Linux", "X64");
    installed.assert_refused("::error title=capi-rollout-check::capi-rollout-check-linux-amd64 does not match its published sha256");
    assert_eq!(installed.cargo, None);
}

#[test]
fn a_binary_without_its_checksum_file_is_refused() {
    let binary = binary();
    let releases = serve(release(VERSION, &binary, None));
    let installed = install(&releases, "", "Linux", "X64");
    installed.assert_refused("a binary without its checksum is not run");
}

#[test]
fn a_checksum_file_naming_another_file_is_refused() {
    let binary = binary();
    let releases = serve(release(
        VERSION,
        &binary,
        Some(sha256_line(&binary, "something-else")),
    ));
    let installed = install(&releases, "", "Linux", "X64");
    installed.assert_refused("is not one sha256 line for");
}

#[test]
fn the_actions_own_version_without_a_release_is_built_from_source() {
    let releases = serve(HashMap::new());
    let installed = install(&releases, "", "Linux", "X64");
    assert!(installed.output.status.success(), "{}", installed.stdout());
    assert!(
        installed.stdout().contains("is not released yet: building"),
        "{}",
        installed.stdout()
    );
    let cargo = installed.cargo.clone().expect("cargo install was run");
    assert!(
        cargo.starts_with("install --locked") && cargo.contains("/capi-rollout-check --root "),
        "{cargo}"
    );
    assert!(installed
        .path
        .unwrap()
        .ends_with("build/bin/capi-rollout-check"));
}

#[test]
fn an_explicit_version_without_a_release_fails_instead_of_building_something_else() {
    let releases = serve(HashMap::new());
    let installed = install(&releases, "v9.9.9", "Linux", "X64");
    installed.assert_refused("capi-rollout-check 9.9.9 has no release binary");
    assert_eq!(installed.cargo, None);
}

#[test]
fn a_release_reporting_another_version_is_refused() {
    // The binary of this source, published as 9.9.9: it says it is VERSION.
    let binary = binary();
    let releases = serve(release("9.9.9", &binary, Some(sha256_line(&binary, AMD64))));
    let installed = install(&releases, "9.9.9", "Linux", "X64");
    installed.assert_refused(&format!(
        "reports 'capi-rollout-check {VERSION}', expected capi-rollout-check 9.9.9"
    ));
}

#[test]
fn source_or_a_runner_without_a_release_binary_builds_the_actions_source() {
    let releases = serve(HashMap::new());
    for (version, os, arch) in [("source", "Linux", "X64"), ("", "macOS", "ARM64")] {
        let installed = install(&releases, version, os, arch);
        assert!(installed.output.status.success(), "{}", installed.stdout());
        assert!(installed.cargo.is_some(), "{version} {os}/{arch}");
    }
    let elsewhere = install(&releases, "9.9.9", "Windows", "X64");
    elsewhere.assert_refused("no capi-rollout-check release binary for Windows/X64");
}

#[test]
fn a_version_that_is_not_one_is_refused() {
    let releases = serve(HashMap::new());
    let installed = install(&releases, "latest; rm -rf /", "Linux", "X64");
    installed.assert_refused("is not a release version");
    assert_eq!(installed.cargo, None);
}
