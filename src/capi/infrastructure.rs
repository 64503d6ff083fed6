//! One record per infrastructure MachinePool kind: what new bootstrap data does to a pool's
//! EXISTING instances. CAPI's MachinePool controller copies a ready config's
//! `status.dataSecretName` into the pool and does nothing about instances (it marks every
//! MachinePool Machine up to date); the infrastructure provider decides. A `configRef` rotation
//! gives the provider a new data Secret NAME; an in-place edit, once the bootstrap provider
//! re-renders it ([`crate::capi::providers::Rendering`]), new CONTENT under the same name.
//!
//! Read from the providers' sources (each record cites repository, release and path). The
//! records are what docs/infrastructure.md's table shows (tests/infrastructure.rs holds it) and
//! what the rules say about a pool whose `infrastructureRef` names one of these kinds.

/// The group of every infrastructure MachinePool kind the policy knows.
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// The docs link every text uses for "what each infrastructure does".
pub const INFRASTRUCTURE_DOCS: &str = "https://github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/blob/main/docs/infrastructure.md";

/// What new bootstrap data does to a pool's EXISTING instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Existing instances are replaced (CAPA AWSMachinePool: instance refresh).
    ReplacesExisting,
    /// New instances only; existing ones keep what they booted with (CAPZ, CAPD, OCI, CAPG).
    NewInstancesOnly,
    /// The kind never reads bootstrap data (AKS, GKE, OKE, EKS without launch template...).
    NotRead,
}

/// Whether the kind reads bootstrap data at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadsBootstrapData {
    Always,
    Never,
    /// Only when this field (a path from the object's top, e.g. `spec.awsLaunchTemplate`) is set.
    When(&'static str),
}

/// The provider's documented way to put fresh bootstrap data on existing instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// The provider itself replaces instances on a rotation (CAPA's ASG instance refresh),
    /// unless `disabled_by` (a field path, `spec.refreshPreferences.disable`) is true.
    ByProviderOnRotation { disabled_by: Option<&'static str> },
    /// Delete MachinePool Machines (CAPI `Machine`s labelled `cluster.x-k8s.io/pool-name`,
    /// each backed by `instance_kind`); the provider scales back up with the new data (CAPZ's
    /// book: delete AzureMachinePoolMachines). `documented_by`: repo + path.
    DeleteMachinePoolMachines { documented_by: &'static str },
    /// No safe way from the management cluster: `instructions` says what the person must do.
    Manual { instructions: &'static str },
    /// Not applicable: bootstrap data is never read.
    NotApplicable,
}

/// A field of the infrastructure kind that changes what new bootstrap data does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knob {
    pub path: &'static str,
    pub effect: &'static str,
}

/// Where a fact was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    pub repository: &'static str,
    pub release: &'static str,
    pub path: &'static str,
    pub fact: &'static str,
}

