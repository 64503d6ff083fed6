//! The benchmark's admission requests, built in code from the e2e scenarios' realistic
//! objects (a v1beta2 MachinePool and the KubeadmConfig of `team-payments/workers-spot`),
//! grown to a target size with generated `spec.files` entries.
//!
//! Sizes are those of the new `object` serialized as compact JSON; the request carries it
//! twice (`object` and `oldObject`) plus ~0.8 KiB of envelope.

use std::sync::Arc;

use anyhow::{anyhow, Result};
use serde_json::{json, Map, Value};

use policy_host::admission::ValidateRequest;
use policy_host::callbacks::HostContext;
use policy_host::engine::HostCallback;

const MACHINE_POOL_ROTATION: &str =
    include_str!("../../../e2e-tests/scenarios/machinepool-v1beta2-rotate-configref/request.json");
const TOKEN_ROTATION: &str =
    include_str!("../../../e2e-tests/scenarios/kubeadmconfig-v1beta2-token-rotation/request.json");
const EDIT_IN_USE: &str =
    include_str!("../../../e2e-tests/scenarios/kubeadmconfig-v1beta2-edit-in-use/request.json");

/// The size of one generated file's content: a typical cloud-init file of a bootstrap config.
pub const FILE_SIZE: usize = 10 * 1024;

/// One benchmark input: an AdmissionRequest and the settings it is judged with.
#[derive(Clone, Debug)]
pub struct Input {
    pub name: String,
    pub request: Value,
    pub settings: Map<String, Value>,
    /// The verdict the policy must give (checked before measuring).
    pub allowed: bool,
    /// The host's answer to the MachinePool list, for a request that needs it (`contextAware`
    /// on): what `list_resources_by_namespace` returns. `None`: the request looks nothing up.
    pub pool_list: Option<Arc<[u8]>>,
}

impl Input {
    /// A request judged with the default settings, looking nothing up.
    fn new(name: String, request: Value, allowed: bool) -> Input {
        Input {
            name,
            request,
            settings: Map::new(),
            allowed,
            pool_list: None,
        }
    }

    /// Compact JSON size of the new object.
    pub fn object_bytes(&self) -> usize {
        self.request
            .get("object")
            .map_or(0, |o| serde_json::to_vec(o).map_or(0, |v| v.len()))
    }

    /// The request as the host sends it to the guest.
    pub fn validate_request(&self) -> Result<ValidateRequest> {
        ValidateRequest::build(&self.request, false)
    }

    /// The host's side of `__host_call` for this input: the pool list when it has one, else
    /// a host without a cluster (every lookup fails).
    pub fn host_callback(&self) -> Arc<HostCallback> {
        let Some(list) = &self.pool_list else {
            return HostContext::offline().into_callback();
        };
        let list = Arc::clone(list);
        Arc::new(
            move |binding: &str, namespace: &str, operation: &str, _: &[u8]| match (
                binding, namespace, operation,
            ) {
                ("kubewarden", "kubernetes", "list_resources_by_namespace") => Ok(list.to_vec()),
                _ => Err(format!(
                    "the benchmark host answers the pool list only, not {namespace}/{operation}"
                )),
            },
        )
    }

