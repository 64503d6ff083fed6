//! The bootstrap `configRef` of a MachinePool (and of a MachineDeployment or MachineSet, which
//! name a template in the same place), and the identity CAPI compares refs by.

use serde_json::Value;

use crate::capi::kinds::{group_of_api_version, GroupKind};
use crate::reader::node::Node;

pub(crate) const CONFIG_REF: &str = "spec.template.spec.bootstrap.configRef";

/// The identity of a configRef: {group, kind, name}. apiVersion is not part of it: in v1beta1
/// CAPI bumps it to a newer version of the same group on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefIdentity {
    pub group: String,
    pub kind: String,
    pub name: String,
    /// v1beta1 only; empty means the MachinePool's namespace.
    pub namespace: String,
}

impl RefIdentity {
    pub fn of(config_ref: &Node) -> Self {
        let field = |key| {
            config_ref
                .get(key)
                .and_then(Node::as_str)
                .map(|s| s.to_str())
        };
        let (api_group, api_version) = (field("apiGroup"), field("apiVersion"));
        let (kind, name, namespace) = (field("kind"), field("name"), field("namespace"));
        RefStrings {
            api_group: api_group.as_deref(),
            api_version: api_version.as_deref(),
            kind: kind.as_deref(),
            name: name.as_deref(),
            namespace: namespace.as_deref(),
        }
        .identity()
    }

    /// A reference given as a `serde_json` value (tools: a configRef, an infrastructureRef),
    /// read as the policy reads a configRef: the group from `apiGroup` (v1beta2), else from
    /// `apiVersion` (v1beta1); a field absent or not a string reads as empty.
    pub fn of_value(reference: &Value) -> Self {
        RefIdentity::of(&Node::from_value(reference))
    }

    /// Whether the ref names the config `{group, kind} namespace/name`.
    pub fn names(&self, group_kind: &GroupKind, namespace: &str, name: &str) -> bool {
        RefStrings {
            api_group: Some(&self.group),
            api_version: None,
            kind: Some(&self.kind),
            name: Some(&self.name),
            namespace: Some(&self.namespace),
        }
        .names(group_kind, namespace, name)
    }
}

/// The string fields of a configRef (`None`: absent, or not a string).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RefStrings<'s> {
    pub api_group: Option<&'s str>,
    pub api_version: Option<&'s str>,
    pub kind: Option<&'s str>,
    pub name: Option<&'s str>,
    pub namespace: Option<&'s str>,
}

impl<'s> RefStrings<'s> {
    /// v1beta2 names the group in `apiGroup`, v1beta1 in `apiVersion`.
    pub fn group(&self) -> &'s str {
        self.api_group
            .or_else(|| self.api_version.map(group_of_api_version))
            .unwrap_or("")
    }

    pub fn identity(&self) -> RefIdentity {
        RefIdentity {
            group: self.group().to_string(),
            kind: self.kind.unwrap_or("").to_string(),
            name: self.name.unwrap_or("").to_string(),
            namespace: self.namespace.unwrap_or("").to_string(),
        }
    }

    /// Whether the ref names the config `{group, kind} namespace/name` (a ref without a
    /// namespace names one in the referrer's namespace). The same as its identity's
    /// [`RefIdentity::names`], without building it.
    pub fn names(&self, group_kind: &GroupKind, namespace: &str, name: &str) -> bool {
        let ref_namespace = self.namespace.unwrap_or("");
        self.group() == group_kind.group
            && self.kind.unwrap_or("") == group_kind.kind
            && self.name.unwrap_or("") == name
            && (ref_namespace.is_empty() || ref_namespace == namespace)
    }
}

/// The configRef of a MachinePool given as a `serde_json` value (tools): its identity, `None`
/// when it has none or it is not an object.
pub fn ref_identity_of(machine_pool: &Value) -> Option<RefIdentity> {
    let pool = Node::from_value(machine_pool);
    config_ref_in(pool.get("spec"))
        .ok()
        .flatten()
        .map(RefIdentity::of)
}

