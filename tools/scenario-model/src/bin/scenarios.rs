//! `scenarios --module annotated-policy.wasm e2e-tests/scenarios [--kwctl PATH | --host PATH]`:
//! runs every scenario through kwctl or policy-host and prints a table (`make demo`); exits
//! non-zero if an expectation fails. Builds no evaluator: it starts the one it is given.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Parser;

use scenario_model::runner::{render_table, run_all, Evaluator};

#[derive(Parser)]
#[command(
    name = "scenarios",
    about = "Run the policy's end-to-end scenarios and print a table"
)]
struct Cli {
    /// The annotated policy module.
    #[arg(long, value_name = "WASM")]
    module: PathBuf,
    /// The policy-host binary (default: $POLICY_HOST, else the one next to this program).
    #[arg(long, value_name = "PATH")]
    host: Option<PathBuf>,
    /// Run the scenarios through this kwctl binary instead of policy-host (default: $KWCTL).
    #[arg(long, value_name = "PATH")]
    kwctl: Option<PathBuf>,
    /// Runs at a time (default: the number of CPUs).
    #[arg(long)]
    jobs: Option<usize>,
    /// Table width (default: $COLUMNS, else 120).
    #[arg(long)]
    width: Option<usize>,
    /// The directory holding one directory per scenario.
    #[arg(value_name = "SCENARIOS_DIR")]
    dir: PathBuf,
}

fn main() -> ExitCode {
    match execute(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("Error: {error:?}");
            ExitCode::FAILURE
        }
    }
}

/// An environment variable naming a program; empty is unset (`make demo KWCTL=` exports
/// `KWCTL` empty).
fn program_from_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

fn execute(cli: Cli) -> Result<bool> {
    // A flag wins over the environment; kwctl over policy-host.
    let evaluator = if let Some(kwctl) = &cli.kwctl {
        Evaluator::kwctl(kwctl)
    } else if let Some(host) = &cli.host {
        Evaluator::policy_host(host)
    } else if let Some(kwctl) = program_from_env("KWCTL") {
        Evaluator::kwctl(kwctl)
    } else if let Some(host) = program_from_env("POLICY_HOST") {
        Evaluator::policy_host(host)
    } else {
        let exe = std::env::current_exe()?;
        let host = exe.with_file_name(format!("policy-host{}", std::env::consts::EXE_SUFFIX));
        if !host.is_file() {
            bail!(
                "{} not found; build it (make host), pass --host, or pass --kwctl",
                host.display()
            );
        }
        Evaluator::policy_host(host)
    };
    let jobs = cli
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let width = cli
        .width
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .unwrap_or(120);
    let results = run_all(&evaluator, &cli.dir, &cli.module, jobs)?;
    if results.is_empty() {
        bail!("no scenario in {}", cli.dir.display());
    }
    println!(
        "{} scenarios in {}, run through {} ({})\n",
        results.len(),
        cli.dir.display(),
        evaluator.name(),
        evaluator.program.display()
    );
    print!("{}", render_table(&results, width));
    Ok(results.iter().all(|r| r.passed()))
}