    /// The `validate` payload, byte for byte what `policy-host run` sends the guest.
    pub fn payload(&self) -> Result<Vec<u8>> {
        let request = self.validate_request()?;
        Ok(json!({ "request": request, "settings": self.settings })
            .to_string()
            .into_bytes())
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("a scenario request is JSON")
}

/// A MachinePool UPDATE rotating its configRef to a new KubeadmConfig (allowed).
pub fn machine_pool_rotation() -> Input {
    let name = "MachinePool configRef rotation".to_string();
    Input::new(name, parse(MACHINE_POOL_ROTATION), true)
}

/// The kubeadm bootstrap controller rotating the join token of an in-use KubeadmConfig of
/// about `object_bytes` (allowed: the token is machine-only). The most frequent request.
pub fn token_rotation(object_bytes: usize) -> Result<Input> {
    let name = format!("token-only config update ({})", size_label(object_bytes));
    Ok(Input::new(
        name,
        grown(parse(TOKEN_ROTATION), object_bytes)?,
        true,
    ))
}

/// A user editing a sysctl file and `max-pods` in an in-use KubeadmConfig of about
/// `object_bytes` (rejected with both paths and the rotation to do instead).
pub fn config_edit(object_bytes: usize) -> Result<Input> {
    let name = format!("config edit, in use ({})", size_label(object_bytes));
    Ok(Input::new(
        name,
        grown(parse(EDIT_IN_USE), object_bytes)?,
        false,
    ))
}

/// An in-use KubeadmConfig of about `object_bytes` made of generated files (at most
/// [`FILE_SIZE`] each), one of which the user changes (rejected). The size sweep's input:
/// the spec holds only the files, so the smallest objects stay near 1 KiB.
pub fn one_file_changed(object_bytes: usize) -> Result<Input> {
    let mut request = grown(files_only(parse(EDIT_IN_USE)), object_bytes)?;
    change_one_file(&mut request)?;
    let name = format!("one file changed ({})", size_label(object_bytes));
    Ok(Input::new(name, request, false))
}

/// An in-use KubeadmConfig of `count` files of [`FILE_SIZE`], one of which the user changes
/// (rejected).
pub fn many_files_one_changed(count: usize) -> Result<Input> {
    let mut request = files_only(parse(EDIT_IN_USE));
    let files: Vec<Value> = (0..count).map(|i| file_entry(i, FILE_SIZE)).collect();
    for key in ["object", "oldObject"] {
        request[key]["spec"]["files"] = Value::Array(files.clone());
    }
    change_one_file(&mut request)?;
    let mut input = Input::new(String::new(), request, false);
    let (size, file) = (size_label(input.object_bytes()), size_label(FILE_SIZE));
    input.name = format!("{size} config, {count} files of {file}, one changed");
    Ok(input)
}

/// The 10 KiB in-use edit with `contextAware: true` in a namespace of `pools` MachinePools
/// (rejected): a compared spec change, so the policy lists the pools. The list is
/// what policy-server answers with the policy's field masks: each item only `metadata.name`,
/// `metadata.uid`, `metadata.deletionTimestamp` (one pool in 97 is being deleted) and
/// `spec.template.spec.bootstrap`. The pool in the middle of the list references the config.
pub fn fleet(pools: usize) -> Result<Input> {
    let mut input = config_edit(10 * 1024)?;
    let metadata = &input.request["object"]["metadata"];
    let text = |value: &Value| {
        let text = value.as_str().map(str::to_string);
        text.ok_or_else(|| anyhow!("the edit's object has no name or no MachinePool owner"))
    };
    let config = text(&metadata["name"])?;
    let owner_name = text(&metadata["ownerReferences"][0]["name"])?;
    let owner_uid = text(&metadata["ownerReferences"][0]["uid"])?;
    let items: Vec<Value> = (0..pools)
        .map(|i| {
            if i == pools / 2 {
                return pool_item(&owner_name, &owner_uid, &config, false);
            }
            let hash = (i as u64 + 7).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let uid = format!(
                "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                hash >> 32,
                (hash >> 16) & 0xffff,
                hash & 0xfff,
                (hash >> 20) & 0xfff,
                hash.rotate_left(17) & 0xffff_ffff_ffff
            );
            let name = format!("workers-{i:05}");
            let config = format!("{name}-{:08x}", hash >> 40);
            pool_item(&name, &uid, &config, i % 97 == 1)
        })
        .collect();
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": "4829131"},
        "items": items,
    });
    input
        .settings
        .insert("contextAware".to_string(), json!(true));
    input.pool_list = Some(Arc::from(serde_json::to_vec(&list)?));
    input.name = format!("{pools} MachinePools");
    Ok(input)
}

/// One MachinePool as the field-masked list carries it (v1beta2 configRef).
fn pool_item(name: &str, uid: &str, config: &str, deleting: bool) -> Value {
    let mut metadata = json!({ "name": name, "uid": uid });
    if deleting {
        metadata["deletionTimestamp"] = json!("2026-11-29T08:00:00Z");
    }
    json!({
        "metadata": metadata,
        "spec": {"template": {"spec": {"bootstrap": {
            "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": config},
            "dataSecretName": config,
        }}}},
    })
}

