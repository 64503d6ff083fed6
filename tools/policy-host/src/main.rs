//! `policy-host`: run, annotate and inspect Kubewarden waPC policies like kwctl does.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use policy_host::annotate::{annotate, AnnotateArgs};
#[cfg(feature = "bench")]
use policy_host::bench::{bench, BenchArgs};
use policy_host::run::{inspect, run, RunArgs, RunReport};
#[cfg(feature = "serve")]
use policy_host::serve::{serve, ServeArgs};

#[derive(Parser)]
#[command(
    name = "policy-host",
    version,
    about = "Run, annotate and inspect Kubewarden waPC policies, as kwctl does"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a request with a policy module and print kwctl's AdmissionResponse line.
    Run(RunArgs),
    /// Embed metadata.yml (and a usage file) into a module, as `kwctl annotate`.
    Annotate(AnnotateArgs),
    /// Print the metadata JSON stored in an annotated module.
    Inspect(InspectArgs),
    /// Benchmark a policy module on a request, as `kwctl bench`.
    #[cfg(feature = "bench")]
    Bench(BenchArgs),
    /// Serve policies over HTTPS with policy-server's command line and API.
    #[cfg(feature = "serve")]
    Serve(Box<ServeArgs>),
    /// In a host built without the feature: says how to get the command.
    #[cfg(not(feature = "serve"))]
    #[command(hide = true)]
    Serve(NotBuilt),
    #[cfg(not(feature = "bench"))]
    #[command(hide = true)]
    Bench(NotBuilt),
}

/// The arguments of a command this host was built without, taken as they come.
#[cfg(any(not(feature = "bench"), not(feature = "serve")))]
#[derive(Args)]
struct NotBuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[cfg(any(not(feature = "bench"), not(feature = "serve")))]
fn not_built(command: &str, feature: &str) -> Result<()> {
    anyhow::bail!(
        "this policy-host was built without `{command}` (as `make demo` builds it): build it \
         with `make host`, or cargo's `--features {feature}`"
    )
}

#[derive(Args)]
struct InspectArgs {
    /// The annotated policy module (.wasm).
    module: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // kwctl returns its error from main: "Error: " and the Debug form (causes listed).
            eprintln!("Error: {error:?}");
            ExitCode::FAILURE
        }
    }
}

/// What the guest logged and what the host warned about, on stderr as kwctl prints them.
fn print_report(report: &RunReport) {
    for message in &report.guest_logs {
        eprintln!(" INFO policy console_log: {message}");
    }
    for warning in &report.warnings {
        eprintln!(" WARN policy-host: {warning}");
    }
}

fn execute(command: Command) -> Result<()> {
    match command {
        Command::Run(args) => {
            let mut report = RunReport::default();
            let result = run(&args.options(), &mut report);
            print_report(&report);
            let response = result?;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", response.to_line())?;
            stdout.flush()?;
            Ok(())
        }
        Command::Annotate(args) => {
            for warning in annotate(&args)? {
                eprintln!(" WARN policy-host: {warning}");
            }
            Ok(())
        }
        #[cfg(feature = "bench")]
        Command::Bench(args) => {
            let mut report = RunReport::default();
            let result = bench(&args, &mut report);
            print_report(&report);
            result
        }
        #[cfg(not(feature = "bench"))]
        Command::Bench(_) => not_built("bench", "bench"),
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve(&args),
        #[cfg(not(feature = "serve"))]
        Command::Serve(_) => not_built("serve", "serve"),
        Command::Inspect(args) => {
            let json = inspect(&args.module)?;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&json)?;
            writeln!(stdout)?;
            stdout.flush()?;
            Ok(())
        }
    }
}
