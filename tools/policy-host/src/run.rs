//! `policy-host run`: kwctl's `run` for a local module (kwctl `command/run.rs`,
//! `command/run/evaluator.rs`, `config/policy_definition.rs`, `config/pull_and_run.rs`), with
//! policy-server's handling of guest failures and timeouts (policy-evaluator
//! `runtimes/wapc/runtime.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Map, Value};

use crate::admission::{
    from_validation_response, AdmissionResponse, SettingsValidationResponse, ValidateRequest,
    ValidationResponse, TIMEOUT_MESSAGE,
};
use crate::callbacks::{Cluster, HostContext, Session};
use crate::engine::{
    self, EngineArgs, EngineOptions, Instance, Policy, CALL_INTERRUPTED, INIT_INTERRUPTED,
};
use crate::metadata::{self, ExecutionMode, Metadata, PolicyType};

/// `run`'s command line, kwctl's flags for a local module (`bench` takes them too).
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// File containing the Kubernetes admission request object in JSON format (`-` for stdin).
    #[arg(short = 'r', long, value_name = "PATH")]
    pub request_path: String,
    /// File containing the settings for this policy (YAML or JSON); wins over --settings-json.
    #[arg(short = 's', long, value_name = "PATH")]
    pub settings_path: Option<PathBuf>,
    /// JSON string containing the settings for this policy.
    #[arg(long, value_name = "VALUE")]
    pub settings_json: Option<String>,
    /// Grant access to the Kubernetes resources listed in the policy's `contextAwareResources`.
    #[arg(long)]
    pub allow_context_aware: bool,
    /// Answer the policy's host capability calls from a kwctl session file.
    #[arg(long, value_name = "FILE")]
    pub replay_host_capabilities_interactions: Option<PathBuf>,
    /// Validate a raw request (the input is given to the policy as it is).
    #[arg(long)]
    pub raw: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The policy module (.wasm).
    pub module: PathBuf,
}

impl RunArgs {
    pub fn options(&self) -> RunOptions {
        RunOptions {
            module: self.module.clone(),
            request_path: self.request_path.clone(),
            settings_path: self.settings_path.clone(),
            settings_json: self.settings_json.clone(),
            allow_context_aware: self.allow_context_aware,
            replay_session: self.replay_host_capabilities_interactions.clone(),
            raw: self.raw,
            engine: self.engine.options(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub module: PathBuf,
    /// A path, or `-` for stdin.
    pub request_path: String,
    pub settings_path: Option<PathBuf>,
    pub settings_json: Option<String>,
    pub allow_context_aware: bool,
    pub replay_session: Option<PathBuf>,
    pub raw: bool,
    pub engine: EngineOptions,
}

/// What a run produced besides the response: messages for stderr.
#[derive(Debug, Default)]
pub struct RunReport {
    /// Messages the guest sent with `__console_log`, in order.
    pub guest_logs: Vec<String>,
    pub warnings: Vec<String>,
}

/// Runs the policy on the request. `Err` is what kwctl reports as an error (non-zero exit):
/// bad input, a module that cannot be loaded, settings the policy rejects. A guest failure
/// while validating is a response (allowed: false, code 500), as in policy-server.
pub fn run(options: &RunOptions, report: &mut RunReport) -> Result<AdmissionResponse> {
    let loaded = load(options, report)?;
    let response = validate(&loaded.policy, &loaded.request, &loaded.settings);
    report.guest_logs.extend(engine::take_guest_logs());
    let leftovers = loaded.context.leftover_exchanges();
    if leftovers > 0 {
        report.warnings.push(format!(
            "Some of the recorded exchanges have not been replayed: {leftovers} left"
        ));
    }
    Ok(response)
}

/// A module loaded as `run` loads it, its settings accepted by the policy: what `run` and
/// `bench` share.
pub struct Loaded {
    pub policy: Policy,
    pub request: ValidateRequest,
    pub settings: Map<String, Value>,
    pub context: Arc<HostContext>,
}

/// Everything `run` does before validating: read the input, check the module, compile it,
/// and validate the settings on an instance of their own (invalid settings are an error).
pub fn load(options: &RunOptions, report: &mut RunReport) -> Result<Loaded> {
    let settings = read_settings(options)?;
    let request = read_request(&options.request_path)?;

    let module = std::fs::read(&options.module)
        .with_context(|| format!("cannot read policy module {}", options.module.display()))?;
    let metadata = Metadata::from_module(&module)?;
    if let Some(required) = metadata::unmet_kubewarden_version(metadata.as_ref()) {
        let running = metadata::KUBEWARDEN_VERSION;
        bail!("Policy required Kubewarden version {required} or greater. But it's running on {running}");
    }
    check_execution_mode(metadata.as_ref(), &module)?;

    let allowed_resources =
        context_aware_allowed_resources(metadata.as_ref(), options.allow_context_aware, report);
    let raw = options.raw
        || metadata
            .as_ref()
            .is_some_and(|m| m.policy_type == PolicyType::Raw);
    let request = ValidateRequest::build(&request, raw)?;

    let cluster = match &options.replay_session {
        Some(path) => Cluster::Replay(Session::from_file(path)?),
        None => Cluster::None,
    };
    let context = HostContext::new(allowed_resources, cluster);
    let policy = Policy::from_bytes(&module, &options.engine, context.clone().into_callback())
        .with_context(|| format!("cannot load policy module {}", options.module.display()))?;

    // Settings first, on an instance of their own; invalid settings end the run.
    let instance = policy
        .instantiate()
        .map_err(|e| anyhow!("unable to rehydrate wapc module: cannot build Wapc host: {e}"))?;
    let validation = validate_settings(&instance, &settings);
    report.guest_logs.extend(engine::take_guest_logs());
    if !validation.valid {
        bail!(
            "Provided settings are not valid: {}",
            validation.message.unwrap_or_default()
        );
    }
    Ok(Loaded {
        policy,
        request,
        settings,
        context,
    })
}

/// kwctl's `PolicyDefinition::from_cli`: `--settings-path` (YAML or JSON) wins over
/// `--settings-json`; settings must be an object or null.
fn read_settings(options: &RunOptions) -> Result<Map<String, Value>> {
    let value: Value = if let Some(path) = &options.settings_path {
        let file = std::fs::File::open(path)
            .map_err(|e| anyhow!("Cannot open settings file {}: {}", path.display(), e))?;
        yaml_serde::from_reader(file)
            .map_err(|e| anyhow!("Cannot parse settings file {}: {}", path.display(), e))?
    } else if let Some(json) = &options.settings_json {
        serde_json::from_str(json).map_err(|e| anyhow!("Cannot parse settings JSON: {}", e))?
    } else {
        Value::Null
    };
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        _ => Err(anyhow!("Invalid settings in CRD, not an object")),
    }
}

fn read_request(path: &str) -> Result<Value> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| anyhow!("Error reading request from stdin: {}", e))?
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| anyhow!("Error opening request file {}; {}", path, e))?
    };
    serde_json::from_str(&text).map_err(|e| anyhow!("Error parsing request file {path}: {e}"))
}

