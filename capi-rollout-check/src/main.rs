//! `capi-rollout-check`: the policy's verdicts on a change to Git-kept manifests, before it
//! reaches a cluster. Each object that differs between `--base` and `--head` becomes the
//! AdmissionRequest the API server would send, judged by the policy's own engine with lookups
//! served from the manifests.
//!
//! Exit codes: 0 nothing rejected (warnings allowed), 1 something would be rejected, 2 the input
//! or the settings could not be read. The `settings` subcommand checks a policy manifest's
//! settings before `kubectl apply` (settings_check.rs), `rotate` does a rotation (rotate/),
//! `roll` replaces a MachinePool's instances that predate its bootstrap data (roll/), `drift`
//! finds the pools whose instances run older bootstrap data (the library's drift/).

mod check;
use capi_rollout_check::cluster;
#[cfg(test)]
use capi_rollout_check::fake;
mod interrupt;
mod lookups;
mod manifests;
mod report;
mod roll;
mod rotate;
mod settings_check;

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
                  usage error.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The manifests as they are now: a file, a directory (recursive: *.yaml, *.yml, *.json),
    /// or - for stdin.
    #[arg(long, value_name = "PATH", required = true)]
    base: Option<String>,
    /// The manifests as the change leaves them: a file, a directory, or - for stdin.
    #[arg(long, value_name = "PATH", required = true)]
    head: Option<String>,
    /// The policy's settings, YAML or JSON (the keys of the policy's `settings`; a Kubewarden
    /// policy manifest is read for its spec.settings). contextAware is always on.
    #[arg(long, value_name = "FILE")]
    settings: Option<String>,
    /// The report's form.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Do the rotation the policy asks for: a new config under the name its refusal suggests,
    /// and the pool's configRef pointed at it, in a cluster or in the repository's manifests.
    #[command(
        after_help = "Exit codes: 0 rotated (and, in a cluster, taken up by CAPI; or a dry run), 1 the \
                      edit changes nothing, nothing created (never with --reissue), 2 an error, nothing changed, 3 rotated, \
                      CAPI had not taken the new config up (or CAPA's instance refresh had not \
                      ended) within --timeout. With --replace-instances, roll's codes once the \
                      rotation is done (3: a step timed out, 4: another roll holds the pool, 130: \
                      interrupted; re-run roll).\n\n\
                      In a cluster:  capi-rollout-check rotate machinepool/pool-1 -n fleet -f pool-1-a.yaml\n\
                      \x20             capi-rollout-check rotate machinepool/pool-1 -n fleet --edit\n\
                      \x20             capi-rollout-check rotate machinepool/pool-1 -n fleet --reissue\n\
                      In Git:        capi-rollout-check rotate --manifests clusters/prod -f edited/pool-1-a.yaml --write"
    )]
    Rotate(RotateArgs),
    /// Replace a MachinePool's instances launched before its current bootstrap data Secret,
    /// where the infrastructure provider does not (CAPZ's AzureMachinePool, CAPD): delete their
    /// Machines up to maxUnavailable at a time, never below replicas minus maxUnavailable Ready
    /// (both read again before each delete), each step waiting for the replacements to be Ready.
    /// One roll per pool (a Lease in its namespace). A re-run goes on where a stopped one left off.
    #[command(
        after_help = "Exit codes: 0 every Machine launched before the data Secret replaced (or none \
                      was; or a dry run; or the provider replaces them itself, or never reads \
                      bootstrap data), 1 roll cannot replace them on this infrastructure (the \
                      output says how), 2 an error (nothing deleted by the failing step), 3 a \
                      step's --timeout passed, 4 another roll holds the pool's Lease, 130 \
                      interrupted (Ctrl-C): re-run the same command to go on.\n\n\
                      Example:  capi-rollout-check roll machinepool/pool-1 -n fleet --dry-run"
    )]
    Roll(RollArgs),
    /// Validate the settings of Kubewarden policy manifests (policy.yaml) with the policy's own
    /// validate_settings, before kubectl apply: each problem with its file, line and key.
    #[command(
        after_help = "Exit codes: 0 every policy's settings are valid, 1 a policy's settings are \
                      invalid, 2 a file cannot be read, no file holds a policy of the module, or a \
                      usage error.\n\n\
                      Example:  capi-rollout-check settings policy.yaml\n\
                      \x20         kustomize build deploy/ | capi-rollout-check settings -"
    )]
    Settings(SettingsArgs),
    /// Find the MachinePools, MachineDeployments and MachineSets whose instances run older
    /// bootstrap data than their config or template says (read-only but for --apply): the
    /// verdict, what made it, and the fix to run.
    #[command(
        after_help = "Exit codes: 0 nothing is stale (with --apply: the Reports were written), 1 an \
                      object is stale, 2 an error (kubectl, an object or namespace not found, a \
                      usage error).\n\n\
                      Examples:  capi-rollout-check drift -n fleet\n\
                      \x20          capi-rollout-check drift -A -o json\n\
                      \x20          capi-rollout-check drift machinepool/pool-1 machinedeployment/md-0 -n fleet\n\
                      \x20          capi-rollout-check drift -A -o report --apply"
    )]
    Drift(DriftArgs),
}

