//! `make demo` with kwctl: the Makefile hands evaluation and annotation to kwctl and builds no
//! host, and the runner gives kwctl the command lines kwctl takes. kwctl itself is not needed:
//! a stand-in script on PATH records what it is asked and answers with a fixed line.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("scenario-model lives in tools/ of the workspace")
        .to_path_buf()
}

/// A fresh directory of this test run, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "scenario-model-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `kwctl` in `dir/bin` that writes its arguments, one per line, to a new file under
/// `dir/calls`, and prints `answer` as kwctl prints its AdmissionResponse line.
fn fake_kwctl(dir: &Path, answer: &str) -> PathBuf {
    let bin = dir.join("bin");
    let calls = dir.join("calls");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&calls).unwrap();
    let script = format!(
        "#!/bin/sh\nlog=$(mktemp '{}/call.XXXXXX')\nprintf '%s\\n' \"$@\" > \"$log\"\nprintf '%s\\n' '{answer}'\n",
        calls.display()
    );
    let kwctl = bin.join("kwctl");
    std::fs::write(&kwctl, script).unwrap();
    std::fs::set_permissions(&kwctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    kwctl
}

/// Every recorded call, as its argument list, sorted.
fn calls(dir: &Path) -> Vec<Vec<String>> {
    let mut calls: Vec<Vec<String>> = std::fs::read_dir(dir.join("calls"))
        .unwrap()
        .map(|entry| {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            text.lines().map(str::to_string).collect()
        })
        .collect();
    calls.sort();
    calls
}

/// `make -n` in the workspace (nothing is built or run), with `path` first on PATH. The
/// outer make's variables (this test may run under `make test`) are not passed on.
fn make_dry_run(path: Option<&Path>, args: &[&str]) -> String {
    let mut command = Command::new("make");
    command
        .current_dir(workspace())
        .args(["--no-print-directory", "-n", "-W", "metadata.yml"])
        .args(args)
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .env_remove("KWCTL")
        .env_remove("HOST_FEATURES");
    if let Some(dir) = path {
        let old = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![dir.to_path_buf()];
        paths.extend(std::env::split_paths(&old));
        command.env("PATH", std::env::join_paths(paths).unwrap());
    }
    let output: Output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run make (needed for this test): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "make -n {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn host_builds(dry_run: &str) -> Vec<&str> {
    dry_run
        .lines()
        .filter(|l| l.contains("cargo") && l.contains("-p policy-host"))
        .collect()
}

#[test]
fn demo_with_kwctl_on_path_builds_no_host() {
    let dir = TempDir::new("path");
    let kwctl = fake_kwctl(&dir.0, "{}");
    let dry_run = make_dry_run(Some(&dir.0.join("bin")), &["demo"]);
    let kwctl = kwctl.display();
    assert!(
        dry_run.contains(&format!(
            "{kwctl} annotate -m metadata.yml -u README.md -o annotated-policy.wasm policy.wasm\n"
        )),
        "{dry_run}"
    );
    assert!(
        dry_run.contains(&format!(
            "--kwctl {kwctl} --module annotated-policy.wasm e2e-tests/scenarios"
        )),
        "{dry_run}"
    );
    assert!(
        dry_run.contains("-p scenario-model --bin scenarios"),
        "{dry_run}"
    );
    assert_eq!(host_builds(&dry_run), Vec::<&str>::new(), "{dry_run}");
    assert!(!dry_run.contains("policy-host annotate"), "{dry_run}");
}

#[test]
fn demo_with_kwctl_named_builds_no_host() {
    let dir = TempDir::new("named");
    let kwctl = fake_kwctl(&dir.0, "{}");
    let named = format!("KWCTL={}", kwctl.display());
    let dry_run = make_dry_run(None, &["demo", &named]);
    assert!(
        dry_run.contains(&format!("--kwctl {} --module", kwctl.display())),
        "{dry_run}"
    );
    assert_eq!(host_builds(&dry_run), Vec::<&str>::new(), "{dry_run}");
}

#[test]
fn demo_without_kwctl_builds_an_unoptimised_host_without_bench_or_serve() {
    // `KWCTL=` ignores a kwctl installed on this machine.
    let dry_run = make_dry_run(None, &["demo", "KWCTL="]);
    let builds = host_builds(&dry_run);
    assert_eq!(builds.len(), 1, "{dry_run}");
    assert!(!builds[0].contains("--features"), "{}", builds[0]);
    assert!(builds[0].contains("--profile demo"), "{}", builds[0]);
    assert!(
        dry_run.contains("target/demo/policy-host annotate -m metadata.yml -u README.md -o annotated-policy.wasm policy.wasm\n"),
        "{dry_run}"
    );
    assert!(
        dry_run.contains("target/demo/scenarios --host target/demo/policy-host --module annotated-policy.wasm e2e-tests/scenarios\n"),
        "{dry_run}"
    );
    assert!(!dry_run.contains("target/release/policy-host"), "{dry_run}");
}

#[test]
fn test_and_bench_build_the_host_with_every_feature() {
    for target in [
        vec!["annotated-policy.wasm", "KWCTL="],
        vec!["bench", "KWCTL="],
    ] {
        let dry_run = make_dry_run(None, &target);
        let builds = host_builds(&dry_run);
        assert!(!builds.is_empty(), "{target:?}: {dry_run}");
        for build in builds {
            assert!(
                build.contains("--features policy-host/bench,policy-host/serve"),
                "{target:?}: {build}"
            );
        }
    }
}