/// An infrastructure MachinePool kind, as the policy knows it.
#[derive(Debug)]
pub struct Infrastructure {
    /// clusterctl/provider name, as users say it: "CAPA", "CAPZ", "CAPG", "CAPD", "CAPOCI", ...
    pub provider: &'static str,
    /// `infrastructure.cluster.x-k8s.io`.
    pub group: &'static str,
    /// `AzureMachinePool`.
    pub kind: &'static str,
    pub reads_bootstrap_data: ReadsBootstrapData,
    /// configRef rotated: a new data Secret NAME.
    pub on_rotation: Effect,
    /// The same data Secret, new CONTENT (CABPK at token rotation, EKSConfig every reconcile).
    pub on_content_change: Effect,
    pub knobs: &'static [Knob],
    pub replacement: Replacement,
    /// The infrastructure kind of its MachinePool Machines, when the provider makes them
    /// (`AzureMachinePoolMachine` always; `DockerMachine`; CAPA's `AWSMachine` behind its
    /// MachinePoolMachines feature gate): `(kind, always)`.
    pub instance_kind: Option<(&'static str, bool)>,
    pub sources: &'static [Source],
}

const CAPA: &str = "kubernetes-sigs/cluster-api-provider-aws";
const CAPA_RELEASE: &str = "v2.11.1";
const CAPZ: &str = "kubernetes-sigs/cluster-api-provider-azure";
const CAPZ_RELEASE: &str = "v1.26.0";
const CAPG: &str = "kubernetes-sigs/cluster-api-provider-gcp";
const CAPG_RELEASE: &str = "v1.12.0";
const CAPI: &str = "kubernetes-sigs/cluster-api";
const CAPI_RELEASE: &str = "v1.14.3";
const CAPOCI: &str = "oracle/cluster-api-provider-oci";
const CAPOCI_RELEASE: &str = "v0.24.0";

/// What a kind that never reads bootstrap data is, as a record.
const fn never_read(
    provider: &'static str,
    kind: &'static str,
    sources: &'static [Source],
) -> Infrastructure {
    Infrastructure {
        provider,
        group: INFRASTRUCTURE_GROUP,
        kind,
        reads_bootstrap_data: ReadsBootstrapData::Never,
        on_rotation: Effect::NotRead,
        on_content_change: Effect::NotRead,
        knobs: &[],
        replacement: Replacement::NotApplicable,
        instance_kind: None,
        sources,
    }
}

/// Every infrastructure MachinePool kind the policy knows, by provider.
pub const INFRASTRUCTURES: [Infrastructure; 13] = [
    Infrastructure {
        provider: "CAPA",
        group: INFRASTRUCTURE_GROUP,
        kind: "AWSMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::ReplacesExisting,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[
            Knob {
                path: "spec.refreshPreferences.disable",
                effect: "true: no instance refresh; a rotation then reaches new instances only",
            },
            Knob {
                path: "spec.refreshPreferences.strategy",
                effect: "the ASG instance refresh strategy (Rolling)",
            },
            Knob {
                path: "spec.refreshPreferences.minHealthyPercentage",
                effect: "how many instances stay in service during the refresh",
            },
            Knob {
                path: "spec.refreshPreferences.maxHealthyPercentage",
                effect: "how far above capacity the refresh may go",
            },
            Knob {
                path: "spec.refreshPreferences.instanceWarmup",
                effect: "seconds a new instance gets before it counts as healthy",
            },
        ],
        replacement: Replacement::ByProviderOnRotation {
            disabled_by: Some("spec.refreshPreferences.disable"),
        },
        instance_kind: Some(("AWSMachine", false)),
        sources: &[
            Source {
                repository: CAPA,
                release: CAPA_RELEASE,
                path: "pkg/cloud/services/ec2/launchtemplate.go",
                fact: "a changed user data hash makes a new launch template version; only a changed bootstrap data secret name starts an instance refresh",
            },
            Source {
                repository: CAPA,
                release: CAPA_RELEASE,
                path: "exp/controllers/awsmachinepool_controller.go",
                fact: "the instance refresh is skipped when spec.refreshPreferences.disable is true",
            },
        ],
    },
    Infrastructure {
        provider: "CAPA",
        group: INFRASTRUCTURE_GROUP,
        kind: "AWSManagedMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::When("spec.awsLaunchTemplate"),
        on_rotation: Effect::ReplacesExisting,
        on_content_change: Effect::ReplacesExisting,
        knobs: &[
            Knob {
                path: "spec.awsLaunchTemplate",
                effect: "without it the node group never reads bootstrap data",
            },
            Knob {
                path: "spec.updateConfig",
                effect: "how many nodes EKS replaces at a time (maxUnavailable, maxUnavailablePercentage)",
            },
        ],
        replacement: Replacement::ByProviderOnRotation { disabled_by: None },
        instance_kind: None,
        sources: &[Source {
            repository: CAPA,
            release: CAPA_RELEASE,
            path: "pkg/cloud/services/eks/nodegroup.go",
            fact: "any new launch template version, a same-Secret content change included, moves the node group to it and EKS replaces its nodes",
        }],
    },
    Infrastructure {
        provider: "CAPZ",
        group: INFRASTRUCTURE_GROUP,
        kind: "AzureMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::NewInstancesOnly,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[Knob {
            path: "spec.strategy.rollingUpdate",
            effect: "acts on model changes (image, SKU, identity, zones), never on bootstrap data",
        }],
        replacement: Replacement::DeleteMachinePoolMachines {
            documented_by: "kubernetes-sigs/cluster-api-provider-azure docs/book/src/self-managed/machinepools.md",
        },
        instance_kind: Some(("AzureMachinePoolMachine", true)),
        sources: &[
            Source {
                repository: CAPZ,
                release: CAPZ_RELEASE,
                path: "azure/services/scalesets/spec.go",
                fact: "bootstrap data is allowed to get stale: new custom data goes into the VMSS model only at a scale-up or a model change",
            },
            Source {
                repository: CAPZ,
                release: CAPZ_RELEASE,
                path: "azure/scope/machinepoolmachine.go",
                fact: "latestModelApplied compares the image only: the rolling strategy never picks an instance for its bootstrap data",
            },
            Source {
                repository: CAPZ,
                release: CAPZ_RELEASE,
                path: "docs/book/src/self-managed/machinepools.md",
                fact: "deleting an AzureMachinePoolMachine deletes its VM; the scale set scales back up",
            },
        ],
    },
    never_read(
        "CAPZ",
        "AzureManagedMachinePool",
        &[Source {
            repository: CAPZ,
            release: CAPZ_RELEASE,
            path: "azure/services/agentpools/spec.go",
            fact: "an AKS agent pool: no custom data from the bootstrap config",
        }],
    ),
    never_read(
        "CAPZ",
        "AzureASOManagedMachinePool",
        &[Source {
            repository: CAPZ,
            release: CAPZ_RELEASE,
            path: "exp/controllers/azureasomanagedmachinepool_controller.go",
            fact: "an AKS agent pool through ASO: no custom data from the bootstrap config",
        }],
    ),
    Infrastructure {
        provider: "CAPG",
        group: INFRASTRUCTURE_GROUP,
        kind: "GCPMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::NewInstancesOnly,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[],
        replacement: Replacement::Manual {
            instructions: "replace the managed instance group's VMs from GCP (a rolling replace)",
        },
        instance_kind: None,
        sources: &[
            Source {
                repository: CAPG,
                release: CAPG_RELEASE,
                path: "cloud/scope/machinepool.go",
                fact: "the instance template is named by a hash of its content, user data included",
            },
            Source {
                repository: CAPG,
                release: CAPG_RELEASE,
                path: "cloud/services/compute/instancegroupmanagers/instancegroupmanagers_reconcile.go",
                fact: "a new template is set with setInstanceTemplate and no PROACTIVE update policy: existing VMs are kept",
            },
        ],
    },
    never_read(
        "CAPG",
        "GCPManagedMachinePool",
        &[Source {
            repository: CAPG,
            release: CAPG_RELEASE,
            path: "cloud/services/container/nodepools/reconcile.go",
            fact: "a GKE node pool: no user data from the bootstrap config",
        }],
    ),
    Infrastructure {
        provider: "CAPD",
        group: INFRASTRUCTURE_GROUP,
        kind: "DockerMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::NewInstancesOnly,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[],
        replacement: Replacement::Manual {
            instructions: "delete the pool's Machines; new containers boot with the new data",
        },
        instance_kind: Some(("DockerMachine", true)),
        sources: &[Source {
            repository: CAPI,
            release: CAPI_RELEASE,
            path: "test/infrastructure/docker/internal/controllers/backends/docker/dockermachinepool_backend.go",
            fact: "a machine is outdated when its node image differs, never for its bootstrap data",
        }],
    },
    Infrastructure {
        provider: "CAPD",
        group: INFRASTRUCTURE_GROUP,
        kind: "DevMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::NewInstancesOnly,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[],
        replacement: Replacement::Manual {
            instructions: "delete the pool's Machines; new ones boot with the new data",
        },
        instance_kind: Some(("DevMachine", true)),
        sources: &[Source {
            repository: CAPI,
            release: CAPI_RELEASE,
            path: "test/infrastructure/docker/internal/controllers/devmachinepool_controller.go",
            fact: "the docker backend's machine pool: outdated means the node image only",
        }],
    },
    Infrastructure {
        provider: "CAPOCI",
        group: INFRASTRUCTURE_GROUP,
        kind: "OCIMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::NewInstancesOnly,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[],
        replacement: Replacement::Manual {
            instructions: "replace the instance pool's instances from OCI",
        },
        instance_kind: None,
        sources: &[Source {
            repository: CAPOCI,
            release: CAPOCI_RELEASE,
            path: "cloud/scope/machine_pool.go",
            fact: "new user data makes a new instance configuration for the instance pool; existing instances are kept",
        }],
    },
    never_read(
        "CAPOCI",
        "OCIManagedMachinePool",
        &[Source {
            repository: CAPOCI,
            release: CAPOCI_RELEASE,
            path: "cloud/scope/managed_machine_pool.go",
            fact: "an OKE node pool: no user data from the bootstrap config",
        }],
    ),
    never_read(
        "CAPOCI",
        "OCIVirtualMachinePool",
        &[Source {
            repository: CAPOCI,
            release: CAPOCI_RELEASE,
            path: "cloud/scope/virtual_machine_pool.go",
            fact: "an OKE virtual node pool: no user data from the bootstrap config",
        }],
    ),
    never_read(
        "CAPS",
        "ScalewayManagedMachinePool",
        &[Source {
            repository: "scaleway/cluster-api-provider-scaleway",
            release: "main",
            path: "internal/service/scaleway/k8s/pool",
            fact: "a Kapsule pool: no user data from the bootstrap config",
        }],
    ),
];

