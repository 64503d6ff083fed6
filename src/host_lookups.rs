//! The only code that asks the host: Kubewarden's `kubernetes` host capabilities behind the
//! [`Lookups`] trait. Used by the wasm entry point when `contextAware` is on.

use kubewarden_policy_sdk::host_capabilities::kubernetes::ListResourcesByNamespaceRequest;
use kubewarden_policy_sdk::wapc_guest;
use serde_json::Value;

use crate::lookups::{ListRequest, Lookups};

pub struct HostLookups;

impl Lookups for HostLookups {
    fn list(&self, request: &ListRequest) -> Result<Vec<Value>, String> {
        let call = ListResourcesByNamespaceRequest {
            api_version: request.api_version.clone(),
            kind: request.kind.to_string(),
            namespace: request.namespace.to_string(),
            label_selector: None,
            field_selector: request.field_selector.clone(),
            field_masks: Some(request.field_masks.iter().map(|f| f.to_string()).collect()),
        };
        let payload = serde_json::to_vec(&call).map_err(|e| e.to_string())?;
        let response = wapc_guest::host_call(
            "kubewarden",
            "kubernetes",
            "list_resources_by_namespace",
            &payload,
        )
        .map_err(|e| e.to_string())?;
        let list: Value = serde_json::from_slice(&response)
            .map_err(|e| format!("unreadable {} list: {e}", request.kind))?;
        match list.get("items") {
            Some(Value::Array(items)) => Ok(items.clone()),
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(_) => Err(format!(
                "unreadable {} list: items is not a list",
                request.kind
            )),
        }
    }
}