#[derive(clap::Args, Debug)]
struct DriftArgs {
    /// Only these (machinepool/NAME, machinedeployment/NAME, machineset/NAME), in the namespace
    /// of -n (or the context's); none: every one of every kind.
    #[arg(value_name = "TYPE/NAME")]
    objects: Vec<String>,
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
    all_namespaces: bool,
    #[arg(long)]
    context: Option<String>,
    #[arg(long)]
    kubeconfig: Option<String>,
    /// The kubectl to run (default: $KUBECTL, else kubectl on PATH).
    #[arg(long)]
    kubectl: Option<String>,
    /// table (for people), json (for tools: docs/drift.md has the schema), or report (an
    /// openreports.io/v1alpha1 Report per namespace, for kubectl apply).
    #[arg(short = 'o', long, value_enum, default_value_t = DriftOutput::Table)]
    output: DriftOutput,
    /// With -o report: write the Reports (server-side apply), and delete those drift wrote
    /// before in namespaces of the scope that no longer have an object.
    #[arg(long)]
    apply: bool,
    /// The time to judge at (RFC 3339), instead of the clock: for reproducible output.
    #[arg(long, hide = true, value_parser = parse_time)]
    now: Option<i64>,
}

fn parse_time(text: &str) -> std::result::Result<i64, String> {
    capi_rollout_check::drift::time::parse(text)
        .ok_or_else(|| format!("{text:?}: an RFC 3339 time, e.g. 2026-12-06T02:40:00Z"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DriftOutput {
    Table,
    Json,
    Report,
}

#[derive(clap::Args, Debug)]
struct SettingsArgs {
    /// Manifest files (multi-document YAML or JSON, Lists), or - for stdin. Every
    /// ClusterAdmissionPolicy and AdmissionPolicy of policies.kubewarden.io (and every policy of
    /// a ClusterAdmissionPolicyGroup or AdmissionPolicyGroup) running this policy is checked;
    /// other documents are skipped.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<String>,
    /// Which policies are this one: those whose spec.module contains this text (a local
    /// module, e.g. file:///policies/capi.wasm, needs --module capi).
    #[arg(long, value_name = "TEXT", default_value = settings_check::DEFAULT_MODULE)]
    module: String,
    /// The report's form.
    #[arg(long, value_enum, default_value_t = SettingsOutput::Text)]
    output: SettingsOutput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SettingsOutput {
    /// A line per document: checked (valid, or the policy's message) or skipped.
    Text,
    /// One JSON list of {file, line, document, object, state, message, suggestions}.
    Json,
    /// GitHub Actions workflow commands: ::error on the line of each invalid setting.
    Github,
}

#[derive(clap::Args, Debug)]
struct RotateArgs {
    /// The MachinePool (machinepool/NAME), or the MachineDeployment or MachineSet of a
    /// template (machinedeployment/NAME, machineset/NAME). In a cluster only.
    #[arg(
        value_name = "TYPE/NAME",
        required_unless_present = "manifests",
        conflicts_with = "manifests"
    )]
    consumer: Option<String>,
    /// The config (or template) as you want it: its manifest, or - for stdin.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        required_unless_present_any = ["edit", "reissue"]
    )]
    filename: Option<String>,
    /// Open $KUBE_EDITOR or $EDITOR on the current config instead of -f, as kubectl edit does.
    #[arg(long, conflicts_with_all = ["filename", "manifests"])]
    edit: bool,
    /// Rotate the config (a MachinePool's) or template (a MachineDeployment's or MachineSet's)
    /// to a fresh name with the same spec (what --edit opens, unchanged), so that instances
    /// take data rendered from it as it is: `drift`'s fix for an edit that reached no instance.
    /// A MachineDeployment then rolls out.
    #[arg(long, conflicts_with_all = ["filename", "edit", "manifests"])]
    reissue: bool,
    /// GitOps: the repository's manifests as they are (a directory or file). The new config's
    /// file and the repointed pools' are printed, or written with --write.
    #[arg(long, value_name = "PATH")]
    manifests: Option<String>,
    /// With --manifests: write the files instead of printing them.
    #[arg(long, requires = "manifests")]
    write: bool,
    #[arg(short = 'n', long, conflicts_with = "manifests")]
    namespace: Option<String>,
    #[arg(long, conflicts_with = "manifests")]
    context: Option<String>,
    #[arg(long, conflicts_with = "manifests")]
    kubeconfig: Option<String>,
    /// none, client (print what would be done), or server (every write sent as a dry run).
    #[arg(long = "dry-run", value_enum, default_value_t = cluster::DryRun::None, conflicts_with = "manifests")]
    dry_run: cluster::DryRun,
    /// How long to wait for CAPI to take the new config up, and then for each step of what
    /// follows (seconds, or with s/m); 0: do not wait.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// A MachinePool whose provider replaces no instance (CAPZ, CAPD): once CAPI has taken the
    /// new config up, replace the existing instances as `roll` does.
    #[arg(long, conflicts_with = "manifests")]
    replace_instances: bool,
    /// A MachineDeployment: follow the roll-out CAPI starts until every Machine is on the new
    /// template and Ready (within --timeout).
    #[arg(long, conflicts_with = "manifests")]
    wait: bool,
    /// The kubectl to run (default: $KUBECTL, else kubectl on PATH).
    #[arg(long)]
    kubectl: Option<String>,
    /// The policy's settings, as for the check (its kinds and non-compared paths).
    #[arg(long, value_name = "FILE")]
    settings: Option<String>,
}

