//! One record per bootstrap provider: everything the policy knows about a provider's config
//! kind, in one place. The defaults of `bootstrapConfigKinds`, `kindVersions` and
//! `controllerUsers`, the non-compared fields of each kind and template, and which defaulter
//! rewrites a spec are all read from [`PROVIDERS`]; `make generate` writes the kind lists of
//! metadata.yml, policy.yaml, artifacthub-pkg.yml, questions-ui.yml and the docs from it, and
//! tests/providers.rs holds them and the rest to it. Adding a provider is one entry here, then
//! the steps of ARCHITECTURE.md's "To add a bootstrap provider".
//!
//! Read from the providers' code, late 2026 (each fact cites its source in its record):
//! - CABPK (KubeadmConfig): the token, rotated every ~7.5 min, is machine-only; the discovery
//!   fields it fills once; the v1beta1 defaults; CAPI v1.10's defaulters prune zero-valued
//!   `omitempty` fields on every write ([`crate::capi::field_rules`] treats that pruning as no
//!   change) and re-marshal durations ([`crate::capi::defaulters`]).
//! - k3s (KThreesConfig v1beta2): the defaulter sets `serverConfig.disableCloudController` and
//!   `serverConfig.cloudProviderName` when nil; the controller fills `spec.version` from a
//!   Machine owner when empty.
//! - RKE2 (RKE2Config, RKE2ConfigTemplate): the defaulter sets `agentConfig.format` when empty
//!   and rewrites `agentConfig.additionalUserData.data`.
//! - k0s: `spec.version` filled from the owner (as k3s). CAPA (EKSConfig, NodeadmConfig),
//!   MicroK8s and Talos write no spec of an existing object.
//!
//! One provider documents an in-place template edit of its own ([`DocumentedEdit`]): k0smotron's
//! "Update worker nodes" (docs/update/update-capi-cluster-workers.md, with CAPI's in-place updates
//! extension, CAPI v1.12+) bumps `spec.template.spec.version` of the K0sWorkerConfigTemplate
//! in place beside the MachineDeployment's own version. None documented for the others
//! (read late 2026): CAPI's book says to copy and rotate templates, in-place updates included;
//! RKE2 dropped `agentConfig.version` for the MachineDeployment's version (ADR 0001) and its
//! in-place support (v0.25) edits no template; k3s' in-place updates page edits none; Talos
//! upgrades through talosctl and refuses TalosConfig spec edits itself; CAPA and MicroK8s
//! document none.

use crate::capi::field_rules::FieldRules;
use crate::capi::kinds::{GroupKind, BOOTSTRAP_GROUP, TEMPLATE_SUFFIX};
use crate::capi::paths::{builtin_path, FieldPath, PathPattern};

/// What a provider's defaulting webhook rewrites on every write of its kinds, whoever sends
/// it ([`crate::capi::defaulters`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defaulter {
    /// Nothing beyond its fill-once fields.
    None,
    /// CAPI v1.10's v1beta1 defaulter re-marshals `metav1.Duration`s (`5m` comes back `5m0s`).
    KubeadmDurations,
    /// RKE2's defaulter drops keys of `agentConfig.additionalUserData.data` and re-emits the
    /// YAML of each value.
    Rke2UserData,
}

/// A template edit a provider's own docs tell users to make in place, and how it rolls out:
/// an UPDATE of the template that changes these fields and nothing else is admitted with a
/// warning saying what rolls it out (rule 8, docs/rules.md). Any other change in the same
/// UPDATE makes it an edit like any other, these fields listed with the rest.
#[derive(Clone, Debug)]
pub struct DocumentedEdit {
    /// The fields, from the template's top (`spec.template.spec....`).
    pub paths: &'static [PathPattern],
    /// Who documents it, as the warning names them.
    pub documented_by: &'static str,
    /// What rolls it out to the Machines, as the warning says it.
    pub rolled_out_by: &'static str,
}

