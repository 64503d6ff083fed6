//! The policy's [`Lookups`] served from the two manifest sets instead of a cluster, so the
//! context-aware rules derive "in use" from the manifests: a config is in use when a
//! MachinePool of the manifests references it in its configRef.
//!
//! The sets describe two states, and a GitOps tool applies the difference in an order nobody
//! controls, then prunes what head removed. Lookups answer with the state that matters for the
//! request being judged:
//!
//! - MachinePools, for a config DELETE ([`View::Final`]): the pools of head, the state after the
//!   apply. Pruning a config head's pools no longer reference is fine.
//! - MachinePools, for any other request ([`View::Either`]): every pool in either state (a pool
//!   that rotates away from a config is listed with both refs), because an edit of a config may
//!   reach the cluster before the pool's rotation does. Pools head removes are listed as being
//!   deleted.
//! - Configs (looked up by name): the head version, else the base version, which exists until
//!   it is pruned. A config a base MachinePool references carries a controller ownerReference
//!   to that pool, as CAPI sets it once base was reconciled; manifests in Git carry none.

use capi_bootstrap_rollout_policy::capi::config_ref::{ref_identity_of, RefIdentity};
use capi_bootstrap_rollout_policy::capi::kinds::{
    group_of_api_version, is_machine_pool, is_machine_template_consumer, GroupKind, MACHINE_POOL,
};
use capi_bootstrap_rollout_policy::lookups::{list_answer, ListRequest, Lookups};
use serde_json::{json, Value};

use crate::manifests::{Key, ManifestSet};

/// Marks objects head removes: they are pruned once the apply is done.
const PRUNED: &str = "1970-01-01T00:00:00Z";

/// Kinds that name bootstrap data in `spec.template.spec.bootstrap.configRef`: MachinePools,
/// and MachineDeployments and MachineSets (bootstrap templates). They are listed with the views
/// above; any other kind is looked up like a config.
fn is_consumer(group: &str, kind: &str) -> bool {
    is_machine_pool(group, kind) || is_machine_template_consumer(group, kind)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The state after the apply (head), for a config DELETE.
    Final,
    /// Either state, for everything else.
    Either,
}

pub struct ManifestLookups<'a> {
    pub base: &'a ManifestSet,
    pub head: &'a ManifestSet,
    pub view: View,
}

/// One term of a field selector: `metadata.name=x`, `metadata.name==x`, `metadata.name!=x`.
struct Term {
    field: Vec<String>,
    value: String,
    equal: bool,
}

fn parse_selector(selector: Option<&str>) -> Result<Vec<Term>, String> {
    let Some(selector) = selector.filter(|s| !s.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    selector
        .split(',')
        .map(|term| {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(format!("unsupported field selector term {term:?}"));
            };
            match field.trim() {
                "metadata.name" | "metadata.namespace" => Ok(Term {
                    field: field.trim().split('.').map(str::to_string).collect(),
                    value: value.trim().to_string(),
                    equal,
                }),
                other => Err(format!("unsupported field selector field {other:?}")),
            }
        })
        .collect()
}

fn selected(object: &Value, terms: &[Term]) -> bool {
    terms.iter().all(|t| {
        let actual = t
            .field
            .iter()
            .try_fold(object, |v, k| v.get(k))
            .and_then(Value::as_str)
            .unwrap_or("");
        (actual == t.value) == t.equal
    })
}

fn pruned(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("deletionTimestamp".into(), json!(PRUNED));
    }
    object
}

fn ref_identity(pool: &Value) -> Option<RefIdentity> {
    ref_identity_of(pool)
}