/// The record of an infrastructure MachinePool kind (`apiVersion`'s group and `kind`, as in a
/// pool's `spec.template.spec.infrastructureRef`), if the policy knows it.
pub fn infrastructure(group: &str, kind: &str) -> Option<&'static Infrastructure> {
    INFRASTRUCTURES
        .iter()
        .find(|i| i.group == group && i.kind == kind)
}

impl Infrastructure {
    /// What a rotation does to this pool's existing instances, one short sentence for
    /// messages and the CLI.
    pub fn after_rotation(&self) -> String {
        let kind = self.kind;
        match (self.on_rotation, self.reads_bootstrap_data, self.replacement) {
            (Effect::NotRead, _, _) | (_, ReadsBootstrapData::Never, _) => {
                format!("{kind} never reads bootstrap data: neither a rotation nor an edit reaches its nodes")
            }
            (Effect::ReplacesExisting, ReadsBootstrapData::When(field), _) => format!(
                "{kind} rolls every node to a new launch template version if it has {field}; without one it reads no bootstrap data"
            ),
            (
                Effect::ReplacesExisting,
                _,
                Replacement::ByProviderOnRotation {
                    disabled_by: Some(field),
                },
            ) => format!(
                "{kind} replaces the existing instances (instance refresh) unless {field} is true"
            ),
            (Effect::ReplacesExisting, _, _) => {
                format!("{kind} replaces the existing instances")
            }
            (Effect::NewInstancesOnly, _, replacement) => format!(
                "{kind} replaces no existing instance: new instances take the new data; {}",
                replacement_hint(self.provider, replacement)
            ),
        }
    }

