//! Host capabilities: the answer to the guest's `__host_call`, as policy-evaluator's
//! `runtimes/callback.rs` gives it, with kwctl's replay proxy (`callback_handler/proxy.rs`)
//! standing in for the cluster.
//!
//! Every error string below is what the guest receives from `host_call`; the texts are
//! kwctl's wherever kwctl has one.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::engine::HostCallback;
use crate::host_capabilities::HostCapabilities;
use crate::wasm_scanner::KNOWN_CAPABILITIES;

/// A request the host forwards to its (replayed) cluster. The variant and field names are
/// policy-evaluator's `CallbackRequestType`: they are the YAML tags and keys of a kwctl
/// session file, and `Debug` prints them as kwctl's replay mismatch error does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallbackRequestType {
    KubernetesListResourceNamespace {
        api_version: String,
        kind: String,
        namespace: String,
        label_selector: Option<String>,
        field_selector: Option<String>,
        field_masks: Option<BTreeSet<String>>,
    },
    KubernetesListResourceAll {
        api_version: String,
        kind: String,
        label_selector: Option<String>,
        field_selector: Option<String>,
        field_masks: Option<BTreeSet<String>>,
    },
    KubernetesGetResource {
        api_version: String,
        kind: String,
        name: String,
        namespace: Option<String>,
        disable_cache: bool,
        field_masks: Option<BTreeSet<String>>,
    },
}

/// The guest's request payloads (kubewarden-policy-sdk 0.17 `host_capabilities::kubernetes`),
/// under the names kwctl reads them with (they name them in their errors).
#[derive(Debug, Deserialize, Serialize)]
struct ListResourcesByNamespaceRequest {
    api_version: String,
    kind: String,
    namespace: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
    field_masks: Option<BTreeSet<String>>,
}

#[derive(Debug, Deserialize, Serialize)]
struct ListAllResourcesRequest {
    api_version: String,
    kind: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
    field_masks: Option<BTreeSet<String>>,
}

#[derive(Debug, Deserialize, Serialize)]
struct GetResourceRequest {
    api_version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
    disable_cache: bool,
    field_masks: Option<BTreeSet<String>>,
}

/// One entry of a kwctl session file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub struct Exchange {
    pub request: String,
    pub response: Response,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Response {
    Success { payload: String },
    Error { message: String },
}

/// A session file, parsed: each recorded request decoded up front so a bad file is reported
/// before the policy runs (kwctl would panic in the middle of the evaluation instead).
#[derive(Debug, Clone)]
pub struct Session {
    exchanges: VecDeque<(CallbackRequestType, Response)>,
}

impl Session {
    pub fn from_file(path: &Path) -> Result<Session> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "Cannot open host capabilities interactions file {}",
                path.display()
            )
        })?;
        Session::parse(&text)
            .with_context(|| format!("cannot deserialize contents of {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Session> {
        let exchanges: Vec<Exchange> = yaml_serde::from_str(text)?;
        let exchanges = exchanges
            .into_iter()
            .enumerate()
            .map(|(index, exchange)| {
                let request: CallbackRequestType = yaml_serde::from_str(&exchange.request).map_err(|e| {
                    anyhow!(
                        "exchange #{index}: the recorded request is not a Kubernetes request policy-host can replay: {e}"
                    )
                })?;
                Ok((request, exchange.response))
            })
            .collect::<Result<VecDeque<_>>>()?;
        Ok(Session { exchanges })
    }

    /// kwctl's `produce_recorded_response`.
    fn answer(&mut self, request: &CallbackRequestType) -> std::result::Result<Vec<u8>, String> {
        match self.exchanges.pop_front() {
            None => Err("the list of recorded responses is empty".to_string()),
            Some((expected, response)) => {
                if &expected == request {
                    match response {
                        Response::Success { payload } => Ok(payload.into_bytes()),
                        Response::Error { message } => Err(message),
                    }
                } else {
                    Err(format!(
                        "Replay error: unexpected request. Was expecting {expected:?}, got {request:?} instead"
                    ))
                }
            }
        }
    }
}

