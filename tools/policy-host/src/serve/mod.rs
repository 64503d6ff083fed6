//! `policy-host serve`: Kubewarden's policy-server for local waPC modules, with its command
//! line (`cli.rs`, `config.rs`), its policies.yml, its HTTP API (`api/`, routes `/validate`,
//! `/audit`, `/validate_raw` and `/readiness` on a port of its own), its handling of policy
//! modes, custom messages and mutations (policy-evaluator `admission_response_handler.rs`),
//! and its context-aware host calls answered from the cluster kube::Client::try_default finds.
//!
//! Not policy-server's: registry modules, signatures, policy groups, metrics, tracing
//! exporters, certificate reloading, daemon mode.

/// One line on stderr, in tracing's text layout: `<time> LEVEL policy-host serve: <message>`.
macro_rules! log {
    ($level:literal, $($arg:tt)*) => {
        eprintln!(
            "{} {:>5} policy-host serve: {}",
            $crate::serve::now(),
            $level,
            format_args!($($arg)*)
        )
    };
}

mod config;
mod http;
pub mod kube;
mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::builder::FalseyValueParser;
use clap::{ArgAction, Args};
use serde_json::{Map, Value};

use crate::callbacks::{Cluster, HostContext};
use crate::engine::{self, EngineOptions, Policy};
use crate::host_capabilities::HostCapabilities;
use crate::metadata::{
    resource_keys, unmet_kubewarden_version, ExecutionMode, Metadata, ProtocolVersion,
    KUBEWARDEN_VERSION,
};
use crate::run::validate_settings;

pub use config::PolicyMode;

