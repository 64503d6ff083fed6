//! `policy-host bench` runs and prints kwctl's (tiny-bench's) report for `validate_settings`
//! and `validate`. A smoke test with the smallest budgets: no timing is asserted.
//!
//! ANNOTATED_POLICY: the module (default: <workspace>/annotated-policy.wasm).

use std::path::PathBuf;
use std::process::Command;

fn request() -> PathBuf {
    e2e_tests::scenarios().join("kubeadmconfig-v1beta2-edit-in-use/request.json")
}

/// The tiny-bench report without its colour codes.
fn plain(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn bench(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_policy-host"))
        .arg("bench")
        .args([
            "--warm-up-time",
            "0",
            "--measurement-time",
            "0",
            "--num-samples",
            "2",
            "--num-resamples",
            "2",
        ])
        .args(extra)
        .arg("--request-path")
        .arg(request())
        .arg(e2e_tests::annotated_policy())
        .output()
        .expect("policy-host runs")
}

fn assert_report(output: &std::process::Output) {
    let stdout = plain(&output.stdout);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for label in ["validate_settings", "validate"] {
        for fragment in [
            format!("{label} warming up for 0.00ns"),
            format!("{label} mean warm up execution time "),
            format!("{label} ["),
        ] {
            assert!(
                stdout.lines().any(|l| l.starts_with(&fragment)),
                "no line starting with {fragment:?} in:\n{stdout}"
            );
        }
    }
    assert!(
        stdout.contains(" iterations in ") && stdout.contains(" with 2.0 samples]:"),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("\telapsed\t[min mean max]:\t[").count(),
        2,
        "{stdout}"
    );
    let order: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" warming up for "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(order, ["validate_settings", "validate"]);
}

#[test]
fn bench_prints_kwctls_report() {
    assert_report(&bench(&[]));
}

#[test]
fn bench_on_fresh_instances_prints_the_same_report() {
    assert_report(&bench(&["--fresh-instance"]));
}

#[test]
fn bench_refuses_settings_the_policy_refuses() {
    let output = bench(&["--settings-json", r#"{"inPlaceEdit":"reject"}"#]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("Error: Provided settings are not valid: ")),
        "{stderr}"
    );
}