#[derive(clap::Args, Debug)]
struct RollArgs {
    /// The MachinePool: machinepool/NAME.
    #[arg(value_name = "machinepool/NAME")]
    pool: String,
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    #[arg(long)]
    context: Option<String>,
    #[arg(long)]
    kubeconfig: Option<String>,
    /// Print the plan (which Machines, in which order, the Ready floor) and delete nothing.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// How long each step may wait: for enough Ready Machines before a delete, and for the
    /// replacement to be Ready after it (seconds, or with s/m).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// The kubectl to run (default: $KUBECTL, else kubectl on PATH).
    #[arg(long)]
    kubectl: Option<String>,
    /// Take over the pool's Lease when it lapsed: a roll that stopped without releasing it
    /// (killed, or the API server out of reach as it stopped). Never a Lease still renewed.
    #[arg(long = "take-over")]
    take_over: bool,
}

fn kubectl(
    program: Option<&String>,
    kubeconfig: Option<&String>,
    context: Option<&String>,
) -> cluster::Kubectl {
    cluster::Kubectl {
        program: program
            .cloned()
            .or_else(|| std::env::var("KUBECTL").ok())
            .unwrap_or_else(|| "kubectl".into()),
        kubeconfig: kubeconfig.cloned(),
        context: context.cloned(),
        detached: true,
    }
}

fn run_roll(args: &RollArgs) -> ExitCode {
    let cluster = kubectl(
        args.kubectl.as_ref(),
        args.kubeconfig.as_ref(),
        args.context.as_ref(),
    );
    interrupt::catch();
    let request = roll::Request {
        pool: &args.pool,
        namespace: args.namespace.as_deref(),
        dry_run: args.dry_run,
        timeout: args.timeout,
        interval: std::time::Duration::from_secs(2),
        interrupted: &interrupt::interrupted,
        take_over: args.take_over,
    };
    match roll::roll(&cluster, &request, &mut std::io::stdout()) {
        Ok(rolled) => ExitCode::from(rolled.exit_code()),
        Err(e) => {
            eprintln!("capi-rollout-check roll: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn parse_duration(text: &str) -> std::result::Result<std::time::Duration, String> {
    let (number, unit) = match text.strip_suffix('m') {
        Some(n) => (n, 60),
        None => (text.strip_suffix('s').unwrap_or(text), 1),
    };
    number
        .parse::<u64>()
        .map(|n| std::time::Duration::from_secs(n * unit))
        .map_err(|_| format!("{text:?}: a duration is seconds, or a number with s or m"))
}

/// Runs `$KUBE_EDITOR` (or `$EDITOR`, else vi) on `text` in a temporary file, as kubectl edit
/// does, and returns what was saved.
fn run_editor(text: &str) -> std::result::Result<String, String> {
    let editor = std::env::var("KUBE_EDITOR")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".to_string());
    let path =
        std::env::temp_dir().join(format!("capi-rollout-rotate-{}.yaml", std::process::id()));
    fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("{editor} \"$1\""), "sh"])
        .arg(&path)
        .status()
        .map_err(|e| format!("cannot run the editor {editor:?}: {e}"));
    let saved =
        fs::read_to_string(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()));
    let _ = fs::remove_file(&path);
    match status? {
        s if s.success() => saved,
        s => Err(format!(
            "the editor {editor:?} exited with {s}: nothing was changed"
        )),
    }
}

