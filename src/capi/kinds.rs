//! The Kubernetes kinds this policy recognises, in CAPI's words.

/// CAPI's core group, and the group MachinePools were served from while experimental.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
pub const CAPI_EXP_GROUP: &str = "exp.cluster.x-k8s.io";
pub const MACHINE_POOL: &str = "MachinePool";
pub const BOOTSTRAP_GROUP: &str = "bootstrap.cluster.x-k8s.io";
pub const MACHINE_DEPLOYMENT: &str = "MachineDeployment";
pub const MACHINE_SET: &str = "MachineSet";
pub const CLUSTER_CLASS: &str = "ClusterClass";
/// A bootstrap template's kind is its config kind plus this suffix (KubeadmConfigTemplate).
pub const TEMPLATE_SUFFIX: &str = "Template";

/// A group and kind: what the request reader reads a request's kind into.
pub use crate::reader::group_kind::GroupKind;

/// Splits `group/version` (or a core `version`) and returns the group.
pub fn group_of_api_version(api_version: &str) -> &str {
    api_version
        .rsplit_once('/')
        .map(|(group, _)| group)
        .unwrap_or("")
}

pub fn is_machine_pool(group: &str, kind: &str) -> bool {
    kind == MACHINE_POOL && (group == CAPI_GROUP || group == CAPI_EXP_GROUP)
}

/// MachineDeployments and MachineSets name a bootstrap template in the same configRef.
pub fn is_machine_template_consumer(group: &str, kind: &str) -> bool {
    group == CAPI_GROUP && (kind == MACHINE_DEPLOYMENT || kind == MACHINE_SET)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::grouped("bootstrap.cluster.x-k8s.io/v1beta2", "bootstrap.cluster.x-k8s.io")]
    #[case::core("v1", "")]
    #[case::empty("", "")]
    #[case::the_last_slash("a/b/v1", "a/b")]
    fn the_group_of_an_api_version(#[case] api_version: &str, #[case] group: &str) {
        assert_eq!(group_of_api_version(api_version), group);
    }

    #[rstest]
    #[case::pool(CAPI_GROUP, MACHINE_POOL, true, false)]
    #[case::experimental_pool(CAPI_EXP_GROUP, MACHINE_POOL, true, false)]
    #[case::other_group_pool("example.com", MACHINE_POOL, false, false)]
    #[case::deployment(CAPI_GROUP, MACHINE_DEPLOYMENT, false, true)]
    #[case::machine_set(CAPI_GROUP, MACHINE_SET, false, true)]
    #[case::experimental_deployment(CAPI_EXP_GROUP, MACHINE_DEPLOYMENT, false, false)]
    #[case::case_matters(CAPI_GROUP, "machinepool", false, false)]
    fn who_names_bootstrap_data(
        #[case] group: &str,
        #[case] kind: &str,
        #[case] pool: bool,
        #[case] template_consumer: bool,
    ) {
        assert_eq!(is_machine_pool(group, kind), pool);
        assert_eq!(is_machine_template_consumer(group, kind), template_consumer);
    }

    #[rstest]
    #[case::grouped(
        GroupKind::new(BOOTSTRAP_GROUP, "KubeadmConfig"),
        "KubeadmConfig.bootstrap.cluster.x-k8s.io"
    )]
    #[case::builtin(
        GroupKind::builtin(BOOTSTRAP_GROUP, "KubeadmConfig"),
        "KubeadmConfig.bootstrap.cluster.x-k8s.io"
    )]
    #[case::core(GroupKind::new("", "Pod"), "Pod")]
    fn qualified_as_the_api_server_names_types(#[case] group_kind: GroupKind, #[case] name: &str) {
        assert_eq!(group_kind.qualified(), name);
    }
}