/// kwctl's `determine_execution_mode` for a module run without `--execution-mode`; this host
/// runs waPC policies only.
fn check_execution_mode(metadata: Option<&Metadata>, module: &[u8]) -> Result<()> {
    let is_rego = is_rego_policy(module)?;
    let mode = metadata.map(|m| m.execution_mode).unwrap_or_default();
    if is_rego {
        if metadata.is_none() {
            bail!("The policy has been created with Rego, please specify which Opa runtime has to be used");
        }
        if mode == ExecutionMode::KubewardenWapc || mode == ExecutionMode::Wasi {
            bail!("The policy has been created with Rego, the policy execution mode specified via CLI flag is wrong");
        }
    } else if mode == ExecutionMode::Opa || mode == ExecutionMode::OpaGatekeeper {
        bail!("The policy has not been created with Rego, the policy execution mode specified via CLI flag is wrong");
    }
    if mode != ExecutionMode::KubewardenWapc {
        bail!("policy-host runs kubewarden-wapc policies only; this module's metadata says executionMode {mode:?}");
    }
    Ok(())
}

/// kwctl's Rego heuristic: an export whose name starts with `opa_`.
pub fn is_rego_policy(module: &[u8]) -> Result<bool> {
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        if let wasmparser::Payload::ExportSection(exports) =
            payload.map_err(|e| anyhow!("cannot parse WebAssembly file: {}", e))?
        {
            for export in exports {
                let export = export
                    .map_err(|e| anyhow!("cannot parse WebAssembly export section: {}", e))?;
                if export.name.starts_with("opa_") {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// kwctl's `build_context_aware_allowed_resources` for a policy given on the command line:
/// without `--allow-context-aware` nothing, with it what the metadata declares.
fn context_aware_allowed_resources(
    metadata: Option<&Metadata>,
    allow_context_aware: bool,
    report: &mut RunReport,
) -> BTreeSet<(String, String)> {
    let declared = metadata.map(|m| metadata::resource_keys(&m.context_aware_resources));
    let declared = declared.unwrap_or_default();
    if allow_context_aware {
        if metadata.is_none() {
            report.warnings.push(
                "Policy is not annotated, access to Kubernetes resources is not allowed"
                    .to_string(),
            );
        }
        declared
    } else {
        if !declared.is_empty() {
            report.warnings.push(
                "Policy requires access to Kubernetes resources at evaluation time. During this execution the access to Kubernetes resources is denied. This can cause the policy to not behave properly".to_string(),
            );
            report.warnings.push(
                "Carefully review which types of Kubernetes resources the policy needs via the `inspect` command, then run the policy using the `--allow-context-aware` flag.".to_string(),
            );
        }
        BTreeSet::new()
    }
}

/// policy-evaluator's `validate_settings` for waPC.
pub fn validate_settings(
    instance: &Instance,
    settings: &Map<String, Value>,
) -> SettingsValidationResponse {
    let payload = Value::Object(settings.clone()).to_string();
    match instance.call("validate_settings", payload.as_bytes()) {
        Ok(response) => {
            // policy-evaluator's `WapcRuntimeError::InvalidResponseWithError`, as Debug shows it.
            serde_json::from_slice(&response).unwrap_or_else(|e| SettingsValidationResponse {
                valid: false,
                message: Some(format!("error: InvalidResponseWithError({e:?})")),
            })
        }
        Err(e) => SettingsValidationResponse {
            valid: false,
            message: Some(format!(
                "Error invoking settings validation callback: {e:?}"
            )),
        },
    }
}

/// policy-evaluator's waPC `validate`, on a fresh instance, with policy-server's answers for
/// an instance that cannot start or a deadline hit while starting.
pub fn validate(
    policy: &Policy,
    request: &ValidateRequest,
    settings: &Map<String, Value>,
) -> AdmissionResponse {
    let uid = request.uid();
    let instance = match policy.instantiate() {
        Ok(instance) => instance,
        Err(e) => {
            let error = e.to_string();
            if error.contains(INIT_INTERRUPTED) {
                return AdmissionResponse::reject(uid, TIMEOUT_MESSAGE.to_string(), 500);
            }
            return AdmissionResponse::reject(
                uid,
                format!("unable to rehydrate wapc module: cannot build Wapc host: {error}"),
                500,
            );
        }
    };
    validate_on(&instance, request, settings)
}

/// policy-evaluator's waPC `validate` on a given instance (kwctl's `bench` reuses one).
pub fn validate_on(
    instance: &Instance,
    request: &ValidateRequest,
    settings: &Map<String, Value>,
) -> AdmissionResponse {
    let uid = request.uid();
    let request_json = match serde_json::to_value(request) {
        Ok(value) => value,
        Err(e) => return AdmissionResponse::reject_internal_server_error(uid, e),
    };
    // The object a mutation is diffed against; null (absent) for DELETE.
    let request_object = match request {
        ValidateRequest::Raw(_) => Some(&request_json),
        ValidateRequest::AdmissionRequest(_) => request_json.get("object"),
    };
    let payload = json!({ "request": request, "settings": settings }).to_string();
    match instance.call("validate", payload.as_bytes()) {
        Ok(answer) => match serde_json::from_slice::<ValidationResponse>(&answer) {
            Ok(response) => from_validation_response(uid, request_object, &response)
                .unwrap_or_else(|e| {
                    AdmissionResponse::reject_internal_server_error(
                        uid,
                        format!("invalid response format: {e}"),
                    )
                }),
            Err(e) => AdmissionResponse::reject_internal_server_error(
                uid,
                format!("invalid response from policy: {e}"),
            ),
        },
        Err(e) => {
            let error = e.to_string();
            if error.contains(CALL_INTERRUPTED) {
                AdmissionResponse::reject(uid, TIMEOUT_MESSAGE.to_string(), 500)
            } else {
                AdmissionResponse::reject_internal_server_error(uid, error)
            }
        }
    }
}

/// `policy-host inspect`: the stored metadata JSON, exactly as stored.
pub fn inspect(module: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(module)
        .with_context(|| format!("cannot read policy module {}", module.display()))?;
    // Check it parses the way the evaluator reads it, then hand back the stored bytes.
    Metadata::from_module(&bytes)?;
    crate::metadata::read_custom_section(&bytes, crate::metadata::METADATA_SECTION)?.ok_or_else(
        || {
            anyhow!(
                "{}: no Kubewarden metadata (the module is not annotated)",
                module.display()
            )
        },
    )
}
