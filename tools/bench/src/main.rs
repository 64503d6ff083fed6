//! `bench`: the suite behind `make bench`. Measures the rule engine natively and the
//! annotated module in policy-host (a fresh instance per evaluation, as policy-server), the
//! module's size and compile time, and the guest's memory; prints the report and writes it
//! into docs/performance.md between its markers.

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use policy_bench::report::{render, splice, targets};
use policy_bench::suite::{profile, run_suite, Options};

fn main() -> ExitCode {
    match execute(Options::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:?}");
            ExitCode::FAILURE
        }
    }
}

fn execute(options: Options) -> Result<()> {
    if let Some([target, request]) = options.profile.as_deref() {
        return profile(&options.module, request, target, options.iterations);
    }
    let report = run_suite(&options)?;
    let markdown = render(&report);
    println!("{markdown}");
    if options.output != "-" {
        let existing = std::fs::read_to_string(&options.output).ok();
        std::fs::write(&options.output, splice(existing.as_deref(), &markdown))?;
        eprintln!("bench: wrote {}", options.output);
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