/// The configRef in a MachinePool's `spec`: `Ok(None)` when absent (dataSecretName only), an
/// error when it is not an object.
pub(crate) fn config_ref_in<'s, 'a>(
    spec: Option<&'s Node<'a>>,
) -> Result<Option<&'s Node<'a>>, String> {
    let keys = ["template", "spec", "bootstrap", "configRef"];
    match spec.and_then(|spec| spec.at(&keys)) {
        None | Some(Node::Null) => Ok(None),
        Some(r @ Node::Object(_)) => Ok(Some(r)),
        Some(_) => Err(format!(
            "{CONFIG_REF}: Invalid value: must be an object reference"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{json, Value};

    const KC: GroupKind = GroupKind::builtin("bootstrap.cluster.x-k8s.io", "KubeadmConfig");

    #[rstest]
    #[case::v1beta2(json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "kc-1"}), ("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kc-1", ""))]
    #[case::v1beta1(json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "kc-1", "namespace": "fleet"}), ("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kc-1", "fleet"))]
    #[case::api_group_wins(json!({"apiGroup": "a.io", "apiVersion": "b.io/v1", "kind": "K", "name": "n"}), ("a.io", "K", "n", ""))]
    #[case::not_strings(json!({"apiGroup": 1, "kind": null, "name": ["n"]}), ("", "", "", ""))]
    #[case::escaped(json!({"apiGroup": "a.io", "kind": "K", "name": "n\u{e9}"}), ("a.io", "K", "n\u{e9}", ""))]
    fn a_ref_is_known_by_group_kind_and_name(
        #[case] config_ref: Value,
        #[case] (group, kind, name, namespace): (&str, &str, &str, &str),
    ) {
        let id = RefIdentity::of(&Node::from_value(&config_ref));
        assert_eq!(
            (&*id.group, &*id.kind, &*id.name, &*id.namespace),
            (group, kind, name, namespace)
        );
    }

    /// The tools read a ref given as a JSON value the same way.
    #[rstest]
    #[case::v1beta2(json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool", "name": "p"}))]
    #[case::v1beta1(json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "kc-1", "namespace": "fleet"}))]
    #[case::not_strings(json!({"apiGroup": 1, "kind": null, "name": ["n"]}))]
    #[case::not_an_object(json!("kc-1"))]
    fn a_ref_as_a_json_value(#[case] reference: Value) {
        assert_eq!(
            RefIdentity::of_value(&reference),
            RefIdentity::of(&Node::from_value(&reference))
        );
    }

    #[rstest]
    #[case::same("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kc-1", "", true)]
    #[case::its_namespace("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kc-1", "fleet", true)]
    #[case::another_namespace(
        "bootstrap.cluster.x-k8s.io",
        "KubeadmConfig",
        "kc-1",
        "other",
        false
    )]
    #[case::another_name("bootstrap.cluster.x-k8s.io", "KubeadmConfig", "kc-2", "", false)]
    #[case::another_kind("bootstrap.cluster.x-k8s.io", "RKE2Config", "kc-1", "", false)]
    #[case::another_group("bootstrap.example.com", "KubeadmConfig", "kc-1", "", false)]
    fn a_ref_names_a_config(
        #[case] group: &str,
        #[case] kind: &str,
        #[case] name: &str,
        #[case] namespace: &str,
        #[case] names: bool,
    ) {
        let strings = RefStrings {
            api_group: Some(group),
            api_version: None,
            kind: Some(kind),
            name: Some(name),
            namespace: Some(namespace),
        };
        assert_eq!(strings.names(&KC, "fleet", "kc-1"), names);
        // The identity says the same as the strings it is made of.
        assert_eq!(strings.identity().names(&KC, "fleet", "kc-1"), names);
    }

    #[rstest]
    #[case::a_ref(json!({"spec": {"template": {"spec": {"bootstrap": {"configRef": {"kind": "KubeadmConfig", "name": "kc-1"}}}}}}), Ok(Some("kc-1")))]
    #[case::data_secret_name_only(json!({"spec": {"template": {"spec": {"bootstrap": {"dataSecretName": "s"}}}}}), Ok(None))]
    #[case::null(json!({"spec": {"template": {"spec": {"bootstrap": {"configRef": null}}}}}), Ok(None))]
    #[case::no_spec(json!({}), Ok(None))]
    #[case::a_string(json!({"spec": {"template": {"spec": {"bootstrap": {"configRef": "kc-1"}}}}}), Err("spec.template.spec.bootstrap.configRef: Invalid value: must be an object reference"))]
    fn the_config_ref_of_a_pool(#[case] pool: Value, #[case] expected: Result<Option<&str>, &str>) {
        let node = Node::from_value(&pool);
        let found = config_ref_in(node.get("spec")).map(|r| r.map(|r| RefIdentity::of(r).name));
        assert_eq!(
            found,
            expected
                .map(|name| name.map(str::to_string))
                .map_err(str::to_string)
        );
        assert_eq!(
            ref_identity_of(&pool).map(|id| id.name),
            expected.ok().flatten().map(str::to_string)
        );
    }
}
