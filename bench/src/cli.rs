//! `policy-host run` as a user runs it, process start included, timed by hyperfine.

use std::process::Command;

use serde_json::Value;

use crate::inputs;
use crate::suite::SuiteOptions;

#[derive(Clone, Debug)]
pub struct CliRun {
    pub command: String,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    pub runs: usize,
}

/// `policy-host run` as a user runs it, process start included, timed by hyperfine.
pub fn cli_run(options: &SuiteOptions, notes: &mut Vec<String>) -> Option<CliRun> {
    let Some(hyperfine) = tool("hyperfine") else {
        notes.push("hyperfine not found: no whole-process timing".to_string());
        return None;
    };
    let request = options.work_dir.join("config-edit-10KiB.json");
    let input = inputs::config_edit(10 * 1024).ok()?;
    std::fs::write(&request, serde_json::to_vec_pretty(&input.request).ok()?).ok()?;
    let export = options.work_dir.join("hyperfine.json");
    let command = format!(
        "{} run -r {} {}",
        options.host.display(),
        request.display(),
        options.annotated.display()
    );
    let runs = if options.quick { "3" } else { "30" };
    let status = Command::new(hyperfine)
        .args(["--warmup", "3", "--runs", runs, "-N", "--export-json"])
        .arg(&export)
        .arg(&command)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        notes.push(format!("hyperfine failed on `{command}`"));
        return None;
    }
    let json: Value = serde_json::from_slice(&std::fs::read(&export).ok()?).ok()?;
    let result = &json["results"][0];
    Some(CliRun {
        command: format!(
            "policy-host run -r {} annotated-policy.wasm",
            display(&request, &options.workspace)
        ),
        mean_ns: result["mean"].as_f64()? * 1e9,
        stddev_ns: result["stddev"].as_f64().unwrap_or(0.0) * 1e9,
        runs: result["times"].as_array().map_or(0, Vec::len),
    })
}

fn tool(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn display(path: &std::path::Path, workspace: &std::path::Path) -> String {
    path.strip_prefix(workspace)
        .unwrap_or(path)
        .display()
        .to_string()
}