/// Where cluster requests go.
pub enum Cluster {
    /// `--replay-host-capabilities-interactions`.
    Replay(Session),
    /// `policy-host serve`: a real cluster, through the kube crate.
    #[cfg(feature = "serve")]
    Kube(crate::serve::kube::KubeCluster),
    /// No session: there is no cluster to ask.
    None,
}

/// What a host callback needs: the Kubernetes resources the policy may read (kwctl: the
/// module's `contextAwareResources` with `--allow-context-aware`, nothing without) and where
/// its requests go. The same context serves every instance of a run, as kwctl's one callback
/// handler does, so a session is consumed across settings validation and validation.
pub struct HostContext {
    allowed_resources: BTreeSet<(String, String)>,
    /// policy-server's `hostCapabilities` gate; `None` (kwctl) lets every capability through.
    host_capabilities: Option<HostCapabilities>,
    cluster: Mutex<Cluster>,
}

impl HostContext {
    pub fn new(
        allowed_resources: BTreeSet<(String, String)>,
        cluster: Cluster,
    ) -> Arc<HostContext> {
        Arc::new(HostContext {
            allowed_resources,
            host_capabilities: None,
            cluster: Mutex::new(cluster),
        })
    }

    /// A context as policy-server builds one from policies.yml: the policy's
    /// `contextAwareResources` and its `hostCapabilities` (an empty list denies every
    /// capability but `tracing`).
    pub fn with_host_capabilities(
        allowed_resources: BTreeSet<(String, String)>,
        host_capabilities: HostCapabilities,
        cluster: Cluster,
    ) -> Arc<HostContext> {
        Arc::new(HostContext {
            allowed_resources,
            host_capabilities: Some(host_capabilities),
            cluster: Mutex::new(cluster),
        })
    }

    /// A context that refuses every cluster request (annotate, protocol_version).
    pub fn offline() -> Arc<HostContext> {
        HostContext::new(BTreeSet::new(), Cluster::None)
    }

    pub fn into_callback(self: Arc<Self>) -> Arc<HostCallback> {
        Arc::new(
            move |binding: &str, namespace: &str, operation: &str, payload: &[u8]| {
                self.host_call(binding, namespace, operation, payload)
            },
        )
    }

    /// Exchanges of the session nobody asked for (kwctl warns about them at the end).
    pub fn leftover_exchanges(&self) -> usize {
        match &*self.lock_cluster() {
            Cluster::Replay(session) => session.exchanges.len(),
            #[cfg(feature = "serve")]
            Cluster::Kube(_) => 0,
            Cluster::None => 0,
        }
    }

