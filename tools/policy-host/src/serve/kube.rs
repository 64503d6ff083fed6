//! The Kubernetes host capabilities answered from a real cluster, as policy-evaluator answers
//! them (`callback_handler.rs`, `callback_handler/kubernetes/{client,reflector,field_mask}.rs`):
//! the resource found by discovery (`/api/v1`, `/apis/GROUP/VERSION`), the list filtered by
//! the label and field selectors, `managedFields` emptied and kubectl's last-applied annotation
//! dropped from every item, the field masks applied to everything but `metadata`, and the items
//! wrapped as `{apiVersion, kind: <Kind>List, metadata: {}, items}`.
//!
//! Unlike policy-server, which keeps a watch-fed cache per query (and caches `get_resource`
//! for 5 s unless `disable_cache`), every call asks the API server: the answers are never
//! staler than policy-server's, and sometimes fresher.
//!
//! The guest runs synchronously (inside waPC, on a blocking thread); the calls run on the
//! server's tokio runtime through [`tokio::runtime::Handle::block_on`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, ObjectList, ResourceExt, TypeMeta};
use serde_json::Value;

use crate::callbacks::CallbackRequestType;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Clone, Debug)]
struct KubeResource {
    resource: ApiResource,
    namespaced: bool,
}

/// The cluster of `policy-host serve`: a kube client (none when it could not be built and
/// `--ignore-kubernetes-connection-failure` was given) and the runtime it runs on.
#[derive(Clone)]
pub struct KubeCluster {
    client: Option<kube::Client>,
    runtime: tokio::runtime::Handle,
    /// Discovery answers, by (apiVersion, kind), as policy-evaluator keeps them.
    resources: Arc<Mutex<HashMap<(String, String), KubeResource>>>,
}

impl KubeCluster {
    pub fn new(client: Option<kube::Client>, runtime: tokio::runtime::Handle) -> KubeCluster {
        KubeCluster {
            client,
            runtime,
            resources: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The answer to one request: the JSON payload, or the error text policy-evaluator gives
    /// (an anyhow error's Debug form; the caller prefixes "Callback evaluation failure: ").
    /// Called from a thread that runs no async code: an evaluation's blocking thread, or the
    /// main thread while the policies' settings are validated.
    pub fn answer(&self, request: &CallbackRequestType) -> std::result::Result<Vec<u8>, String> {
        let Some(client) = self.client.clone() else {
            return Err(format!(
                "{:?}",
                anyhow!("kube::Client was not initialized properly")
            ));
        };
        self.runtime
            .block_on(self.answer_with(client, request))
            .map_err(|e| format!("{e:?}"))
    }

    async fn answer_with(
        &self,
        client: kube::Client,
        request: &CallbackRequestType,
    ) -> Result<Vec<u8>> {
        match request {
            CallbackRequestType::KubernetesListResourceNamespace {
                api_version,
                kind,
                namespace,
                label_selector,
                field_selector,
                field_masks,
            } => {
                let resource = self.kube_resource(&client, api_version, kind).await?;
                if !resource.namespaced {
                    return Err(anyhow!(
                        "resource {api_version}/{kind} is cluster wide. Cannot search for it inside of a namespace"
                    ));
                }
                let selectors = [label_selector, field_selector];
                payload(&list(client, resource, Some(namespace), selectors, field_masks).await?)
            }
            CallbackRequestType::KubernetesListResourceAll {
                api_version,
                kind,
                label_selector,
                field_selector,
                field_masks,
            } => {
                let resource = self.kube_resource(&client, api_version, kind).await?;
                let selectors = [label_selector, field_selector];
                payload(&list(client, resource, None, selectors, field_masks).await?)
            }
            CallbackRequestType::KubernetesGetResource {
                api_version,
                kind,
                name,
                namespace,
                disable_cache: _,
                field_masks,
            } => {
                let resource = self.kube_resource(&client, api_version, kind).await?;
                if resource.namespaced && namespace.is_none() {
                    return Err(anyhow!(
                        "Resource {api_version}/{kind} is namespaced, but no namespace was provided"
                    ));
                }
                let namespace = namespace.as_ref().filter(|_| resource.namespaced);
                let mut object = api(client, &resource, namespace)
                    .get_opt(name)
                    .await
                    .map_err(anyhow::Error::new)?
                    .ok_or_else(|| {
                        anyhow!(
                            "Cannot find {api_version}/{kind} named '{name}' inside of namespace '{namespace:?}'"
                        )
                    })?;
                if let Some(masks) = field_masks {
                    prune_in_place(&mut object.data, &FieldMask::new(masks));
                }
                payload(&object)
            }
        }
    }

    /// policy-evaluator's `build_kube_resource`: the plural and scope from discovery, cached.
    async fn kube_resource(
        &self,
        client: &kube::Client,
        api_version: &str,
        kind: &str,
    ) -> Result<KubeResource> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(known) = self.lock_resources().get(&key) {
            return Ok(known.clone());
        }
        let resources = match api_version {
            "v1" => client.list_core_api_resources(api_version).await?,
            _ => client
                .list_api_group_resources(api_version)
                .await
                .map_err(|e| anyhow!("error finding resource {api_version} / {kind}: {e}"))?,
        };
        let found = resources
            .resources
            .iter()
            .find(|r| r.kind == kind)
            .ok_or_else(|| anyhow!("Cannot find resource {api_version}/{kind}"))?;
        let (group, version) = match api_version {
            "v1" => ("", "v1"),
            _ => api_version
                .split_once('/')
                .ok_or_else(|| anyhow!("cannot determine group and version for {api_version}"))?,
        };
        let resource = KubeResource {
            resource: ApiResource {
                group: group.to_string(),
                version: version.to_string(),
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                plural: found.name.clone(),
            },
            namespaced: found.namespaced,
        };
        self.lock_resources().insert(key, resource.clone());
        Ok(resource)
    }

    fn lock_resources(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), KubeResource>> {
        self.resources
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn payload<T: serde::Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| anyhow!("error serializing payload: {e:?}"))
}

/// What policy-evaluator's reflector holds for a query, read straight from the API server.
async fn list(
    client: kube::Client,
    resource: KubeResource,
    namespace: Option<&String>,
    [label_selector, field_selector]: [&Option<String>; 2],
    field_masks: &Option<BTreeSet<String>>,
) -> Result<ObjectList<DynamicObject>> {
    let api = api(client, &resource, namespace);
    let mut params = ListParams::default();
    if let Some(selector) = label_selector {
        params = params.labels(selector);
    }
    if let Some(selector) = field_selector {
        params = params.fields(selector);
    }
    let mask = field_masks.as_ref().map(FieldMask::new);
    let mut items = Vec::new();
    let mut continue_token: Option<String> = None;
    // Pages of 500, as kube's watcher lists them.
    loop {
        let mut page_params = params.clone().limit(500);
        if let Some(token) = &continue_token {
            page_params = page_params.continue_token(token);
        }
        let page = api.list(&page_params).await?;
        for mut object in page.items {
            strip(&mut object, mask.as_ref());
            items.push(object);
        }
        continue_token = page.metadata.continue_.filter(|token| !token.is_empty());
        if continue_token.is_none() {
            break;
        }
    }
    Ok(ObjectList {
        types: TypeMeta {
            api_version: resource.resource.api_version.clone(),
            kind: format!("{}List", resource.resource.kind),
        },
        metadata: Default::default(),
        items,
    })
}

/// The resource's API, in `namespace` or cluster-wide.
fn api(
    client: kube::Client,
    resource: &KubeResource,
    namespace: Option<&String>,
) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, &resource.resource),
        None => Api::all_with(client, &resource.resource),
    }
}