    /// What a same-name content change does (for AWSManagedMachinePool with a launch template:
    /// it rolls every node at once).
    pub fn after_content_change(&self) -> String {
        let kind = self.kind;
        match (self.on_content_change, self.reads_bootstrap_data) {
            (Effect::NotRead, _) | (_, ReadsBootstrapData::Never) => {
                format!("{kind} never reads bootstrap data: an in-place edit reaches no node")
            }
            (Effect::ReplacesExisting, ReadsBootstrapData::When(field)) => format!(
                "{kind} rolls every node at once on a new launch template version, an in-place edit included, if it has {field}"
            ),
            (Effect::ReplacesExisting, _) => {
                format!("{kind} replaces the existing instances on an in-place edit")
            }
            (Effect::NewInstancesOnly, _) => format!(
                "{kind} gives an in-place edit to new instances only, once the data Secret is re-rendered"
            ),
        }
    }
}

/// How to put the new data on existing instances, where the provider does not.
fn replacement_hint(provider: &str, replacement: Replacement) -> String {
    match replacement {
        Replacement::DeleteMachinePoolMachines { .. } => {
            format!("delete MachinePool Machines to replace them ({provider} docs)")
        }
        Replacement::Manual { instructions } => instructions.to_string(),
        Replacement::ByProviderOnRotation { .. } | Replacement::NotApplicable => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::capa(INFRASTRUCTURE_GROUP, "AWSMachinePool", Some("CAPA"))]
    #[case::eks(INFRASTRUCTURE_GROUP, "AWSManagedMachinePool", Some("CAPA"))]
    #[case::capz(INFRASTRUCTURE_GROUP, "AzureMachinePool", Some("CAPZ"))]
    #[case::aks(INFRASTRUCTURE_GROUP, "AzureManagedMachinePool", Some("CAPZ"))]
    #[case::aks_aso(INFRASTRUCTURE_GROUP, "AzureASOManagedMachinePool", Some("CAPZ"))]
    #[case::capg(INFRASTRUCTURE_GROUP, "GCPMachinePool", Some("CAPG"))]
    #[case::gke(INFRASTRUCTURE_GROUP, "GCPManagedMachinePool", Some("CAPG"))]
    #[case::capd(INFRASTRUCTURE_GROUP, "DockerMachinePool", Some("CAPD"))]
    #[case::dev(INFRASTRUCTURE_GROUP, "DevMachinePool", Some("CAPD"))]
    #[case::oci(INFRASTRUCTURE_GROUP, "OCIMachinePool", Some("CAPOCI"))]
    #[case::oke(INFRASTRUCTURE_GROUP, "OCIManagedMachinePool", Some("CAPOCI"))]
    #[case::oke_virtual(INFRASTRUCTURE_GROUP, "OCIVirtualMachinePool", Some("CAPOCI"))]
    #[case::kapsule(INFRASTRUCTURE_GROUP, "ScalewayManagedMachinePool", Some("CAPS"))]
    #[case::unknown_kind(INFRASTRUCTURE_GROUP, "ExampleMachinePool", None)]
    #[case::other_group("example.com", "AzureMachinePool", None)]
    #[case::case_matters(INFRASTRUCTURE_GROUP, "azuremachinepool", None)]
    #[case::empty("", "", None)]
    fn records_by_group_and_kind(
        #[case] group: &str,
        #[case] kind: &str,
        #[case] provider: Option<&str>,
    ) {
        assert_eq!(infrastructure(group, kind).map(|i| i.provider), provider);
        if let Some(record) = infrastructure(group, kind) {
            assert_eq!(record.kind, kind);
        }
    }

    #[rstest]
    #[case::capa(
        "AWSMachinePool",
        "AWSMachinePool replaces the existing instances (instance refresh) unless spec.refreshPreferences.disable is true"
    )]
    #[case::eks(
        "AWSManagedMachinePool",
        "AWSManagedMachinePool rolls every node to a new launch template version if it has spec.awsLaunchTemplate; without one it reads no bootstrap data"
    )]
    #[case::capz(
        "AzureMachinePool",
        "AzureMachinePool replaces no existing instance: new instances take the new data; delete MachinePool Machines to replace them (CAPZ docs)"
    )]
    #[case::capg(
        "GCPMachinePool",
        "GCPMachinePool replaces no existing instance: new instances take the new data; replace the managed instance group's VMs from GCP (a rolling replace)"
    )]
    #[case::capd(
        "DockerMachinePool",
        "DockerMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines; new containers boot with the new data"
    )]
    #[case::oci(
        "OCIMachinePool",
        "OCIMachinePool replaces no existing instance: new instances take the new data; replace the instance pool's instances from OCI"
    )]
    #[case::aks(
        "AzureManagedMachinePool",
        "AzureManagedMachinePool never reads bootstrap data: neither a rotation nor an edit reaches its nodes"
    )]
    fn what_a_rotation_does(#[case] kind: &str, #[case] text: &str) {
        let record = infrastructure(INFRASTRUCTURE_GROUP, kind).unwrap();
        assert_eq!(record.after_rotation(), text);
    }

    #[rstest]
    #[case::capa(
        "AWSMachinePool",
        "AWSMachinePool gives an in-place edit to new instances only, once the data Secret is re-rendered"
    )]
    #[case::eks(
        "AWSManagedMachinePool",
        "AWSManagedMachinePool rolls every node at once on a new launch template version, an in-place edit included, if it has spec.awsLaunchTemplate"
    )]
    #[case::capz(
        "AzureMachinePool",
        "AzureMachinePool gives an in-place edit to new instances only, once the data Secret is re-rendered"
    )]
    #[case::gke(
        "GCPManagedMachinePool",
        "GCPManagedMachinePool never reads bootstrap data: an in-place edit reaches no node"
    )]
    fn what_a_content_change_does(#[case] kind: &str, #[case] text: &str) {
        let record = infrastructure(INFRASTRUCTURE_GROUP, kind).unwrap();
        assert_eq!(record.after_content_change(), text);
    }

    /// The records agree with themselves: one per kind, every kind a MachinePool kind of the
    /// infrastructure group, a kind that never reads data has no effect and no replacement,
    /// one that reads it cites at least one source, and a provider replacement on rotation
    /// goes with a rotation that replaces.
    #[test]
    fn records_are_consistent() {
        for (i, record) in INFRASTRUCTURES.iter().enumerate() {
            let kind = record.kind;
            assert!(
                INFRASTRUCTURES[..i].iter().all(|r| r.kind != kind),
                "{kind} twice"
            );
            assert_eq!(record.group, INFRASTRUCTURE_GROUP, "{kind}");
            assert!(kind.ends_with("MachinePool"), "{kind}");
            assert!(!record.sources.is_empty(), "{kind} cites no source");
            let never = record.reads_bootstrap_data == ReadsBootstrapData::Never;
            assert_eq!(never, record.on_rotation == Effect::NotRead, "{kind}");
            assert_eq!(never, record.on_content_change == Effect::NotRead, "{kind}");
            assert_eq!(
                never,
                record.replacement == Replacement::NotApplicable,
                "{kind}"
            );
            assert_eq!(
                matches!(record.replacement, Replacement::ByProviderOnRotation { .. }),
                record.on_rotation == Effect::ReplacesExisting,
                "{kind}"
            );
            if let ReadsBootstrapData::When(field) = record.reads_bootstrap_data {
                assert!(field.starts_with("spec."), "{kind}");
            }
            for knob in record.knobs {
                assert!(knob.path.starts_with("spec."), "{kind}: {}", knob.path);
            }
            for source in record.sources {
                assert!(source.repository.contains('/'), "{kind}");
                assert!(!source.path.is_empty() && !source.fact.is_empty(), "{kind}");
            }
        }
    }
}
