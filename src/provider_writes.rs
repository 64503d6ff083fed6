//! What CAPI's own machinery writes into an existing bootstrap config or template, per provider:
//! the controllers' identities, the fields they write (machine-only or fill-once), and what the
//! providers' defaulting webhooks do to every CREATE/UPDATE, whoever sends it. A validating
//! policy sees each request after the mutating webhooks ran, so none of this may count as an
//! edit. The README's "What CAPI itself writes" table is this module in prose.
//!
//! Read from the providers' code, late 2026 (each fact cites its source where it is used):
//! - CABPK (KubeadmConfig): the token, rotated every ~7.5 min, is machine-only; the discovery
//!   fields it fills once; the v1beta1 defaults; CAPI v1.10's defaulters prune zero-valued
//!   `omitempty` fields on every write ([`crate::diff`] treats that pruning as no change).
//! - k3s (KThreesConfig v1beta2): the defaulter sets `serverConfig.disableCloudController` and
//!   `serverConfig.cloudProviderName` when nil; the controller fills `spec.version` from a
//!   Machine owner when empty.
//! - RKE2 (RKE2Config, RKE2ConfigTemplate): the defaulter sets `agentConfig.format` when empty
//!   and rewrites `agentConfig.additionalUserData.data` ([`normalise_rke2_user_data`]).
//! - k0s: `spec.version` filled from the owner (as k3s). CAPA (EKSConfig, NodeadmConfig),
//!   MicroK8s and Talos write no spec of an existing object.

use crate::diff::FieldRules;
use crate::paths::PathPattern;

/// The controller identities of CAPI core and of every default bootstrap kind's provider, as
/// `clusterctl init` installs them: `system:serviceaccount:<namespace>:<namePrefix><name>`, the
/// namespace and name prefix from the provider's `config/default/kustomization.yaml`, the name
/// from its manager's ServiceAccount. Where a provider ships none (k3s, Talos) its pods run as
/// the namespace's `default`, shared with anything else deployed there.
pub const DEFAULT_CONTROLLER_USERS: [&str; 8] = [
    // kubernetes-sigs/cluster-api core/config/default/kustomization.yaml (namespace capi-system,
    // namePrefix capi-) + core/config/rbac/service_account.yaml (manager); config/ before
    // v1.14. The topology controller's in-place patches come from it.
    "system:serviceaccount:capi-system:capi-manager",
    // kubernetes-sigs/cluster-api bootstrap/kubeadm/config/default/kustomization.yaml
    // (capi-kubeadm-bootstrap-system, capi-kubeadm-bootstrap-) + config/rbac/service_account.yaml.
    "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager",
    // kubernetes-sigs/cluster-api-provider-aws config/default/kustomization.yaml (capa-system,
    // capa-) + config/rbac/serviceaccount.yaml and manager_service_account_patch.yaml
    // (controller-manager): EKSConfig and NodeadmConfig, in the main manager since v0.7.
    "system:serviceaccount:capa-system:capa-controller-manager",
    // rancher/cluster-api-provider-rke2 bootstrap/config/default/kustomization.yaml
    // (rke2-bootstrap-system, rke2-bootstrap-) + bootstrap/config/rbac/service_account.yaml.
    "system:serviceaccount:rke2-bootstrap-system:rke2-bootstrap-manager",
    // k3s-io/cluster-api-k3s bootstrap/config/default/kustomization.yaml (namespace
    // capi-k3s-bootstrap-system); bootstrap/config/rbac has no ServiceAccount and the manager
    // sets no serviceAccountName, so it runs as the namespace's `default` (no namePrefix).
    "system:serviceaccount:capi-k3s-bootstrap-system:default",
    // k0sproject/k0smotron config/clusterapi/bootstrap/kustomization.yaml (namespace k0smotron,
    // namePrefix k0smotron-, nameSuffix -bootstrap) + its rbac/service_account.yaml
    // (controller-manager): clusterctl's k0sproject-k0smotron bootstrap provider.
    "system:serviceaccount:k0smotron:k0smotron-controller-manager-bootstrap",
    // canonical/cluster-api-bootstrap-provider-microk8s config/default/kustomization.yaml
    // (capi-microk8s-bootstrap-system, capi-microk8s-bootstrap-) + config/rbac/
    // service_account.yaml (controller-manager).
    "system:serviceaccount:capi-microk8s-bootstrap-system:capi-microk8s-bootstrap-controller-manager",
    // siderolabs/cluster-api-bootstrap-provider-talos config/default/kustomization.yaml
    // (namespace cabpt-system): no ServiceAccount of its own, so the namespace's `default`.
    "system:serviceaccount:cabpt-system:default",
];

/// CABPK rotates the bootstrap token for as long as a MachinePool owns the config.
const KUBEADM_MACHINE_ONLY: &[&str] = &["spec.joinConfiguration.discovery.bootstrapToken.token"];
/// CABPK fills the discovery fields when empty; CAPI's v1beta1 defaulter sets the rest.
const KUBEADM_FILL_ONCE: &[&str] = &[
    "spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint",
    "spec.joinConfiguration.discovery.bootstrapToken.caCertHashes",
    "spec.joinConfiguration.discovery.bootstrapToken.unsafeSkipCAVerification",
    "spec.joinConfiguration.discovery.file.kubeConfig.cluster.server",
    "spec.joinConfiguration.discovery.file.kubeConfig.cluster.certificateAuthorityData",
    "spec.joinConfiguration.discovery.file.kubeConfig.user.exec.apiVersion",
    "spec.format",
    "spec.initConfiguration.nodeRegistration.imagePullPolicy",
    "spec.joinConfiguration.nodeRegistration.imagePullPolicy",
];
/// k0s copies the version from a Machine owner when it is empty.
const K0S_FILL_ONCE: &[&str] = &["spec.version"];
/// k3s: the version as k0s; the defaulter's two serverConfig fields, set when nil.
const K3S_FILL_ONCE: &[&str] = &[
    "spec.version",
    "spec.serverConfig.disableCloudController",
    "spec.serverConfig.cloudProviderName",
];
/// RKE2: the defaulter's format, set when empty.
const RKE2_FILL_ONCE: &[&str] = &["spec.agentConfig.format"];
const RKE2_TEMPLATE_FILL_ONCE: &[&str] = &["spec.template.spec.agentConfig.format"];

fn rules(machine_only: &[&str], fill_once: &[&str]) -> FieldRules {
    let parse = |paths: &[&str]| {
        paths
            .iter()
            .filter_map(|p| PathPattern::parse(p).ok())
            .collect()
    };
    FieldRules {
        ignored: parse(machine_only),
        fill_once: parse(fill_once),
    }
}

/// The built-in non-compared fields of a config kind (paths from the object's top).
pub fn default_field_rules(kind: &str) -> FieldRules {
    match kind {
        "KubeadmConfig" => rules(KUBEADM_MACHINE_ONLY, KUBEADM_FILL_ONCE),
        "K0sWorkerConfig" => rules(&[], K0S_FILL_ONCE),
        "KThreesConfig" => rules(&[], K3S_FILL_ONCE),
        "RKE2Config" => rules(&[], RKE2_FILL_ONCE),
        _ => FieldRules::default(),
    }
}

/// The built-in non-compared fields of a bootstrap template kind (`RKE2ConfigTemplate`): only
/// what a defaulting webhook writes; no controller writes into a template's spec.
pub fn default_template_field_rules(kind: &str) -> FieldRules {
    match kind {
        "RKE2ConfigTemplate" => rules(&[], RKE2_TEMPLATE_FILL_ONCE),
        _ => FieldRules::default(),
    }
}