fn read_input(path: &str) -> Result<String> {
    if path == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("stdin: cannot read")?;
        return Ok(text);
    }
    fs::read_to_string(path).with_context(|| format!("{path}: cannot read"))
}

fn run_rotate(args: &RotateArgs) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display, code: u8| {
        eprintln!("capi-rollout-check rotate: {e}");
        ExitCode::from(code)
    };
    let settings = match load_settings(args.settings.as_deref()) {
        Ok(s) => s,
        Err(e) => return fail(&format!("{e:#}"), rotate::EXIT_ERROR),
    };
    let edited_text = match args.filename.as_deref().map(read_input).transpose() {
        Ok(t) => t,
        Err(e) => return fail(&format!("{e:#}"), rotate::EXIT_ERROR),
    };
    let source = args.filename.clone().unwrap_or_default();
    if let Some(manifests) = &args.manifests {
        let text = edited_text.unwrap_or_default();
        let change = match rotate::gitops::rotate_manifests(&settings, manifests, &text, &source) {
            Ok(c) => c,
            Err(e) => return fail(&e, e.exit_code()),
        };
        for file in &change.files {
            let state = if file.created { "new" } else { "changed" };
            if args.write {
                if let Err(e) = fs::write(&file.path, &file.text) {
                    return fail(
                        &format!("{}: cannot write: {e}", file.path.display()),
                        rotate::EXIT_ERROR,
                    );
                }
                println!("wrote {} ({state}): {}", file.path.display(), file.what);
            } else {
                println!(
                    "# {} ({state}): {}\n{}",
                    file.path.display(),
                    file.what,
                    file.text
                );
            }
        }
        for note in &change.notes {
            println!("left for you: {note}");
        }
        println!(
            "the policy's answer to the edit made in place: {}",
            change.plan.refusal
        );
        return ExitCode::SUCCESS;
    }
    let mut cluster = kubectl(
        args.kubectl.as_ref(),
        args.kubeconfig.as_ref(),
        args.context.as_ref(),
    );
    // Ctrl-C is caught only where roll's steps check it; a plain rotation stops at once.
    cluster.detached = args.replace_instances;
    if args.replace_instances {
        interrupt::catch();
    }
    let edited = match edited_text {
        Some(text) => rotate::Edited::Manifest { text, source },
        None if args.reissue => rotate::Edited::Reissue {
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
        },
        None => rotate::Edited::Editor(Box::new(run_editor)),
    };
    let request = rotate::Request {
        consumer: args.consumer.as_deref().unwrap_or_default(),
        namespace: args.namespace.as_deref(),
        edited,
        dry_run: args.dry_run,
        timeout: args.timeout,
        replace_instances: args.replace_instances,
        wait: args.wait,
        interrupted: &interrupt::interrupted,
    };
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match rotate::rotate(&cluster, &settings, &request, &mut out, &mut err) {
        Ok(rotate::Done::NotYetRolled) => ExitCode::from(rotate::EXIT_NOT_YET_ROLLED),
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(&e, e.exit_code()),
    }
}

