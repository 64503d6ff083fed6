//! One file per kind judged, as CAPI lays out its webhooks: each holds its kind's
//! create/update/delete decision tree (which rules are asked, when a lookup is worth its host
//! call) and returns the findings. [`crate::engine`] routes a request to one of them.

pub mod bootstrap_config;
pub mod bootstrap_template;
pub mod config_ref_holder;

/// What the tests of the judged kinds and of the engine build their requests from: objects as
/// CAPI stores them, AdmissionRequests as the API server sends them, judged end to end.
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::settings::Settings;
    use crate::verdict::Verdict;
    use serde_json::{json, Value};

    pub(crate) const POOL_UID: &str = "6f1c2f7e-8a53-4c1b-9d8e-0b6f4a1e2c3d";

    pub(crate) const KUBEADM_BOOTSTRAP: &str =
        "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager";

    pub(crate) const CAPI_MANAGER: &str = "system:serviceaccount:capi-system:capi-manager";

    /// A third-party provider's controller, not in the default controllerUsers.
    pub(crate) const EXAMPLE_BOOTSTRAP: &str =
        "system:serviceaccount:example-system:example-bootstrap-manager";

    pub(crate) fn owner_ref(version: &str) -> Value {
        json!({"apiVersion": format!("cluster.x-k8s.io/{version}"), "kind": "MachinePool",
               "name": "worker-a", "uid": POOL_UID, "controller": true, "blockOwnerDeletion": true})
    }

    /// A bootstrap config as stored, in its record's group (CAPI's for a kind without one):
    /// labels, the pool's controller reference when `owned`.
    pub(crate) fn config(kind: &str, version: &str, spec: Value, owned: bool) -> Value {
        let group = crate::capi::providers::provider_of(kind)
            .map_or(crate::capi::kinds::BOOTSTRAP_GROUP, |p| p.group);
        let mut object = json!({
            "apiVersion": format!("{group}/{version}"),
            "kind": kind,
            "metadata": {"name": "worker-a-0123abcd", "namespace": "default", "generation": 3,
                         "uid": "0d5c7f8e-1111-4222-8333-444455556666",
                         "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
            "spec": spec,
        });
        if owned {
            object["metadata"]["ownerReferences"] = json!([owner_ref("v1beta2")]);
        }
        object
    }

    pub(crate) fn files(content: &str) -> Value {
        json!({"files": [{"path": "/etc/motd", "content": "hello"}, {"path": "/etc/sysctl.d/90-k8s.conf", "content": content}],
               "joinConfiguration": {"discovery": {"bootstrapToken": {"token": "abcdef.0123456789abcdef", "apiServerEndpoint": "10.0.0.1:6443"}}}})
    }

    pub(crate) fn request(
        operation: &str,
        object: Option<&Value>,
        old: Option<&Value>,
        user: &str,
    ) -> Value {
        let any = object.or(old).unwrap();
        let api_version = any["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap();
        let mut request = json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": any["kind"]},
            "resource": {"group": group, "version": version, "resource": "x"},
            "operation": operation,
            "namespace": "default",
            "name": any["metadata"]["name"],
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
        });
        if let Some(o) = object {
            request["object"] = o.clone();
        }
        if let Some(o) = old {
            request["oldObject"] = o.clone();
        }
        request
    }

    pub(crate) fn update(old: &Value, new: &Value, user: &str) -> Value {
        request("UPDATE", Some(new), Some(old), user)
    }

    pub(crate) fn run(settings: Value, request: &Value) -> Verdict {
        let request = serde_json::to_vec(request).unwrap();
        crate::engine::evaluate(&Settings::from_value(&settings).unwrap(), &request)
    }

    pub(crate) fn topology(mut object: Value) -> Value {
        object["metadata"]["labels"]["topology.cluster.x-k8s.io/owned"] = json!("");
        object
    }

    pub(crate) fn strip_owner(mut object: Value) -> Value {
        object["metadata"]["ownerReferences"] = json!([]);
        object
    }

    pub(crate) fn pool(version: &str, config_ref: Option<Value>) -> Value {
        let mut bootstrap = json!({});
        if let Some(r) = config_ref {
            bootstrap["configRef"] = r;
        }
        json!({"apiVersion": format!("cluster.x-k8s.io/{version}"), "kind": "MachinePool",
               "metadata": {"name": "worker-a", "namespace": "default", "uid": POOL_UID},
               "spec": {"clusterName": "prod", "replicas": 3,
                        "template": {"spec": {"clusterName": "prod", "bootstrap": bootstrap}}}})
    }

    pub(crate) fn v1beta1_ref(api_version: &str, kind: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": name, "namespace": "default"})
    }

    pub(crate) fn v1beta2_ref(kind: &str, name: &str) -> Value {
        json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": kind, "name": name})
    }

    pub(crate) const B1: &str = "bootstrap.cluster.x-k8s.io/v1beta1";

    pub(crate) const B2: &str = "bootstrap.cluster.x-k8s.io/v1beta2";
}
