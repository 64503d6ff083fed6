//! Kubewarden's `kubernetes` host capabilities behind the [`Lookups`] trait: the request the
//! host expects and the list it answers. The call itself is a parameter: the wasm entry point
//! passes waPC's `host_call` ([`wapc_host_call`], the only code that reaches the host), native
//! tests pass a replayed cluster.

use crate::lookups::{ListRequest, Lookups};
use kubewarden_policy_sdk::host_capabilities::kubernetes::ListResourcesByNamespaceRequest;
use kubewarden_policy_sdk::wapc_guest;

/// `(binding, namespace, operation, payload) -> response`, as waPC's `host_call`.
pub struct HostLookups<F>(pub F);

/// waPC's `host_call`, errors as text.
pub fn wapc_host_call(
    binding: &str,
    namespace: &str,
    operation: &str,
    payload: &[u8],
) -> Result<Vec<u8>, String> {
    wapc_guest::host_call(binding, namespace, operation, payload).map_err(|e| e.to_string())
}

impl<F> Lookups for HostLookups<F>
where
    F: Fn(&str, &str, &str, &[u8]) -> Result<Vec<u8>, String>,
{
    fn list(&self, request: &ListRequest) -> Result<Vec<u8>, String> {
        let call = ListResourcesByNamespaceRequest {
            api_version: request.api_version.clone(),
            kind: request.kind.to_string(),
            namespace: request.namespace.to_string(),
            label_selector: None,
            field_selector: request.field_selector.clone(),
            field_masks: Some(request.field_masks.iter().map(|f| f.to_string()).collect()),
        };
        let payload = serde_json::to_vec(&call).map_err(|e| e.to_string())?;
        // The answer as it came: the rules read only what they need of it.
        (self.0)(
            "kubewarden",
            "kubernetes",
            "list_resources_by_namespace",
            &payload,
        )
    }
}