/// When an in-place edit of a config in use reaches its data Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rendering {
    /// CABPK: re-rendered from the current spec at each bootstrap token rotation of a pool
    /// with nodeRefs and token discovery (within ~TTL/2 + TTL/3: 10-12.5 min at the default TTL).
    AtTokenRotation,
    /// EKSConfig, NodeadmConfig: every reconcile, written when the bytes differ.
    EveryReconcile,
    /// RKE2, k3s, Talos, k0s: rendered once; an edit reaches no instance, not even new ones.
    Once,
}

/// A bootstrap provider's config kind, as the policy knows it.
#[derive(Clone, Debug)]
pub struct Provider {
    /// clusterctl's name of the provider (`clusterctl init --bootstrap <name>`).
    pub clusterctl: &'static str,
    /// The API group of its kinds: CAPI's bootstrap group ([`BOOTSTRAP_GROUP`]) or the
    /// provider's own.
    pub group: &'static str,
    /// The config kind; its template is this plus `Template`, in the same group.
    pub config_kind: &'static str,
    /// The version lookups read the kind in; `None`: CAPI's own, the `capiVersion` setting.
    pub lookup_version: Option<&'static str>,
    /// The controller's identity as `clusterctl init` installs it:
    /// `system:serviceaccount:<namespace>:<namePrefix><name>`, the namespace and name prefix
    /// from the provider's `config/default/kustomization.yaml`, the name from its manager's
    /// ServiceAccount. Where a provider ships none its pods run as the namespace's `default`.
    pub controller: &'static str,
    /// Fields its controller writes for as long as a machine uses the config: never compared.
    pub machine_only: &'static [PathPattern],
    /// Fields its controller or defaulter fills when empty: compared once set.
    pub fill_once: &'static [PathPattern],
    /// The same for the template kind (paths from the template's top).
    pub template_fill_once: &'static [PathPattern],
    /// The in-place template edit the provider documents, if any.
    pub template_documented_edit: Option<DocumentedEdit>,
    pub defaulter: Defaulter,
    /// When an in-place edit reaches the data Secret (and so the infrastructure).
    pub rendering: Rendering,
    /// What its controller and defaulter write into an existing config's spec, in words
    /// (docs/compared-fields.md's "What CAPI itself writes").
    pub spec_writes: &'static str,
}

/// CAPI core's manager: kubernetes-sigs/cluster-api core/config/default/kustomization.yaml
/// (namespace capi-system, namePrefix capi-) + core/config/rbac/service_account.yaml
/// (manager); config/ before v1.14. The topology controller's in-place patches come from it.
pub const CAPI_CORE_CONTROLLER: &str = "system:serviceaccount:capi-system:capi-manager";