/// policy-server's flags, names, defaults and environment variables (`cli.rs`).
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Log level.
    #[arg(
        long,
        value_name = "LOG_LEVEL",
        env = "KUBEWARDEN_LOG_LEVEL",
        default_value = "info",
        value_enum
    )]
    pub log_level: LogLevel,
    /// Log output format (accepted; policy-host writes text).
    #[arg(long, value_name = "LOG_FMT", env = "KUBEWARDEN_LOG_FMT", default_value = "text",
          value_parser = ["text", "json", "otlp"])]
    pub log_fmt: String,
    /// Disable colored output for logs (policy-host writes none).
    #[arg(long, env = "NO_COLOR", action = ArgAction::SetTrue, value_parser = FalseyValueParser::new())]
    pub log_no_color: bool,
    /// Bind against ADDRESS.
    #[arg(
        long = "addr",
        value_name = "BIND_ADDRESS",
        env = "KUBEWARDEN_BIND_ADDRESS",
        default_value = "0.0.0.0"
    )]
    pub address: String,
    /// Listen on PORT.
    #[arg(long, env = "KUBEWARDEN_PORT", default_value = "3000")]
    pub port: String,
    /// Expose readiness endpoint on READINESS_PROBE_PORT (plain HTTP, as policy-server).
    #[arg(long, env = "KUBEWARDEN_READINESS_PROBE_PORT", default_value = "8081")]
    pub readiness_probe_port: String,
    /// Number of evaluations run at once [default: the number of CPUs].
    #[arg(long, value_name = "WORKERS_NUMBER", env = "KUBEWARDEN_WORKERS")]
    pub workers: Option<String>,
    /// Path to an X.509 certificate file for HTTPS.
    #[arg(long, env = "KUBEWARDEN_CERT_FILE")]
    pub cert_file: Option<PathBuf>,
    /// Path to an X.509 private key file for HTTPS.
    #[arg(long, env = "KUBEWARDEN_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Path to a CA certificate file that issued the client certificate. Required to enable
    /// mTLS.
    #[arg(long, env = "KUBEWARDEN_CLIENT_CA_FILE", value_delimiter = ',')]
    pub client_ca_file: Vec<PathBuf>,
    /// YAML file holding the policies to be loaded and their settings.
    #[arg(
        long,
        value_name = "POLICIES_FILE",
        env = "KUBEWARDEN_POLICIES",
        default_value = "policies.yml"
    )]
    pub policies: PathBuf,
    /// Download path for the policies (accepted; policy-host loads file:// modules only).
    #[arg(long, env = "KUBEWARDEN_POLICIES_DOWNLOAD_DIR", default_value = ".")]
    pub policies_download_dir: PathBuf,
    /// Directory used to cache sigstore data (accepted and ignored).
    #[arg(
        long,
        env = "KUBEWARDEN_SIGSTORE_CACHE_DIR",
        default_value = "sigstore-data"
    )]
    pub sigstore_cache_dir: PathBuf,
    /// Path to a JSON Sigstore ClientTrustConfig file (accepted and ignored).
    #[arg(
        long,
        value_name = "SIGSTORE_TRUST_CONFIG_PATH",
        env = "KUBEWARDEN_SIGSTORE_TRUST_CONFIG_PATH"
    )]
    pub sigstore_trust_config: Option<PathBuf>,
    /// YAML file holding source information (accepted and ignored: no registry pulls).
    #[arg(long, env = "KUBEWARDEN_SOURCES_PATH")]
    pub sources_path: Option<PathBuf>,
    /// YAML file holding verification information (refused: policy-host verifies no
    /// signatures).
    #[arg(
        long,
        value_name = "VERIFICATION_CONFIG_PATH",
        env = "KUBEWARDEN_VERIFICATION_CONFIG_PATH"
    )]
    pub verification_path: Option<PathBuf>,
    /// Path to a Docker config.json-like path (accepted and ignored).
    #[arg(
        long,
        value_name = "DOCKER_CONFIG",
        env = "KUBEWARDEN_DOCKER_CONFIG_JSON_PATH"
    )]
    pub docker_config_json_path: Option<PathBuf>,
    /// Enable metrics (accepted and ignored).
    #[arg(long, env = "KUBEWARDEN_ENABLE_METRICS", action = ArgAction::SetTrue, value_parser = FalseyValueParser::new())]
    pub enable_metrics: bool,
    /// Always accept AdmissionReviews that target the given namespace.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "KUBEWARDEN_ALWAYS_ACCEPT_ADMISSION_REVIEWS_ON_NAMESPACE"
    )]
    pub always_accept_admission_reviews_on_namespace: Option<String>,
    /// Disable policy timeout protection.
    #[arg(long, env = "KUBEWARDEN_DISABLE_TIMEOUT_PROTECTION", action = ArgAction::SetTrue, value_parser = FalseyValueParser::new())]
    pub disable_timeout_protection: bool,
    /// Interrupt policy evaluation after the given time.
    #[arg(
        long,
        value_name = "MAXIMUM_EXECUTION_TIME_SECONDS",
        env = "KUBEWARDEN_POLICY_TIMEOUT",
        default_value = "2"
    )]
    pub policy_timeout: String,
    /// Run detached (refused: run policy-host serve in the background yourself).
    #[arg(long, env = "KUBEWARDEN_DAEMON", action = ArgAction::SetTrue, value_parser = FalseyValueParser::new())]
    pub daemon: bool,
    /// Path to the PID file, used only in daemon mode (accepted and ignored).
    #[arg(
        long,
        env = "KUBEWARDEN_DAEMON_PID_FILE",
        default_value = "policy-server.pid"
    )]
    pub daemon_pid_file: String,
    /// Daemon mode's stdout (accepted and ignored).
    #[arg(long, env = "KUBEWARDEN_DAEMON_STDOUT_FILE")]
    pub daemon_stdout_file: Option<String>,
    /// Daemon mode's stderr (accepted and ignored).
    #[arg(long, env = "KUBEWARDEN_DAEMON_STDERR_FILE")]
    pub daemon_stderr_file: Option<String>,
    /// Do not exit with an error if the Kubernetes connection fails. This will cause
    /// context-aware policies to break when there's no connection with Kubernetes.
    #[arg(long, env = "KUBEWARDEN_IGNORE_KUBERNETES_CONNECTION_FAILURE", action = ArgAction::SetTrue, value_parser = FalseyValueParser::new())]
    pub ignore_kubernetes_connection_failure: bool,
    /// Enable pprof profiling (accepted and ignored).
    #[arg(long, env = "KUBEWARDEN_ENABLE_PPROF", action = ArgAction::SetTrue, value_parser = FalseyValueParser::new())]
    pub enable_pprof: bool,
    /// Keep serving when a policy cannot be loaded: its requests are rejected with the error.
    #[arg(long, env = "KUBEWARDEN_CONTINUE_ON_ERRORS", action = ArgAction::SetTrue, value_parser = FalseyValueParser::new(), hide = true)]
    pub continue_on_errors: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// A policy of policies.yml, loaded: its module compiled and its settings accepted.
pub struct ServedPolicy {
    pub policy: Policy,
    pub settings: Map<String, Value>,
    pub mode: PolicyMode,
    pub allowed_to_mutate: bool,
    pub message: Option<String>,
}