impl ManifestLookups<'_> {
    /// The objects of a consumer kind (`MachinePool`: either of its groups) in a namespace.
    fn consumers_of<'s>(
        set: &'s ManifestSet,
        kind: &str,
        namespace: &str,
    ) -> impl Iterator<Item = (&'s Key, &'s Value)> {
        let (kind, namespace) = (kind.to_string(), namespace.to_string());
        set.objects
            .iter()
            .filter(move |(k, _)| {
                k.kind == kind && is_consumer(&k.group, &k.kind) && k.namespace == namespace
            })
            .map(|(k, m)| (k, &m.object))
    }

    fn consumers(&self, kind: &str, namespace: &str) -> Vec<Value> {
        let mut found: Vec<Value> = Self::consumers_of(self.head, kind, namespace)
            .map(|(_, object)| object.clone())
            .collect();
        if self.view == View::Either {
            for (key, base) in Self::consumers_of(self.base, kind, namespace) {
                match self.head.objects.get(key) {
                    None => found.push(pruned(base)),
                    Some(head) if ref_identity(&head.object) != ref_identity(base) => {
                        found.push(base.clone())
                    }
                    Some(_) => {}
                }
            }
        }
        found
    }

    fn objects(&self, group: &str, kind: &str, namespace: &str) -> Vec<Value> {
        let base_pools: Vec<Value> = Self::consumers_of(self.base, MACHINE_POOL, namespace)
            .map(|(_, pool)| pool.clone())
            .collect();
        let group_kind = GroupKind::new(group, kind);
        let wanted = |k: &Key| k.group == group && k.kind == kind && k.namespace == namespace;
        let mut objects = Vec::new();
        for (key, head) in self.head.objects.iter().filter(|(k, _)| wanted(k)) {
            objects.push((key, head.object.clone()));
        }
        for (key, base) in self.base.objects.iter().filter(|(k, _)| wanted(k)) {
            if !self.head.objects.contains_key(key) {
                objects.push((key, pruned(&base.object)));
            }
        }
        objects
            .into_iter()
            .map(|(key, mut object)| {
                let owners: Vec<Value> = base_pools
                    .iter()
                    .filter(|pool| {
                        ref_identity(pool)
                            .is_some_and(|id| id.names(&group_kind, namespace, &key.name))
                    })
                    .map(|pool| {
                        json!({
                            "apiVersion": pool.get("apiVersion").cloned().unwrap_or(Value::Null),
                            "kind": MACHINE_POOL,
                            "name": pool.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(""),
                            "controller": true,
                            "blockOwnerDeletion": true,
                        })
                    })
                    .collect();
                if !owners.is_empty() {
                    if let Some(metadata) =
                        object.get_mut("metadata").and_then(Value::as_object_mut)
                    {
                        metadata.insert("ownerReferences".into(), Value::Array(owners));
                    }
                }
                object
            })
            .collect()
    }
}