/// The providers of CAPI's provider list whose config kinds are judged by default, in the order
/// `bootstrapConfigKinds` lists them.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        clusterctl: "kubeadm",
        group: BOOTSTRAP_GROUP,
        config_kind: "KubeadmConfig",
        lookup_version: None,
        // kubernetes-sigs/cluster-api bootstrap/kubeadm/config/default/kustomization.yaml
        // (capi-kubeadm-bootstrap-system, capi-kubeadm-bootstrap-) + config/rbac/service_account.yaml.
        controller: "system:serviceaccount:capi-kubeadm-bootstrap-system:capi-kubeadm-bootstrap-manager",
        // CABPK rotates the bootstrap token for as long as a MachinePool owns the config.
        machine_only: &[builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.token }],
        // CABPK fills the discovery fields when empty; CAPI's v1beta1 defaulter sets the rest.
        fill_once: &[
            builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint },
            builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.caCertHashes },
            builtin_path! { spec.joinConfiguration.discovery.bootstrapToken.unsafeSkipCAVerification },
            builtin_path! { spec.joinConfiguration.discovery.file.kubeConfig.cluster.server },
            builtin_path! { spec.joinConfiguration.discovery.file.kubeConfig.cluster.certificateAuthorityData },
            builtin_path! { spec.joinConfiguration.discovery.file.kubeConfig.user.exec.apiVersion },
            builtin_path! { spec.format },
            builtin_path! { spec.initConfiguration.nodeRegistration.imagePullPolicy },
            builtin_path! { spec.joinConfiguration.nodeRegistration.imagePullPolicy },
        ],
        // CAPI v1.10's KubeadmConfigTemplate defaulter (bootstrap/kubeadm/internal/webhooks,
        // `KubeadmConfigTemplate.Default` calls the config's defaults on `spec.template.spec`):
        // `format` and the nodeRegistrations' `imagePullPolicy` when empty, and the exec
        // plugin's `apiVersion`. Seen in the cluster test (TestV1beta1Era): a person's label of
        // a template stored before the defaulter was refused as `...format: Forbidden: added`.
        template_fill_once: &[
            builtin_path! { spec.template.spec.format },
            builtin_path! { spec.template.spec.initConfiguration.nodeRegistration.imagePullPolicy },
            builtin_path! { spec.template.spec.joinConfiguration.nodeRegistration.imagePullPolicy },
            builtin_path! { spec.template.spec.joinConfiguration.discovery.file.kubeConfig.user.exec.apiVersion },
        ],
        template_documented_edit: None,
        defaulter: Defaulter::KubeadmDurations,
        // kubernetes-sigs/cluster-api bootstrap/kubeadm/internal/controllers/kubeadmconfig_controller.go:
        // rotateMachinePoolBootstrapToken -> joinWorker -> storeBootstrapData re-renders a
        // MachinePool's Secret from the current spec, while the pool has nodeRefs and uses
        // token discovery.
        rendering: Rendering::AtTokenRotation,
        spec_writes: "token (rotated every ~7.5 min), discovery fields (filled once), `joinConfiguration: {}`; the v1.10 defaulter: v1beta1 defaults, durations re-marshalled and zero-value pruning on every write",
    },
    Provider {
        clusterctl: "aws-eks",
        group: BOOTSTRAP_GROUP,
        config_kind: "EKSConfig",
        lookup_version: Some("v1beta2"),
        // kubernetes-sigs/cluster-api-provider-aws config/default/kustomization.yaml (capa-system,
        // capa-) + config/rbac/serviceaccount.yaml and manager_service_account_patch.yaml
        // (controller-manager): EKSConfig and NodeadmConfig, in the main manager since v0.7.
        // Read in v2.11.1 and v2.13.0: bootstrap/eks/webhooks' EKSConfig (and template)
        // defaulter and validators return nothing; the controller (bootstrap/eks/controllers)
        // writes status and the data Secret, never the spec. For a MachinePool it rewrites the
        // Secret on every reconcile, and AWSMachinePool makes a new launch template version when
        // the user data's hash changes without an instance refresh (pkg/cloud/services/ec2/
        // launchtemplate.go): an in-place edit reaches new instances only. A rotated configRef
        // names another Secret, a change of the user data's secret key, which refreshes them all.
        controller: "system:serviceaccount:capa-system:capa-controller-manager",
        machine_only: &[],
        fill_once: &[],
        template_fill_once: &[],
        template_documented_edit: None,
        defaulter: Defaulter::None,
        // CAPA bootstrap/eks/controllers/eksconfig_controller.go: a MachinePool owner's Secret is
        // re-rendered on every reconcile and written when the bytes differ.
        rendering: Rendering::EveryReconcile,
        spec_writes: "nothing",
    },
    Provider {
        clusterctl: "aws-eks",
        group: BOOTSTRAP_GROUP,
        config_kind: "NodeadmConfig",
        lookup_version: Some("v1beta2"),
        // CAPA's main manager, as EKSConfig; read in v2.11.1 and v2.13.0: no webhook at all,
        // the controller writes status and the data Secret as EKSConfig's does.
        controller: "system:serviceaccount:capa-system:capa-controller-manager",
        machine_only: &[],
        fill_once: &[],
        template_fill_once: &[],
        template_documented_edit: None,
        defaulter: Defaulter::None,
        // As EKSConfig (bootstrap/eks/controllers/nodeadmconfig_controller.go).
        rendering: Rendering::EveryReconcile,
        spec_writes: "nothing",
    },
    Provider {
        clusterctl: "rke2",
        group: BOOTSTRAP_GROUP,
        config_kind: "RKE2Config",
        // Served by every release: v0.20 and v0.21 store v1beta1 (and serve v1alpha1); v0.22.0
        // and later (read up to v0.25.0) store v1beta2, whose spec is v1beta1's field for field,
        // and still serve v1beta1 through their conversion webhook (status.ready from
        // status.initialization.dataSecretCreated). Their defaulter, registered for v1beta2,
        // does what v0.21's does: agentConfig.format, the user-data rewrite, pruning.
        lookup_version: Some("v1beta1"),
        // rancher/cluster-api-provider-rke2 bootstrap/config/default/kustomization.yaml
        // (rke2-bootstrap-system, rke2-bootstrap-) + bootstrap/config/rbac/service_account.yaml.
        controller: "system:serviceaccount:rke2-bootstrap-system:rke2-bootstrap-manager",
        machine_only: &[],
        // The defaulter's format, set when empty.
        fill_once: &[builtin_path! { spec.agentConfig.format }],
        template_fill_once: &[builtin_path! { spec.template.spec.agentConfig.format }],
        template_documented_edit: None,
        defaulter: Defaulter::Rke2UserData,
        // The controller returns early once status.ready is set: rendered once.
        rendering: Rendering::Once,
        spec_writes: "defaulter: `agentConfig.format`, the user-data rewrite, pruning (v0.20.1+); controllers v0.2-v0.20 the same rewrite",
    },
    Provider {
        clusterctl: "k0sproject-k0smotron",
        group: BOOTSTRAP_GROUP,
        config_kind: "K0sWorkerConfig",
        lookup_version: Some("v1beta1"),
        // k0sproject/k0smotron config/clusterapi/bootstrap/kustomization.yaml (namespace
        // k0smotron, namePrefix k0smotron-, nameSuffix -bootstrap) + its
        // rbac/service_account.yaml (controller-manager).
        controller: "system:serviceaccount:k0smotron:k0smotron-controller-manager-bootstrap",
        machine_only: &[],
        // k0s copies the version from a Machine owner when it is empty.
        fill_once: &[builtin_path! { spec.version }],
        template_fill_once: &[],
        // k0smotron docs/update/update-capi-cluster-workers.md ("Update worker nodes", with
        // CAPI's in-place updates extension): bump `spec.template.spec.version` on the
        // MachineDeployment "and the referenced K0sWorkerConfigTemplate, if you keep the two in
        // sync". A config's own version wins over its Machine's (worker_bootstrap_controller.go
        // fills it only when empty), so a template left behind pins new Machines to the old k0s.
        // The MachineDeployment's version change makes a new MachineSet, whose Machines CAPI
        // updates in place (k0smotron's extension runs an autopilot Plan) or replaces, from the
        // template as it then is: the edit rolls out with it. The docs name no other field, and
        // the extension updates the k0s version only ("they don't touch its configuration").
        template_documented_edit: Some(DocumentedEdit {
            paths: &[builtin_path! { spec.template.spec.version }],
            documented_by: "k0smotron docs",
            rolled_out_by: "rolls out with the MachineDeployment's version bump only",
        }),
        defaulter: Defaulter::None,
        // Rendered once, as RKE2.
        rendering: Rendering::Once,
        spec_writes: "nothing persisted (`spec.version` changes in memory only)",
    },
    Provider {
        clusterctl: "k3s",
        group: BOOTSTRAP_GROUP,
        config_kind: "KThreesConfig",
        lookup_version: Some("v1beta2"),
        // k3s-io/cluster-api-k3s bootstrap/config/default/kustomization.yaml (namespace
        // capi-k3s-bootstrap-system); bootstrap/config/rbac has no ServiceAccount and the
        // manager sets no serviceAccountName, so it runs as the namespace's `default`.
        controller: "system:serviceaccount:capi-k3s-bootstrap-system:default",
        machine_only: &[],
        // The version as k0s; the defaulter's two serverConfig fields, set when nil.
        fill_once: &[
            builtin_path! { spec.version },
            builtin_path! { spec.serverConfig.disableCloudController },
            builtin_path! { spec.serverConfig.cloudProviderName },
        ],
        template_fill_once: &[],
        template_documented_edit: None,
        defaulter: Defaulter::None,
        // Rendered once, as RKE2.
        rendering: Rendering::Once,
        spec_writes: "defaulter: `serverConfig.disableCloudController`, `serverConfig.cloudProviderName` when nil; controller: `spec.version` when empty",
    },
    Provider {
        clusterctl: "microk8s",
        group: BOOTSTRAP_GROUP,
        config_kind: "MicroK8sConfig",
        lookup_version: Some("v1beta1"),
        // canonical/cluster-api-bootstrap-provider-microk8s config/default/kustomization.yaml
        // (capi-microk8s-bootstrap-system, capi-microk8s-bootstrap-) + config/rbac/
        // service_account.yaml (controller-manager).
        controller: "system:serviceaccount:capi-microk8s-bootstrap-system:capi-microk8s-bootstrap-controller-manager",
        machine_only: &[],
        fill_once: &[],
        template_fill_once: &[],
        template_documented_edit: None,
        defaulter: Defaulter::None,
        // canonical/cluster-api-bootstrap-provider-microk8s controllers/microk8sconfig_controller.go:
        // "the config is already generated and need not be generated again" once status.ready.
        rendering: Rendering::Once,
        spec_writes: "nothing",
    },
    Provider {
        clusterctl: "talos",
        group: BOOTSTRAP_GROUP,
        config_kind: "TalosConfig",
        lookup_version: Some("v1alpha3"),
        // siderolabs/cluster-api-bootstrap-provider-talos config/default/kustomization.yaml
        // (namespace cabpt-system): no ServiceAccount of its own, so the namespace's `default`.
        controller: "system:serviceaccount:cabpt-system:default",
        machine_only: &[],
        fill_once: &[],
        template_fill_once: &[],
        template_documented_edit: None,
        defaulter: Defaulter::None,
        // Rendered once; its own webhook refuses spec changes anyway.
        rendering: Rendering::Once,
        spec_writes: "nothing (its own webhook refuses spec changes)",
    },
];

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether record `i` is the first to name its controller (one controller serves several
/// kinds: CAPA's EKSConfig and NodeadmConfig).
const fn first_with_its_controller(i: usize) -> bool {
    let mut j = 0;
    while j < i {
        if same(PROVIDERS[j].controller, PROVIDERS[i].controller) {
            return false;
        }
        j += 1;
    }
    true
}

/// How many distinct controllers the records name.
const fn distinct_controllers() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < PROVIDERS.len() {
        if first_with_its_controller(i) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The default `controllerUsers`: CAPI core's manager, then each provider's controller once,
/// in the records' order.
pub const DEFAULT_CONTROLLER_USERS: [&str; 1 + distinct_controllers()] = {
    let mut users = [""; 1 + distinct_controllers()];
    users[0] = CAPI_CORE_CONTROLLER;
    let mut n = 1;
    let mut i = 0;
    while i < PROVIDERS.len() {
        if first_with_its_controller(i) {
            users[n] = PROVIDERS[i].controller;
            n += 1;
        }
        i += 1;
    }
    users
};

/// The kinds of the default `bootstrapConfigKinds`, each in its record's group.
pub const DEFAULT_BOOTSTRAP_CONFIG_KINDS: [&str; PROVIDERS.len()] = {
    let mut kinds = [""; PROVIDERS.len()];
    let mut i = 0;
    while i < PROVIDERS.len() {
        kinds[i] = PROVIDERS[i].config_kind;
        i += 1;
    }
    kinds
};

/// The record of a config kind (a kind has one record, whatever its group).
pub fn provider_of(config_kind: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.config_kind == config_kind)
}

/// The record of a config kind in its group: `None` for a kind of that name in another group,
/// which the records say nothing of.
pub fn provider_of_group_kind(group_kind: &GroupKind) -> Option<&'static Provider> {
    provider_of(&group_kind.kind).filter(|p| p.group == group_kind.group)
}