/// Everything the handlers share.
pub struct ServerState {
    /// By policy id; an error is a policy that could not be loaded (`--continue-on-errors`).
    pub policies: BTreeMap<String, std::result::Result<ServedPolicy, String>>,
    pub always_accept_namespace: Option<String>,
    pub semaphore: tokio::sync::Semaphore,
    pub log_level: LogLevel,
}

/// The command: read the configuration, load every policy, then serve until killed.
pub fn serve(args: &ServeArgs) -> Result<()> {
    // Config::from_args, in its order.
    let addr = bind_address(&args.address, &args.port)?;
    let readiness_addr = bind_address(&args.address, &args.readiness_probe_port)?;
    let policies = config::read_policies(&args.policies)?;
    let global_timeout = if args.disable_timeout_protection {
        None
    } else {
        Some(args.policy_timeout.parse::<u64>()?)
    };
    let workers = match &args.workers {
        Some(workers) => workers
            .parse::<usize>()
            .map_err(|e| anyhow!("error parsing the number of workers: {e}"))?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    if args.verification_path.is_some() {
        bail!("policy-host serve does not verify policy signatures: drop --verification-path (or use policy-server)");
    }
    let tls = match (&args.cert_file, &args.key_file) {
        (Some(cert_file), Some(key_file)) => Some(tls::TlsFiles {
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            client_ca_files: args.client_ca_file.clone(),
        }),
        (None, None) if args.client_ca_file.is_empty() => None,
        (None, None) => {
            bail!("client CA certificate requires server certificate and key to be specified")
        }
        _ => bail!("both certificate and key must be provided together"),
    };
    if args.daemon {
        bail!("policy-host serve does not daemonize: drop --daemon and run it in the background");
    }
    let log_level = args.log_level;
    for (ignored, given) in [
        ("--enable-metrics", args.enable_metrics),
        ("--enable-pprof", args.enable_pprof),
        ("--sources-path", args.sources_path.is_some()),
        (
            "--docker-config-json-path",
            args.docker_config_json_path.is_some(),
        ),
        (
            "--sigstore-trust-config",
            args.sigstore_trust_config.is_some(),
        ),
    ] {
        if given && log_level <= LogLevel::Warn {
            log!("WARN", "{ignored} is accepted and ignored");
        }
    }

    // policy-server's main installs the process' rustls provider before any client exists.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;

    let client = match runtime.block_on(::kube::Client::try_default()) {
        Ok(client) => Some(client),
        Err(e) => {
            eprintln!("Cannot connect to Kubernetes cluster: {e}");
            if !args.ignore_kubernetes_connection_failure {
                bail!(
                    "Cannot connect to Kubernetes, context aware policies would not work properly"
                );
            }
            eprintln!(
                "Cannot connect to Kubernetes, context aware policies will not work properly"
            );
            None
        }
    };
    let cluster = kube::KubeCluster::new(client, runtime.handle().clone());

    // Outside the runtime: a host call during settings validation blocks on it.
    let loaded = load_policies(&policies, global_timeout, &cluster, args.continue_on_errors)?;
    let state = Arc::new(ServerState {
        policies: loaded,
        always_accept_namespace: args.always_accept_admission_reviews_on_namespace.clone(),
        semaphore: tokio::sync::Semaphore::new(workers.max(1)),
        log_level,
    });
    runtime.block_on(http::run(state, addr, readiness_addr, tls))
}

/// policy-server's `api_bind_address`: ADDRESS:PORT as a socket address.
fn bind_address(address: &str, port: &str) -> Result<SocketAddr> {
    format!("{address}:{port}")
        .parse()
        .map_err(|e| anyhow!("error parsing arguments: {}", e))
}

/// policy-server's `PrecompiledPolicy::new`, for a file:// module run by policy-host: the
/// metadata's execution mode, minimum Kubewarden version and protocol version checked; the
/// module's bytes.
fn precompile(module: &str) -> Result<Vec<u8>> {
    let path = config::module_path(module)?;
    let bytes = std::fs::read(&path)
        .with_context(|| format!("cannot read policy module {}", path.display()))?;
    let metadata = Metadata::from_module(&bytes)?;
    let mode = metadata
        .as_ref()
        .map(|m| m.execution_mode)
        .unwrap_or_default();
    if let Some(minimum) = unmet_kubewarden_version(metadata.as_ref()) {
        bail!(
            "Policy required Kubewarden version {minimum} but is running on {KUBEWARDEN_VERSION}"
        );
    }
    if mode == ExecutionMode::KubewardenWapc {
        match metadata.as_ref().and_then(|m| m.protocol_version) {
            Some(ProtocolVersion::V1) => {}
            Some(other) => bail!(
                "Policy uses protocol version {:?} but only V1 is supported",
                other
            ),
            None => bail!(
                "Policy is missing protocol version, which is required for KubewardenWapc execution mode"
            ),
        }
    } else {
        bail!(
            "policy-host serve runs kubewarden-wapc policies only; {module} has executionMode {mode:?}"
        );
    }
    Ok(bytes)
}

/// policy-server's bootstrap: every module first (the first failure ends the start), then
/// each policy's host capabilities and settings ("Policy settings are invalid: ..."). With
/// `continue_on_errors` a policy that fails is kept as its error.
fn load_policies(
    policies: &BTreeMap<String, config::PolicyConfig>,
    global_timeout: Option<u64>,
    cluster: &kube::KubeCluster,
    continue_on_errors: bool,
) -> Result<BTreeMap<String, std::result::Result<ServedPolicy, String>>> {
    let mut precompiled: BTreeMap<&str, std::result::Result<Arc<Vec<u8>>, String>> =
        BTreeMap::new();
    for policy in policies.values() {
        if !precompiled.contains_key(policy.module.as_str()) {
            let result = precompile(&policy.module)
                .map(Arc::new)
                .map_err(|e| format!("{e:#}"));
            if let Err(error) = &result {
                if !continue_on_errors {
                    bail!("{error}");
                }
            }
            precompiled.insert(&policy.module, result);
        }
    }

    let mut loaded = BTreeMap::new();
    for (id, policy) in policies {
        let capabilities = HostCapabilities::new(&policy.host_capabilities).map_err(|e| {
            anyhow!("bootstrap failure: invalid hostCapabilities pattern for policy {id}: {e}")
        })?;
        let module = match &precompiled[policy.module.as_str()] {
            Ok(module) => module.clone(),
            Err(e) => {
                loaded.insert(id.clone(), Err(format!("bootstrap failure: {id}: {e}")));
                continue;
            }
        };
        let served = match load_policy(id, policy, &module, capabilities, global_timeout, cluster) {
            Err(e) if !continue_on_errors => return Err(e),
            served => served.map_err(|e| e.to_string()),
        };
        loaded.insert(id.clone(), served);
    }
    Ok(loaded)
}

fn load_policy(
    id: &str,
    policy: &config::PolicyConfig,
    module: &[u8],
    capabilities: HostCapabilities,
    global_timeout: Option<u64>,
    cluster: &kube::KubeCluster,
) -> Result<ServedPolicy> {
    let context = HostContext::with_host_capabilities(
        resource_keys(&policy.context_aware_resources),
        capabilities,
        Cluster::Kube(cluster.clone()),
    );
    let timeout = policy.timeout_eval_seconds.or(global_timeout);
    let options = EngineOptions {
        timeout: timeout.map(Duration::from_secs),
        cache: true,
    };
    let compiled = Policy::from_bytes(module, &options, context.into_callback())
        .map_err(|e| anyhow!("bootstrap failure: {id}: {e:#}"))?;
    let instance = compiled
        .instantiate()
        .map_err(|e| anyhow!("WebAssembly failure: cannot rehydrate PolicyEvaluatorPre: {e}"))?;
    let validation = validate_settings(&instance, &policy.settings);
    for message in engine::take_guest_logs() {
        eprintln!(
            "{}  INFO policy console_log: policy_id={id} {message}",
            now()
        );
    }
    if !validation.valid {
        bail!(
            "Policy settings are invalid: {}",
            validation
                .message
                .unwrap_or_else(|| "no message".to_string())
        );
    }
    Ok(ServedPolicy {
        policy: compiled,
        settings: policy.settings.clone(),
        mode: policy.policy_mode,
        allowed_to_mutate: policy.allowed_to_mutate,
        message: policy.message.clone(),
    })
}

/// The time now, RFC 3339 in UTC with milliseconds, for log lines.
pub fn now() -> String {
    format!("{:.3}", jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_times_are_utc_in_milliseconds() {
        let epoch = jiff::Timestamp::from_second(951_782_400).unwrap();
        assert_eq!(format!("{epoch:.3}"), "2000-02-29T00:00:00.000Z");
        assert_eq!(now().len(), "2026-05-24T12:00:00.000Z".len());
    }

    #[test]
    fn addresses_parse_as_policy_server_parses_them() {
        assert_eq!(
            bind_address("127.0.0.1", "3000").unwrap(),
            "127.0.0.1:3000".parse().unwrap()
        );
        assert_eq!(
            bind_address("127.0.0.1", "x").unwrap_err().to_string(),
            "error parsing arguments: invalid socket address syntax"
        );
    }
}