impl Lookups for ManifestLookups<'_> {
    fn list(&self, request: &ListRequest) -> Result<Vec<u8>, String> {
        let terms = parse_selector(request.field_selector.as_deref())?;
        let group = group_of_api_version(&request.api_version);
        let items = if is_consumer(group, request.kind) {
            self.consumers(request.kind, request.namespace)
        } else {
            self.objects(group, request.kind, request.namespace)
        };
        let items: Vec<Value> = items.into_iter().filter(|o| selected(o, &terms)).collect();
        Ok(list_answer(&items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capi_bootstrap_rollout_policy::lookups::{config, machine_pools};

    fn set(yaml: &str) -> ManifestSet {
        let mut set = ManifestSet::default();
        set.add_text("test.yaml", yaml, None).unwrap();
        set
    }

    fn pool(name: &str, config: &str) -> String {
        format!(
            "apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachinePool\nmetadata: {{name: {name}, namespace: ns}}\n\
             spec: {{template: {{spec: {{bootstrap: {{configRef: {{apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: {config}}}}}}}}}}}\n---\n"
        )
    }

    fn kc(name: &str) -> String {
        format!("apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata: {{name: {name}, namespace: ns}}\nspec: {{}}\n---\n")
    }

    /// The configRef names of a list answer's items, and whether each is being deleted.
    fn refs(answer: Vec<u8>) -> Vec<(String, bool)> {
        let list: Value = serde_json::from_slice(&answer).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                    p["metadata"]["deletionTimestamp"].is_string(),
                )
            })
            .collect()
    }

    #[test]
    fn pools_in_either_state_or_in_head() {
        let base = set(&(pool("a", "a-1") + &pool("b", "b-1") + &pool("gone", "g-1")));
        let head = set(&(pool("a", "a-2") + &pool("b", "b-1")));
        let either = ManifestLookups {
            base: &base,
            head: &head,
            view: View::Either,
        };
        // A rotating pool with both refs, an unchanged one once, a removed one as being deleted.
        let listed = refs(machine_pools(&either, "v1beta2", "ns").unwrap());
        assert_eq!(
            listed,
            [
                ("a-2".into(), false),
                ("b-1".into(), false),
                ("a-1".into(), false),
                ("g-1".into(), true)
            ]
        );
        let final_state = ManifestLookups {
            view: View::Final,
            ..either
        };
        let listed = refs(machine_pools(&final_state, "v1beta2", "ns").unwrap());
        assert_eq!(listed, [("a-2".into(), false), ("b-1".into(), false)]);
        assert!(refs(machine_pools(&final_state, "v1beta2", "other").unwrap()).is_empty());
    }

    #[test]
    fn configs_by_name_from_head_then_base_owned_by_base_pools() {
        let base = set(&(pool("a", "a-1") + &kc("a-1") + &kc("old")));
        let head = set(&(pool("a", "a-2") + &kc("a-1") + &kc("a-2")));
        let lookups = ManifestLookups {
            base: &base,
            head: &head,
            view: View::Either,
        };
        // The config the policy's lookup reads from the answer (the last item), as a value.
        let get = |name: &str| -> Option<Value> {
            let answer = config(
                &lookups,
                "bootstrap.cluster.x-k8s.io/v1beta2".into(),
                "KubeadmConfig",
                "ns",
                name,
            )
            .unwrap();
            let list: Value = serde_json::from_slice(&answer).unwrap();
            list["items"].as_array().unwrap().last().cloned()
        };
        let owned = get("a-1").unwrap();
        assert_eq!(owned["metadata"]["ownerReferences"][0]["name"], "a");
        assert_eq!(owned["metadata"]["ownerReferences"][0]["controller"], true);
        assert!(get("a-2").unwrap()["metadata"]
            .get("ownerReferences")
            .is_none());
        // Removed by head: still there until pruned.
        assert!(get("old").unwrap()["metadata"]["deletionTimestamp"].is_string());
        assert!(get("missing").is_none());
    }

    #[test]
    fn field_selectors() {
        let base = set(&(kc("x") + &kc("y")));
        let head = ManifestSet::default();
        let lookups = ManifestLookups {
            base: &base,
            head: &head,
            view: View::Either,
        };
        let list = |selector: &str| {
            lookups.list(&ListRequest {
                api_version: "bootstrap.cluster.x-k8s.io/v1beta2".into(),
                kind: "KubeadmConfig",
                namespace: "ns",
                field_selector: Some(selector.into()),
                field_masks: &[],
            })
        };
        let names = |answer: Vec<u8>| -> Vec<String> {
            let list: Value = serde_json::from_slice(&answer).unwrap();
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(list("metadata.name=x").unwrap()), ["x"]);
        assert_eq!(names(list("metadata.name==y").unwrap()), ["y"]);
        assert_eq!(names(list("metadata.name!=x").unwrap()), ["y"]);
        assert_eq!(
            names(list("metadata.namespace=ns,metadata.name=y").unwrap()),
            ["y"]
        );
        assert_eq!(names(list("").unwrap()), ["x", "y"]);
        assert!(list("spec.x=1").unwrap_err().contains("unsupported"));
        assert!(list("metadata.name").unwrap_err().contains("unsupported"));
    }
}