/// `make` without running anything, expected to fail: its stderr.
fn make_dry_run_fails(args: &[&str]) -> String {
    let output = Command::new("make")
        .current_dir(workspace())
        .args(["--no-print-directory", "-n"])
        .args(args)
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .output()
        .unwrap_or_else(|e| panic!("cannot run make (needed for this test): {e}"));
    assert!(!output.status.success(), "make -n {args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn publishing_is_kwctls_and_stops_without_it() {
    for goal in [
        vec!["push", "REGISTRY=localhost:5000/policies"],
        vec!["artifacthub-pkg.yml"],
        vec!["release", "VERSION=9.9.9"],
    ] {
        let stderr = make_dry_run_fails(&[goal.as_slice(), &["KWCTL="]].concat());
        assert!(
            stderr.contains(&format!("make {} needs kwctl: install it from", goal[0])),
            "{goal:?}: {stderr}"
        );
    }
    let dir = TempDir::new("publish");
    let kwctl = fake_kwctl(&dir.0, "{}");
    let named = format!("KWCTL={}", kwctl.display());
    let push = make_dry_run(None, &["push", "REGISTRY=localhost:5000/policies", &named]);
    assert!(
        push.contains(&format!("{} push  annotated-policy.wasm", kwctl.display()))
            && push.contains("registry://localhost:5000/policies/capi-bootstrap-rollout-policy:v"),
        "{push}"
    );
    let scaffold = make_dry_run(None, &["artifacthub-pkg.yml", "VERSION=9.9.9", &named]);
    assert!(
        scaffold.contains(&format!(
            "{} scaffold artifacthub --metadata-path target/artifacthub/metadata.yml",
            kwctl.display()
        )),
        "{scaffold}"
    );
    for dry_run in [push, scaffold] {
        assert_eq!(host_builds(&dry_run), Vec::<&str>::new(), "{dry_run}");
    }
}

/// The runner's command line for each scenario is kwctl's `run`, as the e2e README documents
/// it; the table reads kwctl's answer line.
#[test]
fn the_runner_gives_kwctl_its_command_lines() {
    let dir = TempDir::new("runner");
    let kwctl = fake_kwctl(
        &dir.0,
        r#"{"uid":"u","allowed":true,"auditAnnotations":null,"warnings":["w"]}"#,
    );
    let scenarios = dir.0.join("scenarios");
    let plain = scenarios.join("plain");
    let replayed = scenarios.join("replayed");
    for (path, yaml) in [
        (&plain, "description: no settings\nexpect: {allowed: true, warnings: 1}\n"),
        (
            &replayed,
            "description: everything\nsettings: {contextAware: true, exemptUsers: [a b]}\ncontextAware: true\nsession: session.yml\nexpect: {allowed: true, warningsContain: [w]}\n",
        ),
    ] {
        std::fs::create_dir_all(path).unwrap();
        std::fs::write(path.join("scenario.yaml"), yaml).unwrap();
        std::fs::write(path.join("request.json"), "{}\n").unwrap();
    }
    std::fs::write(replayed.join("session.yml"), "[]\n").unwrap();
    let module = dir.0.join("annotated-policy.wasm");
    std::fs::write(&module, b"\0asm").unwrap();

    let output = Command::new(env!("CARGO_BIN_EXE_scenarios"))
        .arg("--kwctl")
        .arg(&kwctl)
        .arg("--module")
        .arg(&module)
        .arg(&scenarios)
        .env_remove("KWCTL")
        .env_remove("POLICY_HOST")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("run through kwctl"), "{stdout}");
    assert!(stdout.contains("✓ plain"), "{stdout}");
    assert!(stdout.ends_with("\n2 passed, 0 failed\n"), "{stdout}");

    let canonical = |p: &Path| p.canonicalize().unwrap().display().to_string();
    let module = canonical(&module);
    let expected = vec![
        vec![
            "run".to_string(),
            "--request-path".to_string(),
            canonical(&plain.join("request.json")),
            module.clone(),
        ],
        vec![
            "run".to_string(),
            "--settings-json".to_string(),
            r#"{"contextAware":true,"exemptUsers":["a b"]}"#.to_string(),
            "--allow-context-aware".to_string(),
            "--replay-host-capabilities-interactions".to_string(),
            canonical(&replayed.join("session.yml")),
            "--request-path".to_string(),
            canonical(&replayed.join("request.json")),
            module,
        ],
    ];
    let mut expected = expected;
    expected.sort();
    assert_eq!(calls(&dir.0), expected);
}

/// `make demo KWCTL=` exports KWCTL empty to the runner: that means no kwctl.
#[test]
fn an_empty_kwctl_is_no_kwctl() {
    let dir = TempDir::new("empty");
    // kwctl's `run` and policy-host's take the same arguments: the stand-in serves as a host.
    let host = fake_kwctl(
        &dir.0,
        r#"{"uid":"u","allowed":true,"auditAnnotations":null,"warnings":null}"#,
    );
    let scenario = dir.0.join("scenarios/plain");
    std::fs::create_dir_all(&scenario).unwrap();
    std::fs::write(
        scenario.join("scenario.yaml"),
        "description: d\nexpect: {allowed: true}\n",
    )
    .unwrap();
    std::fs::write(scenario.join("request.json"), "{}\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_scenarios"))
        .arg("--host")
        .arg(&host)
        .arg("--module")
        .arg(&host)
        .arg(dir.0.join("scenarios"))
        .env("KWCTL", "")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("run through policy-host"), "{stdout}");
    assert_eq!(calls(&dir.0).len(), 1);
}