/// The reflector's `modify_object`.
fn strip(object: &mut DynamicObject, mask: Option<&FieldMask>) {
    object.managed_fields_mut().clear();
    object.annotations_mut().remove(LAST_APPLIED);
    if let Some(mask) = mask {
        prune_in_place(&mut object.data, mask);
    }
}

/// policy-evaluator's `FieldMaskNode`: dotted paths as a tree; an empty node keeps all below.
#[derive(Debug, Default)]
struct FieldMask {
    children: BTreeMap<String, FieldMask>,
}

impl FieldMask {
    fn new(paths: impl IntoIterator<Item = impl AsRef<str>>) -> FieldMask {
        let mut root = FieldMask::default();
        for path in paths {
            let mut node = &mut root;
            for part in path.as_ref().split('.') {
                node = node.children.entry(part.to_string()).or_default();
            }
        }
        root
    }
}

/// policy-evaluator's `prune_in_place`: keys outside the mask go, arrays are transparent.
fn prune_in_place(value: &mut Value, mask: &FieldMask) {
    if mask.children.is_empty() {
        return;
    }
    match value {
        Value::Object(map) => map.retain(|key, value| match mask.children.get(key) {
            Some(child) => {
                prune_in_place(value, child);
                true
            }
            None => false,
        }),
        Value::Array(items) => {
            for item in items {
                prune_in_place(item, mask);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_keep_what_they_name_through_arrays() {
        let mut data = json!({
            "spec": {"template": {"spec": {"bootstrap": {"configRef": {"name": "a"}}, "x": 1}}, "replicas": 2},
            "status": {"ready": true},
            "users": [{"name": "a", "age": 1}, {"name": "b", "age": 2}]
        });
        prune_in_place(
            &mut data,
            &FieldMask::new(["spec.template.spec.bootstrap", "users.name"]),
        );
        assert_eq!(
            data,
            json!({
                "spec": {"template": {"spec": {"bootstrap": {"configRef": {"name": "a"}}}}},
                "users": [{"name": "a"}, {"name": "b"}]
            })
        );
    }

    #[test]
    fn items_lose_managed_fields_and_last_applied_and_keep_metadata() {
        let mut object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "MachinePool",
            "metadata": {
                "name": "p",
                "annotations": {LAST_APPLIED: "{}", "keep": "me"},
                "managedFields": [{"manager": "kubectl"}]
            },
            "spec": {"replicas": 1, "template": {}},
            "status": {}
        }))
        .unwrap();
        strip(
            &mut object,
            Some(&FieldMask::new(["metadata.name", "spec.template"])),
        );
        assert_eq!(
            serde_json::to_value(&object).unwrap(),
            json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "MachinePool",
                "metadata": {"name": "p", "annotations": {"keep": "me"}, "managedFields": []},
                "spec": {"template": {}}
            })
        );
    }
}
