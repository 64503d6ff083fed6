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

/// What the numbers were measured on, when, and the load average at the start of the run. A
/// value that cannot be found is `unknown`, or its row left out.
pub fn machine(workspace: &Path) -> Vec<(String, String)> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let field = |text: &str, key: &str| {
        let value = text.lines().find_map(|line| line.strip_prefix(key));
        value.map(|value| value.trim().to_string())
    };
    let lscpu = command_output("lscpu", &[]).unwrap_or_default();
    let cpu = field(&lscpu, "Model name:").unwrap_or_else(|| "unknown".to_string());
    let hypervisor = field(&lscpu, "Hypervisor vendor:").map(|h| format!(" (virtualized: {h})"));
    let cores = std::thread::available_parallelism().map(|n| n.get().to_string());
    let kib = field(&read("/proc/meminfo"), "MemTotal:")
        .and_then(|m| m.trim_end_matches("kB").trim().parse::<f64>().ok());
    let os = field(&read("/etc/os-release"), "PRETTY_NAME=");
    let load: Vec<String> = read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .map(str::to_string)
        .collect();
    let unknown = || Some("unknown".to_string());
    let mut rows = vec![
        (
            "CPU (lscpu model)",
            Some(cpu + &hypervisor.unwrap_or_default()),
        ),
        ("cores", cores.ok().or_else(unknown)),
        (
            "memory",
            kib.map(|kib| format!("{:.1} GiB", kib / (1024.0 * 1024.0)))
                .or_else(unknown),
        ),
        ("OS", os.map(|os| os.trim_matches('"').to_string())),
        (
            "rustc",
            command_output("rustc", &["--version"]).or_else(unknown),
        ),
    ];
    for name in ["wasmtime", "wapc", "wasmtime-provider"] {
        rows.push((name, lock_version(workspace, name)));
    }
    rows.push(("binaryen", command_output("wasm-opt", &["--version"])));
    rows.push(("date (UTC)", command_output("date", &["-u", "+%Y-%m-%d"])));
    let load = (!load.is_empty()).then(|| load.join(", "));
    rows.push(("load average at start (1, 5, 15 min)", load));
    let rows = rows
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value?)));
    rows.collect()
}
