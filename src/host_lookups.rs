//! Kubewarden's `kubernetes` host capabilities behind the [`Lookups`] trait: the request the
//! host expects and the list it answers. The call itself is a parameter: the wasm entry point
//! passes waPC's `host_call` ([`wapc_host_call`], the only code that reaches the host), native
//! tests pass a replayed cluster.

use serde::Serialize;

use crate::lookups::{ListRequest, Lookups};
use kubewarden_policy_sdk::wapc_guest;

/// Every host capability the module calls, `namespace/operation`: what metadata.yml's
/// `hostCapabilities` declares (tests/manifests.rs) and what `kwctl annotate` finds in the
/// module (e2e-tests/tests/annotate_shipped.rs). This module is the only code that calls the
/// host.
pub const HOST_CAPABILITIES: [&str; 1] = ["kubernetes/list_resources_by_namespace"];

/// The payload of Kubewarden's `kubernetes/list_resources_by_namespace` host call, field for
/// field as the SDK's `ListResourcesByNamespaceRequest` writes it: absent selectors as `null`,
/// the field masks sorted and without repeats as the SDK's `BTreeSet` writes them (lookups.rs
/// keeps its masks so; a test below holds it). The SDK's own type needs its `cluster-context`
/// feature and with it k8s-openapi, which nothing else here uses. Hosts older than Kubewarden
/// 1.33 do not know `field_masks` (their request type has no such field, and serde skips
/// unknown ones) and answer with whole objects, which the rules read the same way
/// (tests/context_aware.rs); metadata.yml's `minimumKubewardenVersion` keeps them from loading
/// the module at all.
#[derive(Serialize)]
struct ListResourcesByNamespaceRequest<'a> {
    api_version: &'a str,
    kind: &'a str,
    namespace: &'a str,
    label_selector: Option<&'a str>,
    field_selector: Option<&'a str>,
    field_masks: Option<&'a [&'a str]>,
}

/// `(binding, namespace, operation, payload) -> response`, as waPC's `host_call`.
pub struct HostLookups<F>(pub F);

/// waPC's `host_call`, errors as text.
pub(crate) fn wapc_host_call(
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
            api_version: &request.api_version,
            kind: request.kind,
            namespace: request.namespace,
            label_selector: None,
            field_selector: request.field_selector.as_deref(),
            field_masks: Some(request.field_masks),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookups::{CONFIG_FIELDS, MACHINE_POOL_FIELDS};
    use std::cell::RefCell;

    /// The bytes the host receives: the SDK's field names and order, `null` for no selector;
    /// the host's answer handed back untouched.
    #[test]
    fn list_sends_what_the_sdk_sends_and_returns_the_answer_as_it_came() {
        let sent = RefCell::new(Vec::new());
        let host = HostLookups(|binding: &str, ns: &str, op: &str, payload: &[u8]| {
            sent.borrow_mut()
                .push((format!("{binding}/{ns}/{op}"), payload.to_vec()));
            Ok(br#"{"items":[]}"#.to_vec())
        });
        let masks = ["metadata.name", "spec.template"];
        let answer = host.list(&ListRequest {
            api_version: "cluster.x-k8s.io/v1beta2".to_string(),
            kind: "MachinePool",
            namespace: "team-a",
            field_selector: None,
            field_masks: &masks,
        });
        assert_eq!(answer.unwrap(), br#"{"items":[]}"#);
        let sent = sent.into_inner();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            sent[0].0,
            "kubewarden/kubernetes/list_resources_by_namespace"
        );
        // The capability the call uses is one the module declares.
        assert_eq!(
            HOST_CAPABILITIES,
            [sent[0].0.strip_prefix("kubewarden/").unwrap()]
        );
        assert_eq!(
            String::from_utf8(sent[0].1.clone()).unwrap(),
            r#"{"api_version":"cluster.x-k8s.io/v1beta2","kind":"MachinePool","namespace":"team-a","label_selector":null,"field_selector":null,"field_masks":["metadata.name","spec.template"]}"#
        );
    }

    /// The masks travel as given, so they must be what the SDK's `BTreeSet` would send.
    #[test]
    fn the_field_masks_are_sorted_without_repeats() {
        for masks in [&MACHINE_POOL_FIELDS[..], &CONFIG_FIELDS[..]] {
            assert!(masks.windows(2).all(|w| w[0] < w[1]), "{masks:?}");
        }
    }

    #[test]
    fn a_refused_call_is_the_host_error() {
        let host = HostLookups(|_: &str, _: &str, _: &str, _: &[u8]| {
            Err("forbidden: cannot list machinepools".to_string())
        });
        let error = host
            .list(&ListRequest {
                api_version: "cluster.x-k8s.io/v1beta1".to_string(),
                kind: "MachinePool",
                namespace: "team-a",
                field_selector: Some("metadata.name=pool-a".to_string()),
                field_masks: &[],
            })
            .unwrap_err();
        assert_eq!(error, "forbidden: cannot list machinepools");
    }
}