    fn lock_cluster(&self) -> std::sync::MutexGuard<'_, Cluster> {
        // A panic while holding the lock cannot leave the queue half-updated.
        self.cluster
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn host_call(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> std::result::Result<Vec<u8>, String> {
        if binding != "kubewarden" {
            return Err(format!("unknown binding: {binding}"));
        }
        if let Some(capabilities) = &self.host_capabilities {
            let capability = format!("{namespace}/{operation}");
            if namespace != "tracing" && !capabilities.is_allowed(&capability) {
                return Err(format!(
                    "Policy has not been granted access to the '{capability}' host capability. The violation has been reported."
                ));
            }
        }
        match (namespace, operation) {
            ("tracing", "log") => {
                log_policy_entry(payload);
                Ok(Vec::new())
            }
            ("kubernetes", "list_resources_by_namespace") => self
                .kubernetes::<ListResourcesByNamespaceRequest>(
                    "KubernetesListResourceNamespace",
                    payload,
                ),
            ("kubernetes", "list_resources_all") => {
                self.kubernetes::<ListAllResourcesRequest>("KubernetesListResourceAll", payload)
            }
            ("kubernetes", "get_resource") => {
                self.kubernetes::<GetResourceRequest>("KubernetesGetResource", payload)
            }
            // What Kubewarden defines and policy-host does not answer (oci, net, crypto,
            // kubernetes/can_i).
            _ if KNOWN_CAPABILITIES.contains(&(namespace, operation)) => Err(format!("Callback evaluation failure: policy-host does not implement the {namespace}/{operation} host capability")),
            _ if namespace == "tracing" || KNOWN_CAPABILITIES.iter().any(|c| c.0 == namespace) => {
                Err(format!("unknown operation: {operation}"))
            }
            _ => Err(format!("unknown namespace: {namespace}")),
        }
    }

    /// A Kubernetes request: the payload read as kwctl reads it (`T`), checked against the
    /// resources the policy may read, forwarded as the `variant` of [`CallbackRequestType`]
    /// with the same fields.
    fn kubernetes<T: DeserializeOwned + Serialize>(
        &self,
        variant: &str,
        payload: &[u8],
    ) -> std::result::Result<Vec<u8>, String> {
        let request: T = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        let fields = serde_json::to_value(request).map_err(|e| e.to_string())?;
        let text = |key: &str| fields[key].as_str().unwrap_or_default();
        self.check_access(text("api_version"), text("kind"))?;
        let request = serde_json::from_value(serde_json::json!({ variant: fields }));
        self.forward(&request.map_err(|e| e.to_string())?)
    }

    fn check_access(&self, api_version: &str, kind: &str) -> std::result::Result<(), String> {
        if self
            .allowed_resources
            .contains(&(api_version.to_string(), kind.to_string()))
        {
            Ok(())
        } else {
            Err(format!(
                "Policy has not been granted access to Kubernetes {api_version}/{kind} resources. The violation has been reported."
            ))
        }
    }

    fn forward(&self, request: &CallbackRequestType) -> std::result::Result<Vec<u8>, String> {
        let mut cluster = self.lock_cluster();
        let answer = match &mut *cluster {
            Cluster::Replay(session) => session.answer(request),
            #[cfg(feature = "serve")]
            Cluster::Kube(kube) => {
                // Concurrent evaluations do not wait for each other's API calls.
                let kube = kube.clone();
                drop(cluster);
                kube.answer(request)
            }
            Cluster::None => Err(
                "kube::Client was not initialized properly: policy-host has no Kubernetes cluster; replay a kwctl session with --replay-host-capabilities-interactions"
                    .to_string(),
            ),
        };
        answer.map_err(|e| format!("Callback evaluation failure: {e}"))
    }
}

/// `tracing/log`: the SDK's structured log entry, printed on stderr like kwctl's log lines.
fn log_policy_entry(payload: &[u8]) {
    #[derive(Deserialize)]
    struct Entry {
        level: Option<String>,
        message: Option<String>,
        #[serde(flatten)]
        rest: serde_json::Map<String, serde_json::Value>,
    }
    match serde_json::from_slice::<Entry>(payload) {
        Ok(entry) => {
            let level = entry
                .level
                .unwrap_or_else(|| "info".to_string())
                .to_uppercase();
            let message = entry.message.unwrap_or_default();
            let rest = match entry.rest.is_empty() {
                true => String::new(),
                false => format!(" {}", serde_json::Value::Object(entry.rest)),
            };
            eprintln!("{level:>5} policy_log: {message}{rest}");
        }
        Err(_) => eprintln!(" INFO policy_log: {}", String::from_utf8_lossy(payload)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &str = r#"
- type: Exchange
  request: |
    !KubernetesListResourceNamespace
    api_version: cluster.x-k8s.io/v1beta2
    kind: MachinePool
    namespace: default
    label_selector: null
    field_selector: null
    field_masks: null
  response:
    type: Success
    payload: '{"apiVersion":"v1","kind":"List","items":[]}'
- type: Exchange
  request: |
    !KubernetesGetResource
    api_version: v1
    kind: Secret
    name: s
    namespace: default
    disable_cache: false
    field_masks:
    - metadata.name
  response:
    type: Error
    message: not found
"#;

    fn context() -> Arc<HostContext> {
        HostContext::new(
            BTreeSet::from([
                (
                    "cluster.x-k8s.io/v1beta2".to_string(),
                    "MachinePool".to_string(),
                ),
                ("v1".to_string(), "Secret".to_string()),
            ]),
            Cluster::Replay(Session::parse(SESSION).unwrap()),
        )
    }

    const LIST: &str = r#"{"api_version":"cluster.x-k8s.io/v1beta2","kind":"MachinePool","namespace":"default","label_selector":null,"field_selector":null,"field_masks":null}"#;

    #[test]
    fn replays_in_order() {
        let ctx = context();
        let answer = ctx.host_call(
            "kubewarden",
            "kubernetes",
            "list_resources_by_namespace",
            LIST.as_bytes(),
        );
        assert_eq!(
            answer.unwrap(),
            br#"{"apiVersion":"v1","kind":"List","items":[]}"#
        );
        let get = r#"{"api_version":"v1","kind":"Secret","name":"s","namespace":"default","disable_cache":false,"field_masks":["metadata.name"]}"#;
        let answer = ctx.host_call("kubewarden", "kubernetes", "get_resource", get.as_bytes());
        assert_eq!(
            answer.unwrap_err(),
            "Callback evaluation failure: not found"
        );
        let answer = ctx.host_call(
            "kubewarden",
            "kubernetes",
            "list_resources_by_namespace",
            LIST.as_bytes(),
        );
        assert_eq!(
            answer.unwrap_err(),
            "Callback evaluation failure: the list of recorded responses is empty"
        );
    }

    #[test]
    fn mismatch_names_both_requests() {
        let ctx = context();
        let other = LIST.replace("default", "other");
        let answer = ctx.host_call(
            "kubewarden",
            "kubernetes",
            "list_resources_by_namespace",
            other.as_bytes(),
        );
        assert_eq!(
            answer.unwrap_err(),
            "Callback evaluation failure: Replay error: unexpected request. Was expecting \
             KubernetesListResourceNamespace { api_version: \"cluster.x-k8s.io/v1beta2\", kind: \"MachinePool\", \
             namespace: \"default\", label_selector: None, field_selector: None, field_masks: None }, got \
             KubernetesListResourceNamespace { api_version: \"cluster.x-k8s.io/v1beta2\", kind: \"MachinePool\", \
             namespace: \"other\", label_selector: None, field_selector: None, field_masks: None } instead"
        );
        assert_eq!(ctx.leftover_exchanges(), 1);
    }

    #[test]
    fn refuses_undeclared_resources_and_unknown_calls() {
        let ctx = HostContext::new(BTreeSet::new(), Cluster::None);
        let answer = ctx.host_call(
            "kubewarden",
            "kubernetes",
            "list_resources_by_namespace",
            LIST.as_bytes(),
        );
        assert_eq!(
            answer.unwrap_err(),
            "Policy has not been granted access to Kubernetes cluster.x-k8s.io/v1beta2/MachinePool resources. The violation has been reported."
        );
        assert_eq!(
            ctx.host_call("other", "kubernetes", "x", b"").unwrap_err(),
            "unknown binding: other"
        );
        assert_eq!(
            ctx.host_call("kubewarden", "nope", "x", b"").unwrap_err(),
            "unknown namespace: nope"
        );
        assert_eq!(
            ctx.host_call("kubewarden", "kubernetes", "x", b"")
                .unwrap_err(),
            "unknown operation: x"
        );
        assert!(ctx
            .host_call("kubewarden", "kubernetes", "list_resources_all", b"{")
            .unwrap_err()
            .contains("EOF"));
        assert!(ctx
            .host_call(
                "kubewarden",
                "tracing",
                "log",
                br#"{"level":"info","message":"hi"}"#
            )
            .is_ok());
    }

    #[test]
    fn no_cluster_without_session() {
        let ctx = HostContext::new(
            BTreeSet::from([(
                "cluster.x-k8s.io/v1beta2".to_string(),
                "MachinePool".to_string(),
            )]),
            Cluster::None,
        );
        let answer = ctx.host_call(
            "kubewarden",
            "kubernetes",
            "list_resources_by_namespace",
            LIST.as_bytes(),
        );
        assert!(answer
            .unwrap_err()
            .starts_with("Callback evaluation failure: kube::Client was not initialized properly"));
    }

    #[test]
    fn bad_sessions_are_reported() {
        assert!(Session::parse("- type: Exchange\n  request: '!DNSLookupHost {host: x}'\n  response: {type: Success, payload: ''}\n")
            .unwrap_err()
            .to_string()
            .contains("exchange #0"));
        assert!(Session::parse("not: a list").is_err());
    }
}
