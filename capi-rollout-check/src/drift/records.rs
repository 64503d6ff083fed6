//! What drift needs from the policy's records, in one place: when a bootstrap provider puts an
//! in-place edit into its data Secret (the provider records' `rendering`), and what an
//! infrastructure MachinePool kind does with new bootstrap data (the infrastructure records),
//! resolved for one pool's infrastructure object (its knobs).

use serde_json::Value;

/// When an in-place edit of a config reaches its data Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rendering {
    /// At each bootstrap token rotation of a pool with nodeRefs and token discovery (CABPK).
    AtTokenRotation,
    /// Every reconcile, written when the bytes differ (EKSConfig, NodeadmConfig).
    EveryReconcile,
    /// Rendered once: an edit reaches no instance, not even new ones.
    Once,
}

impl Rendering {
    pub fn name(self) -> &'static str {
        match self {
            Rendering::AtTokenRotation => "AtTokenRotation",
            Rendering::EveryReconcile => "EveryReconcile",
            Rendering::Once => "Once",
        }
    }
}

/// What new bootstrap data does to a pool's existing instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    ReplacesExisting,
    NewInstancesOnly,
    NotRead,
}

impl Effect {
    pub fn name(self) -> &'static str {
        match self {
            Effect::ReplacesExisting => "ReplacesExisting",
            Effect::NewInstancesOnly => "NewInstancesOnly",
            Effect::NotRead => "NotRead",
        }
    }
}

/// A bootstrap provider, as drift uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bootstrap {
    /// clusterctl's name (`kubeadm`, `rke2`).
    pub provider: &'static str,
    pub rendering: Rendering,
}

/// One pool's infrastructure, its knobs applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Infra {
    pub provider: &'static str,
    pub kind: String,
    /// False when this object never reads bootstrap data (its kind, or an unset field).
    pub reads: bool,
    pub on_rotation: Effect,
    pub on_content_change: Effect,
    /// The kind of its MachinePool Machines' infrastructure machines, when it makes them.
    pub instance_kind: Option<&'static str>,
    /// What the person does to replace instances, when the provider documents no command
    /// (`Replacement::Manual`).
    pub manual: Option<&'static str>,
}

pub fn bootstrap(config_kind: &str) -> Option<Bootstrap> {
    // TEMPORARY until the infra branch's Provider::rendering is merged.
    let (provider, rendering) = match config_kind {
        "KubeadmConfig" => ("kubeadm", Rendering::AtTokenRotation),
        "EKSConfig" | "NodeadmConfig" => ("aws-eks", Rendering::EveryReconcile),
        "RKE2Config" => ("rke2", Rendering::Once),
        "K0sWorkerConfig" => ("k0sproject-k0smotron", Rendering::Once),
        "KThreesConfig" => ("k3s", Rendering::Once),
        "TalosConfig" => ("talos", Rendering::Once),
        _ => return None,
    };
    Some(Bootstrap {
        provider,
        rendering,
    })
}

fn truthy(object: Option<&Value>, path: &str) -> (bool, bool) {
    let found = object.and_then(|o| path.split('.').try_fold(o, |v, k| v.get(k)));
    (
        found.is_some_and(|v| !v.is_null()),
        found == Some(&Value::Bool(true)),
    )
}

/// The record of `group`/`kind`, resolved for `object` (the pool's infrastructure object, when
/// it was found): a field it needs to read bootstrap data, a knob that turns replacement off.
pub fn infra(group: &str, kind: &str, object: Option<&Value>) -> Option<Infra> {
    // TEMPORARY until the infra branch's capi::infrastructure is merged.
    use Effect::*;
    if group != "infrastructure.cluster.x-k8s.io" {
        return None;
    }
    let (provider, reads_when, on_rotation, on_content, instance_kind, disabled_by): (
        &str,
        Option<&str>,
        Effect,
        Effect,
        Option<&str>,
        Option<&str>,
    ) = match kind {
        "AWSMachinePool" => (
            "CAPA",
            None,
            ReplacesExisting,
            NewInstancesOnly,
            Some("AWSMachine"),
            Some("spec.refreshPreferences.disable"),
        ),
        "AWSManagedMachinePool" => (
            "CAPA",
            Some("spec.awsLaunchTemplate"),
            ReplacesExisting,
            ReplacesExisting,
            None,
            None,
        ),
        "AzureMachinePool" => (
            "CAPZ",
            None,
            NewInstancesOnly,
            NewInstancesOnly,
            Some("AzureMachinePoolMachine"),
            None,
        ),
        "GCPMachinePool" => ("CAPG", None, NewInstancesOnly, NewInstancesOnly, None, None),
        "DockerMachinePool" | "DevMachinePool" => (
            "CAPD",
            None,
            NewInstancesOnly,
            NewInstancesOnly,
            Some("DockerMachine"),
            None,
        ),
        "OCIMachinePool" => (
            "CAPOCI",
            None,
            NewInstancesOnly,
            NewInstancesOnly,
            None,
            None,
        ),
        "AzureManagedMachinePool" | "AzureASOManagedMachinePool" => {
            ("CAPZ", Some(""), NotRead, NotRead, None, None)
        }
        "GCPManagedMachinePool" => ("CAPG", Some(""), NotRead, NotRead, None, None),
        "OCIManagedMachinePool" | "OCIVirtualMachinePool" => {
            ("CAPOCI", Some(""), NotRead, NotRead, None, None)
        }
        _ => return None,
    };
    let reads = match reads_when {
        None => true,
        Some("") => false,
        Some(path) => truthy(object, path).0,
    };
    let disabled = disabled_by.is_some_and(|p| truthy(object, p).1);
    let on_rotation = match (reads, on_rotation, disabled) {
        (false, _, _) => NotRead,
        (_, ReplacesExisting, true) => NewInstancesOnly,
        (_, e, _) => e,
    };
    Some(Infra {
        provider,
        kind: kind.to_string(),
        reads,
        on_rotation,
        on_content_change: if reads { on_content } else { NotRead },
        instance_kind,
        manual: None,
    })
}
