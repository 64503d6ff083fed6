//! `policy-host annotate`: kwctl's `annotate.rs` and `backend.rs` (Kubewarden 1.35). The
//! metadata file is parsed and validated as policy-evaluator does, the protocol version is
//! asked of the module itself (`protocol_version` waPC call), `io.kubewarden.kwctl` names the
//! tool that annotated, `-u` becomes the `io.kubewarden.policy.usage` annotation, the host
//! capabilities the module calls are compared with metadata's `hostCapabilities` (kwctl's
//! warnings, [`crate::wasm_scanner`]), and the JSON goes into the `io.kubewarden.metadata`
//! custom section.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use crate::callbacks::HostContext;
use crate::engine::{EngineArgs, EngineOptions, Policy};
use crate::metadata::{
    self, ExecutionMode, Metadata, ProtocolVersion, ANNOTATED_BY, KWCTL_ANNOTATION,
    METADATA_SECTION, USAGE_ANNOTATION,
};
use crate::run::is_rego_policy;
use crate::wasm_scanner;

/// `annotate`'s command line, kwctl's flags.
#[derive(clap::Args, Clone, Debug)]
pub struct AnnotateArgs {
    /// File containing the metadata.
    #[arg(short = 'm', long, value_name = "PATH")]
    pub metadata_path: PathBuf,
    /// File containing the usage information of the policy.
    #[arg(short = 'u', long, value_name = "PATH")]
    pub usage_path: Option<PathBuf>,
    /// Output file.
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output_path: PathBuf,
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The policy module (.wasm).
    pub module: PathBuf,
}

/// Writes the annotated module; returns kwctl's warnings about it (for stderr).
pub fn annotate(options: &AnnotateArgs) -> Result<Vec<String>> {
    let usage = options
        .usage_path
        .as_ref()
        .map(|path| {
            std::fs::read_to_string(path).map_err(|e| anyhow!("Error reading usage file: {}", e))
        })
        .transpose()?;
    let module =
        std::fs::read(&options.module).map_err(|e| anyhow!("Error reading wasm file: {}", e))?;
    wasmparser::Validator::new()
        .validate_all(&module)
        .map_err(|e| anyhow!("Error parsing wasm module: {}", e))?;
    let detected = wasm_scanner::detect(&module)?;

    let metadata = prepare_metadata(
        &module,
        &options.metadata_path,
        usage.as_deref(),
        &options.engine.options(),
    )?;
    let warnings = wasm_scanner::mismatch_warnings(&detected, metadata.host_capabilities.as_ref());
    let annotated = metadata::set_custom_section(&module, METADATA_SECTION, &metadata.to_json()?)?;
    std::fs::write(&options.output_path, annotated)
        .with_context(|| format!("cannot write {}", options.output_path.display()))?;
    Ok(warnings)
}

fn prepare_metadata(
    module: &[u8],
    metadata_path: &Path,
    usage: Option<&str>,
    engine: &EngineOptions,
) -> Result<Metadata> {
    let file = std::fs::File::open(metadata_path)
        .map_err(|e| anyhow!("Error opening metadata file: {}", e))?;
    let mut metadata: Metadata =
        yaml_serde::from_reader(file).map_err(|e| anyhow!("Error unmarshalling metadata {}", e))?;

    let is_rego =
        is_rego_policy(module).map_err(|e| anyhow!("Rego policy type check failure: {}", e))?;
    metadata.protocol_version = Some(match metadata.execution_mode {
        ExecutionMode::Wasi => ProtocolVersion::Unknown,
        ExecutionMode::Opa | ExecutionMode::OpaGatekeeper => {
            if !is_rego {
                bail!("Wrong value inside of policy's metadata for 'executionMode'. The policy has not been created using Rego");
            }
            ProtocolVersion::Unknown
        }
        ExecutionMode::KubewardenWapc => {
            if is_rego {
                bail!("Wrong value inside of policy's metadata for 'executionMode'. This policy has been created using Rego");
            }
            protocol_version(module, engine).map_err(|e| {
                anyhow!("Error while detecting Kubewarden protocol version: {:#}", e)
            })?
        }
    });

    // As kwctl: always there (metadata.yml's own value is replaced), the usage after it.
    let annotations = metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(KWCTL_ANNOTATION.to_string(), ANNOTATED_BY.to_string());
    if let Some(usage) = usage {
        annotations.insert(USAGE_ANNOTATION.to_string(), usage.to_string());
    }

    metadata
        .validate()
        .map_err(|problems| anyhow!("Metadata is invalid: {}", problems.join("; ")))?;
    Ok(metadata)
}

/// kwctl's `kubewarden_protocol_detector`: a `protocol_version` call with an empty payload.
pub fn protocol_version(module: &[u8], engine: &EngineOptions) -> Result<ProtocolVersion> {
    let policy = Policy::from_bytes(module, engine, HostContext::offline().into_callback())?;
    let instance = policy
        .instantiate()
        .map_err(|e| anyhow!("unable to rehydrate wapc module: cannot build Wapc host: {e}"))?;
    let answer = instance
        .call("protocol_version", &[])
        .map_err(|e| anyhow!("Cannot compute ProtocolVersion used by the policy: cannot invoke 'protocol_version' waPC function : {e}"))?;
    serde_json::from_slice(&answer).map_err(|e| {
        anyhow!(
            "Cannot compute ProtocolVersion used by the policy: cannot create ProtocolVersion object from {:?}: {e}",
            String::from_utf8_lossy(&answer)
        )
    })
}