/// Whether a config or template kind in its group is a record's.
pub fn is_recorded(group_kind: &GroupKind) -> bool {
    let kind = group_kind.kind.as_ref();
    provider_of(kind)
        .or_else(|| provider_of_template(kind))
        .is_some_and(|p| p.group == group_kind.group)
}

/// The default `bootstrapConfigKinds`: every record's config kind in its group.
pub fn default_bootstrap_config_kinds() -> impl Iterator<Item = GroupKind> {
    PROVIDERS
        .iter()
        .map(|p| GroupKind::builtin(p.group, p.config_kind))
}

/// The record of a template kind (`KubeadmConfigTemplate`).
pub fn provider_of_template(template_kind: &str) -> Option<&'static Provider> {
    provider_of(template_kind.strip_suffix(TEMPLATE_SUFFIX)?)
}

/// The provider's documented in-place edit of a template kind, when `changed` (the changed
/// paths, at least one) are all among its fields.
pub fn documented_template_edit<'p>(
    template_kind: &str,
    mut changed: impl Iterator<Item = &'p FieldPath>,
) -> Option<&'static DocumentedEdit> {
    let edit = provider_of_template(template_kind)?
        .template_documented_edit
        .as_ref()?;
    let mut any = false;
    changed
        .all(|path| {
            any = true;
            edit.paths.iter().any(|p| p.matches(path))
        })
        .then_some(edit)
        .filter(|_| any)
}

