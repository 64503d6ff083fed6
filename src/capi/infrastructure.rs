//! One record per infrastructure MachinePool kind: what new bootstrap data does to a pool's
//! EXISTING instances. CAPI's MachinePool controller copies a ready config's
//! `status.dataSecretName` into the pool and does nothing about instances (it marks every
//! MachinePool Machine up to date); the infrastructure provider decides. A `configRef` rotation
//! gives the provider a new data Secret NAME; an in-place edit, once the bootstrap provider
//! re-renders it ([`crate::capi::providers::Rendering`]), new CONTENT under the same name.
//!
//! Read from the providers' sources (each record cites repository, release and path; where an
//! effect is inferred from a cloud's documentation instead, `inferred_from` says so). The
//! records are what docs/infrastructure.md's table shows (tests/infrastructure.rs holds it) and
//! what the rules say about a pool whose `infrastructureRef` names one of these kinds.
//!
//! Why one file: the records are data, so a provider is one place (its
//! record and its cases in the rstest tables below).

use crate::capi::kinds::GroupKind;
use crate::capi::providers::{provider_of, Rendering};

/// The group of every infrastructure MachinePool kind the policy knows.
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// The docs link every text uses for "what each infrastructure does".
pub const INFRASTRUCTURE_DOCS: &str = "https://github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy/blob/main/docs/infrastructure.md";

/// What new bootstrap data does to a pool's EXISTING instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Existing instances are replaced (CAPA AWSMachinePool: an instance refresh; an EKS node
    /// group with a launch template: a managed node group update).
    ReplacesExisting,
    /// New instances only; existing ones keep what they booted with (CAPZ, CAPD, OCI; CAPG, as
    /// inferred from Google's API reference).
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
    /// The provider itself replaces instances on a rotation (the record's `replaced_with`:
    /// CAPA's instance refresh, EKS's managed node group update), unless `disabled_by` (a field
    /// path, `spec.refreshPreferences.disable`) is true.
    ByProviderOnRotation { disabled_by: Option<&'static str> },
    /// Delete MachinePool Machines (CAPI `Machine`s labelled `cluster.x-k8s.io/pool-name`,
    /// each backed by `instance_kind`): CAPI drains the node, then deletes the infrastructure
    /// machine, and the provider scales back up with the new data. `documented_by`: repo +
    /// path of what shows that deleting instances works: CAPZ's book, which deletes the
    /// `AzureMachinePoolMachine` itself (no drain); CAPD's source.
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
    /// How the provider replaces existing instances itself, where a rotation or new content
    /// does (`Effect::ReplacesExisting`), as the texts name it: "an instance refresh" (an Auto
    /// Scaling group's), "an EKS managed node group update".
    pub replaced_with: Option<&'static str>,
    /// When the provider's own replacement does not happen although this record says it
    /// replaces, in a few words for messages (CAPA v2.11.1's edges).
    pub replacement_edges: Option<&'static str>,
    /// Where what becomes of existing instances is inferred rather than read in the provider's
    /// code: what it is inferred from ("Google's API reference": CAPG sets no update policy, and
    /// Google's reference says what `setInstanceTemplate` does without one).
    pub inferred_from: Option<&'static str>,
    pub sources: &'static [Source],
}

const CAPA: &str = "kubernetes-sigs/cluster-api-provider-aws";
const CAPA_RELEASE: &str = "v2.11.1";
const CAPZ: &str = "kubernetes-sigs/cluster-api-provider-azure";
const CAPZ_RELEASE: &str = "v1.26.0";
const CAPG: &str = "kubernetes-sigs/cluster-api-provider-gcp";
const CAPG_RELEASE: &str = "v1.12.0";
const CAPI: &str = "kubernetes-sigs/cluster-api";
const CAPD_RELEASE: &str = "v1.14.0";
const CAPOCI: &str = "oracle/cluster-api-provider-oci";
const CAPOCI_RELEASE: &str = "v0.24.0";

/// A kind that never reads bootstrap data, as a record.
const fn never_read(
    provider: &'static str,
    kind: &'static str,
    instance_kind: Option<(&'static str, bool)>,
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
        instance_kind,
        replaced_with: None,
        replacement_edges: None,
        inferred_from: None,
        sources,
    }
}

