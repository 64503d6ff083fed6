//! `capi-rollout-check`: the policy's verdicts on a change to Git-kept manifests, before it
//! reaches a cluster. Each object that differs between `--base` and `--head` becomes the
//! AdmissionRequest the API server would send, judged by the policy's own engine with lookups
//! served from the manifests.
//!
//! Exit codes: 0 nothing rejected (warnings allowed), 1 something would be rejected, 2 the input
//! or the settings could not be read.

mod check;
mod lookups;
mod manifests;
mod report;

use std::fs;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use capi_bootstrap_rollout_policy::settings::Settings;
use clap::{Parser, ValueEnum};
use serde_json::Value;

use crate::manifests::{InputError, ManifestSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    /// A readable report.
    Text,
    /// One JSON document: the list of judged changes.
    Json,
    /// GitHub Actions workflow commands (::error / ::warning) on the head files.
    Github,
}

/// The capi-bootstrap-rollout-policy verdicts on the difference between two manifest sets.
#[derive(Parser, Debug)]
#[command(
    name = "capi-rollout-check",
    version,
    about,
    long_about = None,
    after_help = "Exit codes: 0 nothing would be rejected (warnings allowed), 1 a change would be \
                  rejected, 2 unreadable input or settings (file, line and document named), or a \
                  usage error."
)]
struct Cli {
    /// The manifests as they are now: a file, a directory (recursive: *.yaml, *.yml, *.json),
    /// or - for stdin.
    #[arg(long, value_name = "PATH")]
    base: String,
    /// The manifests as the change leaves them: a file, a directory, or - for stdin.
    #[arg(long, value_name = "PATH")]
    head: String,
    /// The policy's settings, YAML or JSON (the keys of the policy's `settings`; a Kubewarden
    /// policy manifest is read for its spec.settings). contextAware is always on.
    #[arg(long, value_name = "FILE")]
    settings: Option<String>,
    /// The report's form.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

fn load_settings(path: Option<&str>) -> Result<Settings> {
    let mut value = match path {
        None => Value::Null,
        Some(path) => {
            let text = fs::read_to_string(path).with_context(|| format!("{path}: cannot read"))?;
            let yaml: yaml_serde::Value = yaml_serde::from_str(&text)
                .with_context(|| format!("{path}: the settings are not valid YAML or JSON"))?;
            serde_json::to_value(yaml)
                .with_context(|| format!("{path}: the settings are not representable as JSON"))?
        }
    };
    // A Kubewarden policy manifest: its spec.settings.
    let is_policy = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v.starts_with("policies.kubewarden.io/"));
    if is_policy {
        value = value
            .pointer("/spec/settings")
            .cloned()
            .unwrap_or(Value::Null);
    }
    let mut settings = Settings::from_value(&value)
        .map_err(|e| anyhow::anyhow!("{}: invalid settings: {e}", path.unwrap_or("--settings")))?;
    // The manifests' MachinePools are the lookups: "in use" means referenced by one of them.
    settings.context_aware = true;
    Ok(settings)
}

fn run(cli: &Cli) -> Result<ExitCode> {
    if cli.base == "-" && cli.head == "-" {
        bail!("only one of --base and --head may be - (stdin)");
    }
    let settings = load_settings(cli.settings.as_deref())?;
    let base = ManifestSet::load(&cli.base)?;
    let head = ManifestSet::load(&cli.head)?;
    let result = check::check(&settings, &base, &head);
    let text = match cli.output {
        Output::Text => report::text(&result, &cli.base, &cli.head),
        Output::Json => report::json(&result),
        Output::Github => report::github(&result),
    };
    print!("{text}");
    Ok(if result.rejected() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("capi-rollout-check: {e:#}");
            if cli.output == Output::Github {
                let at = match e.downcast_ref::<InputError>() {
                    Some(InputError {
                        file,
                        line: Some(line),
                        ..
                    }) => report::position(file, Some(*line)),
                    _ => String::new(),
                };
                println!(
                    "::error {at}title=capi-rollout-check::{}",
                    report::escape_data(&format!("{e:#}"))
                );
            }
            ExitCode::from(2)
        }
    }
}