fn run_drift(args: &DriftArgs) -> ExitCode {
    use capi_rollout_check::drift::{self, kube, render};
    let kubectl = cluster::Kubectl {
        program: args
            .kubectl
            .clone()
            .or_else(|| std::env::var("KUBECTL").ok())
            .unwrap_or_else(|| "kubectl".into()),
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        detached: false,
    };
    let mut cluster_flags = String::new();
    if let Some(k) = &args.kubeconfig {
        cluster_flags.push_str(&format!(" --kubeconfig {k}"));
    }
    if let Some(c) = &args.context {
        cluster_flags.push_str(&format!(" --context {c}"));
    }
    let now = args.now.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    });
    let request = kube::Request {
        scope: if args.all_namespaces {
            kube::Scope::All
        } else {
            kube::Scope::Namespace(args.namespace.clone())
        },
        objects: &args.objects,
        now,
        cluster_flags,
    };
    if args.apply && args.output != DriftOutput::Report {
        eprintln!("capi-rollout-check drift: --apply writes the Reports of -o report");
        return ExitCode::from(drift::EXIT_ERROR);
    }
    match kube::drift(&kubectl, &request) {
        Ok(report) => {
            match args.output {
                DriftOutput::Table => print!("{}", render::table(&report)),
                DriftOutput::Json => print!("{}", render::json(&report)),
                // The findings are in the Reports written: a CronJob's run succeeded.
                DriftOutput::Report if args.apply => {
                    return match kube::apply_reports(&kubectl, &request, &report) {
                        Ok(lines) => {
                            lines.iter().for_each(|l| println!("{l}"));
                            ExitCode::SUCCESS
                        }
                        Err(e) => {
                            eprintln!("capi-rollout-check drift: {e}");
                            ExitCode::from(drift::EXIT_ERROR)
                        }
                    };
                }
                DriftOutput::Report => {
                    let namespaces = kube::report_namespaces(&request, &report);
                    print!(
                        "{}",
                        drift::reports::yaml(&drift::reports::reports(&report, &namespaces))
                    );
                }
            }
            if report.count(drift::analysis::Verdict::Stale) > 0 {
                ExitCode::from(drift::EXIT_STALE)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("capi-rollout-check drift: {e}");
            ExitCode::from(drift::EXIT_ERROR)
        }
    }
}

fn run_settings(args: &SettingsArgs) -> ExitCode {
    let github = args.output == SettingsOutput::Github;
    let mut outcome = settings_check::Outcome::default();
    for file in &args.files {
        if let Err(e) = settings_check::check_file(file, &args.module, &mut outcome) {
            return input_error(
                &anyhow::Error::new(e),
                github,
                "capi-rollout-check settings",
            );
        }
    }
    if outcome.checked() == 0 {
        let e = anyhow::anyhow!(
            "no Kubewarden policy whose spec.module contains {:?} in {} ({} document{} skipped); \
             --module names another module reference",
            args.module,
            args.files
                .iter()
                .map(|f| if f == "-" { manifests::STDIN } else { f })
                .collect::<Vec<_>>()
                .join(", "),
            outcome.entries.len(),
            if outcome.entries.len() == 1 { "" } else { "s" }
        );
        return input_error(&e, github, "capi-rollout-check settings");
    }
    let text = match args.output {
        SettingsOutput::Text => settings_check::text(&outcome),
        SettingsOutput::Json => settings_check::json(&outcome),
        SettingsOutput::Github => settings_check::github(&outcome),
    };
    print!("{text}");
    if outcome.invalid() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Exit code 2 for unreadable input: the error on stderr, and as an annotation (on its file
/// and line when known) for --output github.
fn input_error(e: &anyhow::Error, github: bool, program: &str) -> ExitCode {
    eprintln!("{program}: {e:#}");
    if github {
        let at = match e.downcast_ref::<InputError>() {
            Some(InputError {
                file,
                line: Some(line),
                ..
            }) => report::position(file, Some(*line)),
            _ => String::new(),
        };
        println!(
            "::error {at}title={program}::{}",
            report::escape_data(&format!("{e:#}"))
        );
    }
    ExitCode::from(2)
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
    let (Some(base_path), Some(head_path)) = (cli.base.as_deref(), cli.head.as_deref()) else {
        bail!("--base and --head are both needed");
    };
    if base_path == "-" && head_path == "-" {
        bail!("only one of --base and --head may be - (stdin)");
    }
    let settings = load_settings(cli.settings.as_deref())?;
    let base = ManifestSet::load(base_path)?;
    let head = ManifestSet::load(head_path)?;
    let result = check::check(&settings, &base, &head);
    let text = match cli.output {
        Output::Text => report::text(&result, base_path, head_path),
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
    match &cli.command {
        Some(Command::Rotate(args)) => return run_rotate(args),
        Some(Command::Settings(args)) => return run_settings(args),
        Some(Command::Roll(args)) => return run_roll(args),
        Some(Command::Drift(args)) => return run_drift(args),
        None => {}
    }
    match run(&cli) {
        Ok(code) => code,
        Err(e) => input_error(&e, cli.output == Output::Github, "capi-rollout-check"),
    }
}