/// Every infrastructure MachinePool kind the policy knows, by provider. Providers with no
/// MachinePool kind (CAPH, CAPIBM, Metal3, OpenStack, vSphere) have no record: a pool on an
/// unknown kind gets the text that holds everywhere.
pub const INFRASTRUCTURES: &[Infrastructure] = &[
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
                effect: "the Auto Scaling group's refresh strategy (default Rolling)",
            },
            Knob {
                path: "spec.refreshPreferences.minHealthyPercentage",
                effect: "the share of instances kept in service during the refresh",
            },
            Knob {
                path: "spec.refreshPreferences.maxHealthyPercentage",
                effect: "how far above the desired capacity the refresh may go",
            },
            Knob {
                path: "spec.refreshPreferences.instanceWarmup",
                effect: "seconds a new instance gets before it counts as healthy",
            },
        ],
        replacement: Replacement::ByProviderOnRotation {
            disabled_by: Some("spec.refreshPreferences.disable"),
        },
        // MachinePool Machines only behind CAPA's MachinePoolMachines feature gate (alpha,
        // off by default: feature/feature.go L57-61), which sets
        // status.infrastructureMachineKind: AWSMachine (awsmachinepool_controller.go L203-205).
        instance_kind: Some(("AWSMachine", false)),
        replaced_with: Some("an instance refresh"),
        replacement_edges: Some(
            "CAPA v2.11.1 starts none on the first change after an upgrade from a CAPA that did not tag the launch template with the data Secret's name, and does not retry one that fails to start",
        ),
        inferred_from: None,
        sources: &[
            Source {
                repository: CAPA,
                release: CAPA_RELEASE,
                path: "pkg/cloud/services/ec2/launchtemplate.go L241-332",
                fact: "a new data Secret name (userDataSecretKeyChanged) makes a new launch template version and starts an instance refresh, even for identical bytes; new content under the same name (userDataHashChanged) makes a new version without one; a launch template without the data Secret's name tag (made by an older CAPA) gets it in a new version, without a refresh",
            },
            Source {
                repository: CAPA,
                release: CAPA_RELEASE,
                path: "exp/controllers/awsmachinepool_controller.go L308-345",
                fact: "no refresh when spec.refreshPreferences.disable is true; a refresh that fails to start is not retried",
            },
            Source {
                repository: CAPA,
                release: CAPA_RELEASE,
                path: "pkg/cloud/services/autoscaling/autoscalinggroup.go L213, L352-388",
                fact: "the Auto Scaling group launches $Latest: new instances take the newest version; StartASGInstanceRefresh applies strategy, instanceWarmup, min/maxHealthyPercentage",
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
                effect: "how many nodes EKS replaces at a time (maxUnavailable or maxUnavailablePercentage)",
            },
        ],
        replacement: Replacement::ByProviderOnRotation { disabled_by: None },
        instance_kind: None,
        replaced_with: Some("an EKS managed node group update"),
        replacement_edges: None,
        inferred_from: None,
        sources: &[
            Source {
                repository: CAPA,
                release: CAPA_RELEASE,
                path: "exp/controllers/awsmanagedmachinepool_controller.go L215-247",
                fact: "the launch template (and with it the bootstrap data) is reconciled only when spec.awsLaunchTemplate is set",
            },
            Source {
                repository: CAPA,
                release: CAPA_RELEASE,
                path: "pkg/cloud/services/eks/nodegroup.go L337-358",
                fact: "any new launch template version, new content under the same data Secret included, moves the node group to it (UpdateNodegroupVersion): EKS replaces every node, paced by spec.updateConfig",
            },
        ],
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
            effect: "replaces instances on model changes (image, identity, zones, SKU), never for their bootstrap data",
        }],
        // The book deletes the AzureMachinePoolMachine, which deletes the VM without a drain;
        // deleting the CAPI Machine drains first, then deletes it (the sources below). Either
        // way the scale-up that follows writes the new custom data into the scale set's model.
        replacement: Replacement::DeleteMachinePoolMachines {
            documented_by: "kubernetes-sigs/cluster-api-provider-azure docs/book/src/self-managed/machinepools.md",
        },
        instance_kind: Some(("AzureMachinePoolMachine", true)),
        replaced_with: None,
        replacement_edges: None,
        inferred_from: None,
        sources: &[
            Source {
                repository: CAPZ,
                release: CAPZ_RELEASE,
                path: "azure/services/scalesets/spec.go L98-155",
                fact: "no scale set update unless the capacity grows or the model changes (\"Bootstrap data is allowed to get stale\"); new custom data rides along only then (capz-custom-data-hash tag)",
            },
            Source {
                repository: CAPZ,
                release: CAPZ_RELEASE,
                path: "azure/scope/machinepoolmachine.go L415-448",
                fact: "latestModelApplied compares the image only: the rolling strategy never picks an instance for its bootstrap data",
            },
            Source {
                repository: CAPZ,
                release: CAPZ_RELEASE,
                path: "docs/book/src/self-managed/machinepools.md L126-132",
                fact: "delete an AzureMachinePoolMachine to delete its VM and control rollouts by hand; the scale set scales back up",
            },
            Source {
                repository: CAPZ,
                release: CAPZ_RELEASE,
                path: "exp/controllers/azuremachinepoolmachine_controller.go L323-371, L406-428",
                fact: "deleting an AzureMachinePoolMachine deletes its VM and drains nothing (\"node drain already done by owner Machine\")",
            },
            Source {
                repository: CAPI,
                release: CAPD_RELEASE,
                path: "core/reconcilers/machine/machine_controller.go L516-518, L682-693",
                fact: "deleting a Machine drains its node, then deletes its infrastructure machine; no drain when that is already being deleted",
            },
        ],
    },
    never_read(
        "CAPZ",
        "AzureManagedMachinePool",
        None,
        &[Source {
            repository: CAPZ,
            release: CAPZ_RELEASE,
            path: "azure/scope/machinepool.go",
            fact: "only the AzureMachinePool and AzureMachine scopes read dataSecretName; no AKS code does",
        }],
    ),
    never_read(
        "CAPZ",
        "AzureASOManagedMachinePool",
        None,
        &[Source {
            repository: CAPZ,
            release: CAPZ_RELEASE,
            path: "azure/scope/machinepool.go",
            fact: "only the AzureMachinePool and AzureMachine scopes read dataSecretName; no AKS code does",
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
            instructions: "drain the nodes, then replace the VMs of the managed instance group from GCP (gcloud compute instance-groups managed rolling-action replace)",
        },
        instance_kind: None,
        replaced_with: None,
        replacement_edges: None,
        inferred_from: Some("Google's API reference"),
        sources: &[
            Source {
                repository: CAPG,
                release: CAPG_RELEASE,
                path: "cloud/services/compute/instancetemplates/instancetemplate_reconcile.go L106-136",
                fact: "the instance template is named by a hash of its content, user-data included: new data, new template",
            },
            Source {
                repository: CAPG,
                release: CAPG_RELEASE,
                path: "cloud/scope/machinepool.go L176-219",
                fact: "the managed instance group gets a name, template, size and zone, no update policy",
            },
            Source {
                repository: CAPG,
                release: CAPG_RELEASE,
                path: "cloud/services/compute/instancegroupmanagers/instancegroupmanagers_reconcile.go L142-153",
                fact: "setInstanceTemplate, which per Google's API reference (not CAPG's code) leaves existing VMs on their template unless a proactive update policy or an explicit recreate asks otherwise",
            },
        ],
    },
    never_read(
        "CAPG",
        "GCPManagedMachinePool",
        // It reports its own kind as status.infrastructureMachineKind
        // (cloud/scope/managedmachinepool.go L316-322): no instance objects to act on.
        None,
        &[Source {
            repository: CAPG,
            release: CAPG_RELEASE,
            path: "cloud/scope/managedmachinepool.go",
            fact: "a GKE node pool: neither the scope nor cloud/services/container reads bootstrap data",
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
        replacement: Replacement::DeleteMachinePoolMachines {
            documented_by: "kubernetes-sigs/cluster-api test/infrastructure/docker/internal/controllers/dockermachinepool_controller_phases.go (source; CAPD has no docs)",
        },
        instance_kind: Some(("DockerMachine", true)),
        replaced_with: None,
        replacement_edges: None,
        inferred_from: None,
        sources: &[
            Source {
                repository: CAPI,
                release: CAPD_RELEASE,
                path: "test/infrastructure/docker/internal/controllers/dockermachinepool_controller_phases.go L49-72, L362-374",
                fact: "a container is outdated when its image differs, never for its bootstrap data; the pool tops its containers up to replicas",
            },
            Source {
                repository: CAPI,
                release: CAPD_RELEASE,
                path: "test/infrastructure/docker/internal/controllers/backends/docker/dockermachine_backend.go L86-97",
                fact: "a pool's DockerMachine bootstraps once, from the pool's current spec.template.spec.bootstrap.dataSecretName",
            },
        ],
    },
    Infrastructure {
        provider: "CAPD",
        group: INFRASTRUCTURE_GROUP,
        kind: "DevMachinePool",
        reads_bootstrap_data: ReadsBootstrapData::Always,
        on_rotation: Effect::NewInstancesOnly,
        on_content_change: Effect::NewInstancesOnly,
        knobs: &[],
        replacement: Replacement::DeleteMachinePoolMachines {
            documented_by: "kubernetes-sigs/cluster-api test/infrastructure/docker/internal/controllers/backends/docker/dockermachinepool_backend.go (source; CAPD has no docs)",
        },
        instance_kind: Some(("DevMachine", true)),
        replaced_with: None,
        replacement_edges: None,
        inferred_from: None,
        sources: &[Source {
            repository: CAPI,
            release: CAPD_RELEASE,
            path: "test/infrastructure/docker/internal/controllers/backends/docker/dockermachinepool_backend.go L491-517",
            fact: "the docker backend of DevMachinePool: outdated means the node image only",
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
        // Deleting an OCIMachinePoolMachine (or its Machine) removes its finalizer only: the
        // instance keeps running (exp/controllers/ocimachinepoolmachine_controller.go L48-71).
        replacement: Replacement::Manual {
            instructions: "drain the nodes, then detach their instances from the instance pool with auto-terminate and no size decrement (OCI); deleting a pool Machine leaves its instance running",
        },
        instance_kind: Some(("OCIMachinePoolMachine", true)),
        replaced_with: None,
        replacement_edges: None,
        inferred_from: None,
        sources: &[
            Source {
                repository: CAPOCI,
                release: CAPOCI_RELEASE,
                path: "cloud/scope/machine_pool.go L430-578, L822-873",
                fact: "new user data (a token-only change included) makes a new instance configuration, set on the instance pool; nothing replaces existing instances",
            },
            Source {
                repository: CAPOCI,
                release: CAPOCI_RELEASE,
                path: "exp/controllers/ocimachinepoolmachine_controller.go L48-71",
                fact: "deleting an OCIMachinePoolMachine only removes its finalizer",
            },
        ],
    },
    never_read(
        "CAPOCI",
        "OCIManagedMachinePool",
        Some(("OCIMachinePoolMachine", true)),
        &[Source {
            repository: CAPOCI,
            release: CAPOCI_RELEASE,
            path: "cloud/scope/managed_machine_pool.go",
            fact: "an OKE node pool: no dataSecretName or bootstrap data read",
        }],
    ),
    never_read(
        "CAPOCI",
        "OCIVirtualMachinePool",
        Some(("OCIMachinePoolMachine", true)),
        &[Source {
            repository: CAPOCI,
            release: CAPOCI_RELEASE,
            path: "cloud/scope/virtual_machine_pool.go",
            fact: "an OKE virtual node pool: no dataSecretName or bootstrap data read",
        }],
    ),
    never_read(
        "CAPS",
        "ScalewayManagedMachinePool",
        None,
        &[Source {
            repository: "scaleway/cluster-api-provider-scaleway",
            release: "main@453691a9",
            path: "internal/scope/managedmachinepool.go",
            fact: "a Kapsule pool: node type, scaling, version and tags, no bootstrap data read",
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
    /// messages and the CLI, e.g. "AzureMachinePool replaces no existing instance: new
    /// instances take the new data; delete the pool's Machines to replace them (CAPI drains
    /// each node first); CAPZ documents deleting their AzureMachinePoolMachines".
    pub fn after_rotation(&self) -> String {
        let kind = self.kind;
        match (self.on_rotation, self.reads_bootstrap_data, self.replacement) {
            (Effect::NotRead, _, _) | (_, ReadsBootstrapData::Never, _) => format!(
                "{kind} never reads bootstrap data: neither a rotation nor an edit reaches its nodes"
            ),
            (Effect::ReplacesExisting, ReadsBootstrapData::When(field), _) => format!(
                "{kind} rolls every node on the new launch template version if it has {field}; without one it reads no bootstrap data"
            ),
            (
                Effect::ReplacesExisting,
                _,
                Replacement::ByProviderOnRotation {
                    disabled_by: Some(field),
                },
            ) => format!(
                "{kind} replaces the existing instances{}, unless {field} is true{}",
                self.with_replacement(),
                self.replacement_edges.map_or(String::new(), |e| format!("; {e}"))
            ),
            (Effect::ReplacesExisting, _, _) => format!(
                "{kind} replaces the existing instances{}",
                self.with_replacement()
            ),
            (Effect::NewInstancesOnly, _, replacement) => {
                let how = match (replacement, self.instance_kind) {
                    // The provider documents deleting its own instance objects; deleting the
                    // CAPI Machine does that too, after CAPI drains the node.
                    (
                        Replacement::DeleteMachinePoolMachines { documented_by },
                        Some((instance_kind, _)),
                    ) if documented_by.contains(" docs/") => format!(
                        "; delete the pool's Machines to replace them (CAPI drains each node first); {} documents deleting their {instance_kind}s",
                        self.provider
                    ),
                    (Replacement::DeleteMachinePoolMachines { .. }, _) => {
                        "; delete the pool's Machines to replace them".to_string()
                    }
                    (Replacement::Manual { instructions }, _) => {
                        format!("; to replace them, {instructions}")
                    }
                    (
                        Replacement::ByProviderOnRotation { .. } | Replacement::NotApplicable,
                        _,
                    ) => String::new(),
                };
                format!(
                    "{kind} replaces no existing instance{}: new instances take the new data{how}",
                    self.inferred()
                )
            }
        }
    }

    /// ` with an instance refresh`: how the provider replaces instances itself, for a sentence.
    fn with_replacement(&self) -> String {
        self.replaced_with
            .map_or(String::new(), |with| format!(" with {with}"))
    }

    /// ` (inferred from Google's API reference)` where the record's effect is inferred.
    fn inferred(&self) -> String {
        self.inferred_from
            .map_or(String::new(), |from| format!(" (inferred from {from})"))
    }

    /// What a same-name content change does (for AWSManagedMachinePool with a launch template:
    /// it rolls every node).
    pub fn after_content_change(&self) -> String {
        let kind = self.kind;
        match (self.on_content_change, self.reads_bootstrap_data) {
            (Effect::NotRead, _) | (_, ReadsBootstrapData::Never) => {
                format!("{kind} never reads bootstrap data: an in-place edit reaches no node")
            }
            (Effect::ReplacesExisting, ReadsBootstrapData::When(field)) => format!(
                "{kind} rolls every node on a new launch template version, an in-place edit included, if it has {field}"
            ),
            (Effect::ReplacesExisting, _) => {
                format!("{kind} replaces the existing instances on new content under the same data Secret")
            }
            (Effect::NewInstancesOnly, _) => format!(
                "{kind} gives new content under the same data Secret to new instances only{}",
                self.inferred()
            ),
        }
    }
}

/// What happens to existing instances after a rotation when the pool's infrastructure is not
/// known (no lookups, or a kind without a record).
pub fn provider_decides() -> String {
    format!(
        "Whether existing instances are then replaced is the infrastructure provider's choice \
         ({INFRASTRUCTURE_DOCS})."
    )
}

/// What the refusal of an in-place edit says of the pools' infrastructure, one sentence per
/// distinct answer: `pools` is `None` without lookups, else the group and kind of each pool's
/// `spec.template.spec.infrastructureRef` (empty when it has none). An infrastructure that
/// rolls every node on new content under the same data Secret (AWSManagedMachinePool with a
/// launch template) is told that this edit would do so too, unrecorded, unless the bootstrap
/// provider renders its data once (then the edit reaches no instance).
pub fn refusal_sentence(config_kind: &str, pools: Option<&[GroupKind]>) -> String {
    let Some(kinds) = pools else {
        return provider_decides();
    };
    let renders_once = provider_of(config_kind).is_some_and(|p| p.rendering == Rendering::Once);
    let mut sentences: Vec<String> = Vec::new();
    for group_kind in kinds {
        let sentence = match infrastructure(&group_kind.group, &group_kind.kind) {
            None => provider_decides(),
            Some(record)
                if record.on_content_change == Effect::ReplacesExisting && !renders_once =>
            {
                format!(
                    "This edit would still reach the nodes, unrecorded: {}; a rotation rolls them \
                     too, recorded in the pool ({INFRASTRUCTURE_DOCS}).",
                    record.after_content_change()
                )
            }
            Some(record) if record.on_rotation == Effect::NotRead => {
                format!("{} ({INFRASTRUCTURE_DOCS}).", record.after_rotation())
            }
            Some(record) => format!(
                "On a rotation, {} ({INFRASTRUCTURE_DOCS}).",
                record.after_rotation()
            ),
        };
        if !sentences.contains(&sentence) {
            sentences.push(sentence);
        }
    }
    if sentences.is_empty() {
        return provider_decides();
    }
    sentences.join(" ")
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
        "AWSMachinePool replaces the existing instances with an instance refresh, unless spec.refreshPreferences.disable is true; CAPA v2.11.1 starts none on the first change after an upgrade from a CAPA that did not tag the launch template with the data Secret's name, and does not retry one that fails to start"
    )]
    #[case::eks(
        "AWSManagedMachinePool",
        "AWSManagedMachinePool rolls every node on the new launch template version if it has spec.awsLaunchTemplate; without one it reads no bootstrap data"
    )]
    #[case::capz(
        "AzureMachinePool",
        "AzureMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them (CAPI drains each node first); CAPZ documents deleting their AzureMachinePoolMachines"
    )]
    #[case::capg(
        "GCPMachinePool",
        "GCPMachinePool replaces no existing instance (inferred from Google's API reference): new instances take the new data; to replace them, drain the nodes, then replace the VMs of the managed instance group from GCP (gcloud compute instance-groups managed rolling-action replace)"
    )]
    #[case::capd(
        "DockerMachinePool",
        "DockerMachinePool replaces no existing instance: new instances take the new data; delete the pool's Machines to replace them"
    )]
    #[case::oci(
        "OCIMachinePool",
        "OCIMachinePool replaces no existing instance: new instances take the new data; to replace them, drain the nodes, then detach their instances from the instance pool with auto-terminate and no size decrement (OCI); deleting a pool Machine leaves its instance running"
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
        "AWSMachinePool gives new content under the same data Secret to new instances only"
    )]
    #[case::eks(
        "AWSManagedMachinePool",
        "AWSManagedMachinePool rolls every node on a new launch template version, an in-place edit included, if it has spec.awsLaunchTemplate"
    )]
    #[case::capz(
        "AzureMachinePool",
        "AzureMachinePool gives new content under the same data Secret to new instances only"
    )]
    #[case::capg(
        "GCPMachinePool",
        "GCPMachinePool gives new content under the same data Secret to new instances only (inferred from Google's API reference)"
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
    /// one that reads it cites at least one source, a provider replacement on rotation goes
    /// with a rotation that replaces, a kind that replaces names how (and only such a kind has
    /// edges to that), and only an effect of new instances only is inferred.
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
            let replaces = record.on_rotation == Effect::ReplacesExisting
                || record.on_content_change == Effect::ReplacesExisting;
            assert_eq!(replaces, record.replaced_with.is_some(), "{kind}");
            assert!(record.replacement_edges.is_none() || replaces, "{kind}");
            assert!(
                record.inferred_from.is_none() || record.on_rotation == Effect::NewInstancesOnly,
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