/// How a person applied a config, which decides what kube-apiserver records in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Apply {
    /// `kubectl apply`: manager `kubectl-client-side-apply` (Update), and the whole applied
    /// manifest in the `kubectl.kubernetes.io/last-applied-configuration` annotation.
    ClientSide,
    /// `kubectl apply --server-side`: manager `kubectl` (Apply), no annotation (kubectl refuses
    /// annotations over 256 KiB, so a large config is applied this way).
    ServerSide,
}

pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `input` as kube-apiserver sends it: `metadata.managedFields` on object and
/// oldObject, as the API server writes them for the person's apply, CAPI core's
/// ownerReferences ("manager"), CABPK's discovery fields and status
/// ("capi-kubeadm-bootstrap-manager"), and kubectl's annotation for a client-side apply. The
/// same entries as the `*-kubectl-apply`, `*-server-side-apply` and `*-managed-fields` e2e
/// scenarios (e2e-tests/scenarios/scenarios_apiserver.py). No rule reads them: the verdict is the same.
pub fn as_sent(mut input: Input, apply: Apply) -> Result<Input> {
    // The person's entry is as old as the last apply: the stored object's, unless this
    // request is the person's edit.
    let (applied, edited) = ("2026-11-02T09:14:07Z", "2026-11-29T08:03:44Z");
    let edit = input.request["object"]["spec"] != input.request["oldObject"]["spec"];
    for (key, time) in [
        ("oldObject", applied),
        ("object", if edit { edited } else { applied }),
    ] {
        let object = input
            .request
            .get_mut(key)
            .filter(|o| o.is_object())
            .ok_or_else(|| anyhow!("the request has no {key}"))?;
        apply_fields(object, apply, time);
    }
    input.name = format!(
        "{}, as kube-apiserver sends it ({})",
        input.name,
        match apply {
            Apply::ClientSide => "kubectl apply",
            Apply::ServerSide => "kubectl apply --server-side",
        }
    );
    Ok(input)
}

fn apply_fields(object: &mut Value, apply: Apply, time: &str) {
    let api_version = object["apiVersion"].clone();
    let entry = |manager: &str, operation: &str, fields: Value, time: &str| {
        json!({"manager": manager, "operation": operation, "apiVersion": api_version,
               "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields})
    };
    // What the person applied: the spec without what CABPK fills, the cluster label.
    let mut spec = object["spec"].clone();
    if let Some(join) = spec
        .get_mut("joinConfiguration")
        .and_then(Value::as_object_mut)
    {
        join.remove("discovery");
    }
    let cluster_label = "cluster.x-k8s.io/cluster-name";
    let labels = json!({ cluster_label: object["metadata"]["labels"][cluster_label] });
    let mut person = json!({
        "f:metadata": {"f:labels": {".": {}, format!("f:{cluster_label}"): {}}},
        "f:spec": fields_v1(&spec),
    });
    let mut entries = Vec::new();
    match apply {
        Apply::ClientSide => {
            let manifest = json!({
                "apiVersion": object["apiVersion"], "kind": object["kind"],
                "metadata": {"annotations": {}, "labels": labels,
                             "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"]},
                "spec": spec,
            });
            object["metadata"]["annotations"] = json!({ LAST_APPLIED: format!("{manifest}\n") });
            person["f:metadata"]["f:annotations"] =
                json!({".": {}, format!("f:{LAST_APPLIED}"): {}});
            entries.push(entry("kubectl-client-side-apply", "Update", person, time));
        }
        Apply::ServerSide => entries.push(entry("kubectl", "Apply", person, time)),
    }
    if let Some(owners) = object["metadata"]["ownerReferences"].as_array() {
        let mut fields = json!({".": {}});
        for owner in owners {
            fields[format!("k:{}", json!({"uid": owner["uid"]}))] = json!({});
        }
        entries.push(entry(
            "manager",
            "Update",
            json!({"f:metadata": {"f:ownerReferences": fields}}),
            "2026-11-02T09:14:09Z",
        ));
    }
    let discovery = &object["spec"]["joinConfiguration"]["discovery"];
    if discovery.is_object() {
        entries.push(entry(
            "capi-kubeadm-bootstrap-manager",
            "Update",
            json!({"f:spec": {"f:joinConfiguration": {"f:discovery": fields_v1(discovery)}}}),
            "2026-11-29T07:52:31Z",
        ));
    }
    if object["status"].is_object() {
        let mut status = fields_v1(&object["status"]);
        status["."] = json!({});
        let mut status_entry = entry(
            "capi-kubeadm-bootstrap-manager",
            "Update",
            json!({ "f:status": status }),
            "2026-11-02T09:14:12Z",
        );
        status_entry["subresource"] = json!("status");
        entries.push(status_entry);
    }
    object["metadata"]["managedFields"] = Value::Array(entries);
}

/// The FieldsV1 set of `value` as the API server writes it: `f:<key>` per field, an item of a
/// list keyed by path or name (files, v1beta2 kubeletExtraArgs) as `k:{...}` with `.` for the
/// item itself, `{}` for a leaf or an atomic list.
fn fields_v1(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (format!("f:{k}"), fields_v1(v)))
                .collect(),
        ),
        Value::Array(items)
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| i.get("path").is_some() || i.get("name").is_some()) =>
        {
            let mut out = serde_json::Map::new();
            for item in items {
                let key = if item.get("path").is_some() {
                    "path"
                } else {
                    "name"
                };
                let mut fields = fields_v1(item);
                fields["."] = json!({});
                out.insert(format!("k:{}", json!({ key: item[key] })), fields);
            }
            Value::Object(out)
        }
        _ => json!({}),
    }
}

