//! What the analysis reports of each MachinePool, MachineDeployment and MachineSet: its
//! verdict, how sure it is, its stale instances, the causes and the fix.

use serde_json::Value;

use crate::drift::records::{Bootstrap, Infra};

/// The listed objects, as kubectl returned them (`--show-managed-fields`).
#[derive(Default)]
pub struct Inputs<'a> {
    /// Unix seconds.
    pub now: i64,
    pub pools: &'a [Value],
    /// Bootstrap configs of every kind in use.
    pub configs: &'a [Value],
    pub secrets: &'a [Value],
    /// CAPI Machines labelled `cluster.x-k8s.io/pool-name`.
    pub machines: &'a [Value],
    /// Infrastructure MachinePools (AzureMachinePool...), for their knobs.
    pub infra_pools: &'a [Value],
    /// Infrastructure machines of pools (AzureMachinePoolMachine...), for instance ages when a
    /// pool has no MachinePool Machines.
    pub infra_instances: &'a [Value],
    /// MachineDeployments.
    pub deployments: &'a [Value],
    /// MachineSets (those a MachineDeployment owns tell its current Machines; the others are
    /// judged on their own).
    pub machine_sets: &'a [Value],
    /// Bootstrap templates of every kind MachineDeployments and MachineSets name.
    pub templates: &'a [Value],
    /// CAPI Machines: those a MachineSet owns (by their owner reference) are its; their own
    /// configs are in `configs`. Others are ignored here, so the list of `machines` serves.
    pub set_machines: &'a [Value],
    /// How the printed commands reach the same cluster (` --context prod`), or empty.
    pub cluster_flags: String,
}

/// The kinds drift judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkerKind {
    MachinePool,
    MachineDeployment,
    MachineSet,
}

impl WorkerKind {
    pub const ALL: [WorkerKind; 3] = [
        WorkerKind::MachinePool,
        WorkerKind::MachineDeployment,
        WorkerKind::MachineSet,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WorkerKind::MachinePool => "MachinePool",
            WorkerKind::MachineDeployment => "MachineDeployment",
            WorkerKind::MachineSet => "MachineSet",
        }
    }

    /// kubectl's name for an argument: `machinepool/NAME`.
    pub fn arg(self) -> &'static str {
        match self {
            WorkerKind::MachinePool => "machinepool",
            WorkerKind::MachineDeployment => "machinedeployment",
            WorkerKind::MachineSet => "machineset",
        }
    }

    pub fn resource(self) -> &'static str {
        match self {
            WorkerKind::MachinePool => "machinepools.cluster.x-k8s.io",
            WorkerKind::MachineDeployment => "machinedeployments.cluster.x-k8s.io",
            WorkerKind::MachineSet => "machinesets.cluster.x-k8s.io",
        }
    }

    /// `machinepool/NAME` as kubectl takes it (the plural, the short name `mp`, `md`, `ms`, the
    /// `.cluster.x-k8s.io` suffix): the kind and a name that is not empty; `None` otherwise.
    pub fn of_arg(arg: &str) -> Option<(WorkerKind, &str)> {
        let (kind, name) = arg.split_once('/')?;
        let kind = kind
            .strip_suffix(".cluster.x-k8s.io")
            .unwrap_or(kind)
            .to_lowercase();
        let found = match kind.as_str() {
            "machinepool" | "machinepools" | "mp" => WorkerKind::MachinePool,
            "machinedeployment" | "machinedeployments" | "md" => WorkerKind::MachineDeployment,
            "machineset" | "machinesets" | "ms" => WorkerKind::MachineSet,
            _ => return None,
        };
        (!name.is_empty()).then_some((found, name))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Current,
    Stale,
    Unknown,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Current => "current",
            Verdict::Stale => "stale",
            Verdict::Unknown => "unknown",
        }
    }
}

