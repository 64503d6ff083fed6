//! The machine the numbers were measured on.

use std::path::Path;
use std::process::Command;

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn lock_version(workspace: &Path, name: &str) -> Option<String> {
    let lock = std::fs::read_to_string(workspace.join("Cargo.lock")).ok()?;
    let needle = format!("name = \"{name}\"\nversion = \"");
    let start = lock.find(&needle)? + needle.len();
    Some(lock[start..].split('"').next()?.to_string())
}

/// What the numbers were measured on, and the load average at the start of the run.
pub fn machine(workspace: &Path) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let lscpu = command_output("lscpu", &[]).unwrap_or_default();
    let cpu = lscpu
        .lines()
        .find_map(|l| l.strip_prefix("Model name:"))
        .map(|m| m.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let hypervisor = lscpu
        .lines()
        .find_map(|l| l.strip_prefix("Hypervisor vendor:"))
        .map(|m| format!(" (virtualized: {})", m.trim()))
        .unwrap_or_default();
    rows.push((
        "CPU (lscpu model)".to_string(),
        format!("{cpu}{hypervisor}"),
    ));
    rows.push((
        "cores".to_string(),
        std::thread::available_parallelism().map_or("unknown".to_string(), |n| n.get().to_string()),
    ));
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kib: u64 = m
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)))
        })
        .unwrap_or_else(|| "unknown".to_string());
    rows.push(("memory".to_string(), memory));
    if let Some(os) = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|o| {
            o.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
    {
        rows.push(("OS".to_string(), os));
    }
    rows.push((
        "rustc".to_string(),
        command_output("rustc", &["--version"]).unwrap_or_else(|| "unknown".to_string()),
    ));
    for crate_name in ["wasmtime", "wapc", "wasmtime-provider"] {
        if let Some(version) = lock_version(workspace, crate_name) {
            rows.push((crate_name.to_string(), version));
        }
    }
    if let Some(version) = command_output("wasm-opt", &["--version"]) {
        rows.push(("binaryen".to_string(), version));
    }
    if let Some(commit) = command_output(
        "git",
        &[
            "-C",
            &workspace.to_string_lossy(),
            "rev-parse",
            "--short",
            "HEAD",
        ],
    ) {
        rows.push(("commit".to_string(), commit));
    }
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let fields: Vec<&str> = load.split_whitespace().take(3).collect();
        let row = ("load average at start (1, 5, 15 min)", fields.join(", "));
        rows.push((row.0.to_string(), row.1));
    }
    rows
}