fn files_only(mut request: Value) -> Value {
    for key in ["object", "oldObject"] {
        request[key]["spec"] = json!({ "files": [] });
    }
    request
}

/// Changes one line of the middle file of `object` (same length: the size is kept).
fn change_one_file(request: &mut Value) -> Result<()> {
    let files = request["object"]["spec"]["files"]
        .as_array_mut()
        .ok_or_else(|| anyhow!("no files"))?;
    let middle = files.len() / 2;
    let content = files[middle]["content"]
        .as_str()
        .ok_or_else(|| anyhow!("a file without content"))?;
    let changed = content.replacen("= \"", "= \"X", 1).replacen('\n', "", 1);
    files[middle]["content"] = Value::String(changed);
    Ok(())
}

/// `10 KiB`, `2 MiB`, `1.5 MiB`.
pub fn size_label(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        let mib = bytes as f64 / (1024.0 * 1024.0);
        if mib.fract() == 0.0 {
            format!("{mib:.0} MiB")
        } else {
            format!("{mib:.1} MiB")
        }
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// `request` with the same generated files appended to `object.spec.files` and
/// `oldObject.spec.files`, so that the new object serializes to about `target` bytes (within one file's JSON overhead).
fn grown(mut request: Value, target: usize) -> Result<Value> {
    let current = serde_json::to_vec(&request["object"])?.len();
    let mut missing = target.saturating_sub(current);
    let mut files = Vec::new();
    // An entry costs its content, the JSON escapes of its newlines and quotes, and ~90 bytes
    // of path and keys: shrink the last one until it fits.
    while missing > 120 {
        let mut size = missing.min(FILE_SIZE);
        let (entry, len) = loop {
            let entry = file_entry(files.len(), size);
            let len = serde_json::to_vec(&entry)?.len() + 1;
            if len <= missing || size == 0 {
                break (entry, len);
            }
            size = size.saturating_sub(len - missing);
        };
        missing = missing.saturating_sub(len);
        files.push(entry);
    }
    for key in ["object", "oldObject"] {
        let list = request[key]["spec"]["files"]
            .as_array_mut()
            .ok_or_else(|| anyhow!("{key}.spec.files is not a list"))?;
        list.extend(files.iter().cloned());
    }
    Ok(request)
}

/// One `spec.files` entry of `size` content bytes: lines of a config file, each distinct.
fn file_entry(index: usize, size: usize) -> Value {
    let path = format!("/etc/kubernetes/extra/{index:03}-node-tuning.conf");
    let mut content = format!("# {path}: node tuning, rendered by the platform team\n");
    let mut line = 0usize;
    while content.len() < size {
        let hash = (index as u64 + 1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add((line as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9));
        content.push_str(&format!(
            "option-{index:03}-{line:04} = \"value-{:016x}\"\n",
            hash
        ));
        line += 1;
    }
    content.truncate(size);
    json!({
        "path": path,
        "owner": "root:root",
        "permissions": "0644",
        "content": content,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_reach_their_size() {
        for target in [10 * 1024, 100 * 1024, 2 * 1024 * 1024] {
            for input in [
                token_rotation(target).unwrap(),
                config_edit(target).unwrap(),
                one_file_changed(target).unwrap(),
            ] {
                let bytes = input.object_bytes();
                assert!(
                    bytes.abs_diff(target) < 200,
                    "{}: {bytes} bytes for {target}",
                    input.name
                );
            }
        }
        assert!(one_file_changed(1024).unwrap().object_bytes() < 1300);
    }

    #[test]
    fn one_file_changed_changes_one_file() {
        let input = one_file_changed(64 * 1024).unwrap();
        let new = input.request["object"]["spec"]["files"].as_array().unwrap();
        let old = input.request["oldObject"]["spec"]["files"]
            .as_array()
            .unwrap();
        assert_eq!(new.len(), old.len());
        let changed = new.iter().zip(old).filter(|(a, b)| a != b).count();
        assert_eq!(changed, 1);
    }

    #[test]
    fn many_files() {
        let input = many_files_one_changed(200).unwrap();
        assert_eq!(
            input.request["object"]["spec"]["files"]
                .as_array()
                .unwrap()
                .len(),
            200
        );
        assert!(
            input
                .name
                .starts_with("2.1 MiB config, 200 files of 10 KiB"),
            "{}",
            input.name
        );
    }

    #[test]
    fn a_fleet_holds_its_pools_and_the_referencing_one() {
        let input = fleet(100).unwrap();
        let list: Value = serde_json::from_slice(input.pool_list.as_deref().unwrap()).unwrap();
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 100);
        let config = input.request["object"]["metadata"]["name"]
            .as_str()
            .unwrap();
        let referencing: Vec<&Value> = items
            .iter()
            .filter(|p| p["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] == config)
            .collect();
        assert_eq!(referencing.len(), 1);
        assert_eq!(Value::Object(input.settings), json!({"contextAware": true}));
        // Only the field-masked fields.
        for item in items {
            let keys: Vec<&String> = item["metadata"].as_object().unwrap().keys().collect();
            assert!(keys
                .iter()
                .all(|k| ["name", "uid", "deletionTimestamp"].contains(&k.as_str())));
        }
    }

    #[test]
    fn as_sent_adds_managed_fields_to_both_objects() {
        let plain = config_edit(10 * 1024).unwrap();
        let sent = as_sent(plain.clone(), Apply::ClientSide).unwrap();
        for key in ["object", "oldObject"] {
            let metadata = &sent.request[key]["metadata"];
            let managers: Vec<&str> = metadata["managedFields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["manager"].as_str().unwrap())
                .collect();
            assert_eq!(
                managers,
                [
                    "kubectl-client-side-apply",
                    "manager",
                    "capi-kubeadm-bootstrap-manager",
                    "capi-kubeadm-bootstrap-manager"
                ]
            );
            // The annotation holds the applied manifest: about the spec's size again.
            let annotation = metadata["annotations"][LAST_APPLIED].as_str().unwrap();
            assert!(annotation.len() > 9 * 1024, "{}", annotation.len());
            assert_eq!(sent.request[key]["spec"], plain.request[key]["spec"]);
        }
        assert!(sent.payload().unwrap().len() > 2 * plain.payload().unwrap().len() - 2048);
        let server_side = as_sent(plain, Apply::ServerSide).unwrap();
        let entry = &server_side.request["object"]["metadata"]["managedFields"][0];
        assert_eq!(
            (&entry["manager"], &entry["operation"]),
            (&json!("kubectl"), &json!("Apply"))
        );
        assert!(server_side.request["object"]["metadata"]["annotations"].is_null());
    }

    #[test]
    fn labels() {
        assert_eq!(size_label(10 * 1024), "10 KiB");
        assert_eq!(size_label(2 * 1024 * 1024), "2 MiB");
        assert_eq!(size_label(1536 * 1024), "1.5 MiB");
    }
}