/// How sure the count is; ordered from least to most sure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Unknown,
    Bounded,
    Exact,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::Bounded => "bounded",
            Level::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confidence {
    pub level: Level,
    /// Why, in words: what was compared, the bound, or what is missing.
    pub reasons: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleBecause {
    /// Launched before the edit of the config.
    Edit,
    /// Launched between the edit and the data Secret's write: old or new data.
    RenderWindow,
    /// Launched before the current data Secret was created (a rotation not rolled).
    Rotation,
    /// Launched after the edit, from a data Secret that does not hold it.
    DataWithoutEdit,
    /// A MachineDeployment's or MachineSet's Machine whose own config differs from the template.
    ConfigDiffers,
}

impl StaleBecause {
    pub fn name(self) -> &'static str {
        match self {
            StaleBecause::Edit => "launched-before-edit",
            StaleBecause::RenderWindow => "launched-while-rendering",
            StaleBecause::Rotation => "launched-before-data-secret",
            StaleBecause::DataWithoutEdit => "launched-from-data-without-edit",
            StaleBecause::ConfigDiffers => "config-differs-from-template",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    /// `Machine`, or the infrastructure machine's kind.
    pub kind: String,
    pub launched: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleInstance {
    pub name: String,
    pub launched: i64,
    pub because: StaleBecause,
    /// False: it may have the new data (launched while the provider was rendering).
    pub certain: bool,
    /// What differs between its own config and the template, as the policy's refusal names
    /// the template's paths; empty for a pool's instance (no config of its own).
    pub paths: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instances {
    /// Where the ages came from (`Machine`, `AzureMachinePoolMachine`), or None: no ages.
    pub source: Option<String>,
    /// M: the instances seen, or the pool's `status.replicas` when none is seen.
    pub total: Option<u64>,
    pub stale: Vec<StaleInstance>,
    /// Every instance, now and future, runs older data until a rotation.
    pub every_future: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CauseKind {
    InPlaceEdit,
    TopologyPatch,
    RotationNotRolled,
}

impl CauseKind {
    pub fn name(&self) -> &'static str {
        match self {
            CauseKind::InPlaceEdit => "in-place-edit",
            CauseKind::TopologyPatch => "topology-patch",
            CauseKind::RotationNotRolled => "rotation-not-rolled",
        }
    }
}

/// What a cause's paths are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathsAre {
    /// The fields an Update manager owns under spec: every field it has written, so possibly
    /// more than the edit changed.
    Owned,
    /// An Apply manager's applied set.
    AppliedSet,
    /// The fields that differ between the template and the Machines' own configs: exactly what
    /// changed.
    Different,
}

impl PathsAre {
    pub fn name(self) -> &'static str {
        match self {
            PathsAre::Owned => "owned-by-manager",
            PathsAre::AppliedSet => "applied-set",
            PathsAre::Different => "different",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub kind: CauseKind,
    /// The edit's field manager and operation (Update, Apply); none for a rotation.
    pub manager: Option<String>,
    pub operation: Option<String>,
    /// The edit's time, or the data Secret's creation for a rotation.
    pub time: Option<i64>,
    /// The paths, and what they are (`paths_are`).
    pub paths: Vec<String>,
    pub paths_are: PathsAre,
    /// Whether the data Secret was written after the edit; None for a rotation.
    pub in_data_secret: Option<bool>,
    /// The infrastructure replaces the instances itself (CAPA's instance refresh, an EKS managed
    /// node group update): wait.
    pub replaced_by_provider: bool,
    pub summary: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigInfo {
    pub group: String,
    pub kind: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretInfo {
    pub name: String,
    pub created: Option<i64>,
    /// The last write of its `data` (managedFields), else its creation.
    pub content_written: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub cluster: Option<String>,
    pub pool: Option<String>,
}

/// The report of one MachinePool, MachineDeployment or MachineSet (`kind`). For a
/// MachineDeployment or MachineSet, `config` is its bootstrap template and there is no data
/// Secret or infrastructure record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolReport {
    pub kind: WorkerKind,
    pub namespace: String,
    pub name: String,
    /// The object's apiVersion and uid as listed, for a report naming it.
    pub api_version: String,
    pub uid: String,
    pub config: ConfigInfo,
    pub bootstrap: Option<Bootstrap>,
    pub infra_kind: Option<String>,
    pub infra: Option<Infra>,
    pub data_secret: Option<SecretInfo>,
    pub verdict: Verdict,
    pub confidence: Confidence,
    pub instances: Instances,
    pub causes: Vec<Cause>,
    pub topology: Option<Topology>,
    /// Runnable commands (a `#` line is what to do by hand).
    pub fix: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub now: i64,
    pub pools: Vec<PoolReport>,
}

impl Report {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.pools.iter().filter(|p| p.verdict == verdict).count()
    }

    pub fn count_kind(&self, kind: WorkerKind) -> usize {
        self.pools.iter().filter(|p| p.kind == kind).count()
    }
}