fn rules(machine_only: &[PathPattern], fill_once: &[PathPattern]) -> FieldRules {
    FieldRules {
        ignored: machine_only.to_vec(),
        fill_once: fill_once.to_vec(),
        zero_is_absent: &[],
        zero_is_absent_root: "",
    }
}

/// The built-in non-compared fields of a config kind (paths from the object's top).
pub(crate) fn default_field_rules(kind: &str) -> FieldRules {
    provider_of(kind).map_or_else(FieldRules::default, |p| rules(p.machine_only, p.fill_once))
}

/// The built-in non-compared fields of a bootstrap template kind (`RKE2ConfigTemplate`,
/// `KubeadmConfigTemplate`): only what a defaulting webhook writes; no controller writes into
/// a template's spec.
pub(crate) fn default_template_field_rules(kind: &str) -> FieldRules {
    provider_of_template(kind)
        .map_or_else(FieldRules::default, |p| rules(&[], p.template_fill_once))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// The built-in patterns, made at compile time, are the patterns their text parses to.
    #[rstest]
    #[case::kubeadm(default_field_rules("KubeadmConfig"), 1, 9)]
    #[case::k0s(default_field_rules("K0sWorkerConfig"), 0, 1)]
    #[case::k3s(default_field_rules("KThreesConfig"), 0, 3)]
    #[case::rke2(default_field_rules("RKE2Config"), 0, 1)]
    #[case::rke2_template(default_template_field_rules("RKE2ConfigTemplate"), 0, 1)]
    #[case::kubeadm_template(default_template_field_rules("KubeadmConfigTemplate"), 0, 4)]
    #[case::eks(default_field_rules("EKSConfig"), 0, 0)]
    #[case::unknown(default_field_rules("ExampleConfig"), 0, 0)]
    fn builtin_patterns_are_what_their_text_parses_to(
        #[case] rules: FieldRules,
        #[case] ignored: usize,
        #[case] fill_once: usize,
    ) {
        assert_eq!(
            (rules.ignored.len(), rules.fill_once.len()),
            (ignored, fill_once)
        );
        for pattern in rules.ignored.iter().chain(&rules.fill_once) {
            assert_eq!(PathPattern::parse(pattern.as_str()).as_ref(), Ok(pattern));
            assert!(pattern.as_str().starts_with("spec.") && !pattern.as_str().contains(' '));
        }
    }

    #[test]
    fn each_kind_has_one_record_and_each_controller_is_listed_once() {
        for (i, p) in PROVIDERS.iter().enumerate() {
            assert!(
                PROVIDERS[..i]
                    .iter()
                    .all(|q| q.config_kind != p.config_kind),
                "{} twice",
                p.config_kind
            );
            assert!(
                DEFAULT_CONTROLLER_USERS.contains(&p.controller),
                "{}",
                p.config_kind
            );
            assert!(
                p.controller.starts_with("system:serviceaccount:"),
                "{}",
                p.config_kind
            );
            assert!(p
                .template_fill_once
                .iter()
                .all(|t| t.as_str().starts_with("spec.template.spec.")));
        }
        assert_eq!(DEFAULT_CONTROLLER_USERS[0], CAPI_CORE_CONTROLLER);
        for (i, user) in DEFAULT_CONTROLLER_USERS.iter().enumerate() {
            assert!(
                !DEFAULT_CONTROLLER_USERS[..i].contains(user),
                "{user} twice"
            );
        }
    }

    /// A record answers for its kinds in its own group only: a kind of the same name in another
    /// group is no provider's, and its lookups need the person's `kindVersions`.
    #[rstest]
    #[case::config(
        BOOTSTRAP_GROUP,
        "KubeadmConfig",
        true,
        Some("kubeadm"),
        Some("bootstrap.cluster.x-k8s.io/v1beta2")
    )]
    #[case::own_lookup_version(
        BOOTSTRAP_GROUP,
        "TalosConfig",
        true,
        Some("talos"),
        Some("bootstrap.cluster.x-k8s.io/v1alpha3")
    )]
    #[case::template_recorded_not_looked_up(
        BOOTSTRAP_GROUP,
        "RKE2ConfigTemplate",
        true,
        None,
        None
    )]
    #[case::same_name_other_group("bootstrap.example.com", "KubeadmConfig", false, None, None)]
    #[case::template_other_group(
        "bootstrap.example.com",
        "KubeadmConfigTemplate",
        false,
        None,
        None
    )]
    #[case::unknown_kind(BOOTSTRAP_GROUP, "ExampleConfig", false, None, None)]
    fn records_by_group_and_kind(
        #[case] group: &str,
        #[case] kind: &str,
        #[case] recorded: bool,
        #[case] clusterctl: Option<&str>,
        #[case] lookup: Option<&str>,
    ) {
        let group_kind = GroupKind::new(group, kind);
        assert_eq!(is_recorded(&group_kind), recorded);
        assert_eq!(
            provider_of_group_kind(&group_kind).map(|p| p.clusterctl),
            clusterctl
        );
        let settings = crate::settings::Settings::default();
        assert_eq!(settings.lookup_api_version(&group_kind).as_deref(), lookup);
    }

    #[test]
    fn the_default_kinds_are_each_record_in_its_group() {
        let defaults: Vec<String> = default_bootstrap_config_kinds()
            .map(|gk| gk.qualified().to_string())
            .collect();
        let records: Vec<String> = PROVIDERS
            .iter()
            .map(|p| format!("{}.{}", p.config_kind, p.group))
            .collect();
        assert_eq!(defaults, records);
    }

    /// A path of keys, `spec.template.spec.version`.
    fn path(dotted: &str) -> FieldPath {
        let mut keys = dotted.split('.');
        let first = FieldPath::root(keys.next().unwrap());
        keys.fold(first, |path, key| path.child(key))
    }

    /// k0smotron's documented version bump is the only documented in-place template edit: the
    /// version alone, of a K0sWorkerConfigTemplate; with anything else, or of any other kind,
    /// none.
    #[rstest]
    #[case::k0s_version_alone("K0sWorkerConfigTemplate", &["spec.template.spec.version"], true)]
    #[case::k0s_version_and_args("K0sWorkerConfigTemplate", &["spec.template.spec.version", "spec.template.spec.args"], false)]
    #[case::k0s_args_alone("K0sWorkerConfigTemplate", &["spec.template.spec.args"], false)]
    #[case::k0s_nothing_changed("K0sWorkerConfigTemplate", &[], false)]
    #[case::k0s_config_not_template("K0sWorkerConfig", &["spec.version"], false)]
    #[case::k0s_config_path_on_the_template("K0sWorkerConfigTemplate", &["spec.version"], false)]
    #[case::k3s_version("KThreesConfigTemplate", &["spec.template.spec.version"], false)]
    #[case::kubeadm_version("KubeadmConfigTemplate", &["spec.template.spec.version"], false)]
    #[case::unknown("ExampleConfigTemplate", &["spec.template.spec.version"], false)]
    fn documented_template_edits(
        #[case] kind: &str,
        #[case] changed: &[&str],
        #[case] documented: bool,
    ) {
        let changed: Vec<FieldPath> = changed.iter().map(|p| path(p)).collect();
        let edit = documented_template_edit(kind, changed.iter());
        assert_eq!(edit.is_some(), documented, "{kind} {changed:?}");
        if let Some(edit) = edit {
            assert_eq!(
                (edit.documented_by, edit.rolled_out_by),
                (
                    "k0smotron docs",
                    "rolls out with the MachineDeployment's version bump only"
                )
            );
        }
    }

    /// Each record's documented edit names template fields, parsed as their text says.
    #[test]
    fn documented_edits_name_template_fields() {
        let with_one: Vec<&str> = PROVIDERS
            .iter()
            .filter(|p| p.template_documented_edit.is_some())
            .map(|p| p.config_kind)
            .collect();
        assert_eq!(with_one, ["K0sWorkerConfig"]);
        for edit in PROVIDERS
            .iter()
            .filter_map(|p| p.template_documented_edit.as_ref())
        {
            assert!(!edit.paths.is_empty());
            for pattern in edit.paths {
                assert!(pattern.as_str().starts_with("spec.template.spec."));
                assert_eq!(PathPattern::parse(pattern.as_str()).as_ref(), Ok(pattern));
            }
        }
    }

    #[rstest]
    #[case::config("KubeadmConfig", None, Some("KubeadmConfig"))]
    #[case::template("RKE2ConfigTemplate", Some("RKE2Config"), None)]
    #[case::template_of_a_config_name("KubeadmConfigTemplateTemplate", None, None)]
    #[case::unknown("ExampleConfig", None, None)]
    fn records_by_kind(
        #[case] kind: &str,
        #[case] template_of: Option<&str>,
        #[case] config: Option<&str>,
    ) {
        assert_eq!(
            provider_of_template(kind).map(|p| p.config_kind),
            template_of
        );
        assert_eq!(provider_of(kind).map(|p| p.config_kind), config);
    }

    /// When an in-place edit reaches the data Secret, per config kind.
    #[rstest]
    #[case::kubeadm("KubeadmConfig", Rendering::AtTokenRotation)]
    #[case::eks("EKSConfig", Rendering::EveryReconcile)]
    #[case::nodeadm("NodeadmConfig", Rendering::EveryReconcile)]
    #[case::rke2("RKE2Config", Rendering::Once)]
    #[case::k0s("K0sWorkerConfig", Rendering::Once)]
    #[case::k3s("KThreesConfig", Rendering::Once)]
    #[case::microk8s("MicroK8sConfig", Rendering::Once)]
    #[case::talos("TalosConfig", Rendering::Once)]
    fn rendering_per_kind(#[case] kind: &str, #[case] rendering: Rendering) {
        assert_eq!(provider_of(kind).map(|p| p.rendering), Some(rendering));
    }
}
