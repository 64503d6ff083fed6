//! `bench`: the suite behind `make bench`. Measures the rule engine natively and the
//! annotated module in policy-host (a fresh instance per evaluation, as policy-server), the
//! module's size and compile time, and the guest's memory; prints the report and writes it
//! into BENCHMARKS.md between its markers.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Parser;

use policy_bench::report::{render, splice, targets};
use policy_bench::suite::{profile as profile_loop, run_suite, ProfileTarget, SuiteOptions};

#[derive(Parser)]
#[command(
    name = "bench",
    about = "Benchmark the policy natively and in policy-host; write BENCHMARKS.md"
)]
struct Cli {
    /// The annotated module (what ships).
    #[arg(long, value_name = "WASM", default_value = "annotated-policy.wasm")]
    module: PathBuf,
    /// The module as cargo built it.
    #[arg(long, value_name = "WASM", default_value = "target/policy.cargo.wasm")]
    policy: PathBuf,
    /// The module after wasm-opt, before annotation.
    #[arg(long, value_name = "WASM", default_value = "policy.wasm")]
    optimized: PathBuf,
    /// The report file (its text outside the generated block is kept); `-` prints only.
    #[arg(long, value_name = "PATH", default_value = "BENCHMARKS.md")]
    output: String,
    /// The command shown in the report.
    #[arg(long, default_value = "make bench")]
    command: String,
    /// Short budgets: checks that everything runs; the numbers are rough.
    #[arg(long)]
    quick: bool,
    /// Instead of the suite, run one request (rotation, token, edit, large, sweep-KIB for
    /// the sweep's input of that size, or fleet-POOLS for the fleet row of that many
    /// MachinePools) --iterations
    /// times untimed, for a profiler: `native`, `wasm` (fresh instance + call in the host) or
    /// `perf-map` (the module with wasmtime's /tmp/perf-PID.map, to name JIT frames).
    #[arg(long, value_names = ["TARGET", "REQUEST"], num_args = 2)]
    profile: Option<Vec<String>>,
    #[arg(long, default_value_t = 1000)]
    iterations: usize,
    /// Another annotated module (the "before" of a change) measured in the same run as the
    /// shipped one: the four requests, as kube-apiserver sends them, the fleet rows, its
    /// compile time.
    #[arg(long, value_name = "WASM")]
    baseline: Option<PathBuf>,
}

fn main() -> ExitCode {
    match execute(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:?}");
            ExitCode::FAILURE
        }
    }
}

fn execute(cli: Cli) -> Result<()> {
    if let Some(profile) = &cli.profile {
        let target = match profile[0].as_str() {
            "native" => ProfileTarget::Native,
            "wasm" => ProfileTarget::Wasm,
            "perf-map" => ProfileTarget::PerfMap,
            other => bail!("--profile {other}: native, wasm or perf-map"),
        };
        return profile_loop(&cli.module, &profile[1], target, cli.iterations);
    }
    let workspace = std::env::current_dir()?;
    let options = SuiteOptions {
        annotated: cli.module,
        policy: cli.policy,
        optimized: cli.optimized,
        workspace,
        output: (cli.output != "-").then(|| PathBuf::from(&cli.output)),
        command: cli.command,
        quick: cli.quick,
        baseline: cli.baseline,
    };
    let report = run_suite(&options)?;
    let markdown = render(&report);
    println!("{markdown}");
    if let Some(path) = &options.output {
        let existing = std::fs::read_to_string(path).ok();
        std::fs::write(path, splice(existing.as_deref(), &markdown))?;
        eprintln!("bench: wrote {}", path.display());
    }
    for row in targets(&report) {
        eprintln!(
            "bench: {:<8} {} (measured: {})",
            if row.met { "met" } else { "MISSED" },
            row.target,
            row.measured
        );
    }
    Ok(())
}
