//! What drift needs from the policy's records, in one place: when a bootstrap provider puts an
//! in-place edit into its data Secret (the provider records' `rendering`), and what an
//! infrastructure MachinePool kind does with new bootstrap data (the infrastructure records),
//! resolved for one pool's infrastructure object (its knobs).

use serde_json::Value;

pub use capi_bootstrap_rollout_policy::capi::infrastructure::Effect;
use capi_bootstrap_rollout_policy::capi::infrastructure::{
    infrastructure, ReadsBootstrapData, Replacement,
};
use capi_bootstrap_rollout_policy::capi::paths::{FieldPath, Segment};
use capi_bootstrap_rollout_policy::capi::providers::provider_of;
pub use capi_bootstrap_rollout_policy::capi::providers::Rendering;

pub fn rendering_name(rendering: Rendering) -> &'static str {
    match rendering {
        Rendering::AtTokenRotation => "AtTokenRotation",
        Rendering::EveryReconcile => "EveryReconcile",
        Rendering::Once => "Once",
    }
}

pub fn effect_name(effect: Effect) -> &'static str {
    match effect {
        Effect::ReplacesExisting => "ReplacesExisting",
        Effect::NewInstancesOnly => "NewInstancesOnly",
        Effect::NotRead => "NotRead",
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
    /// Deleting MachinePool Machines replaces instances (what `capi-rollout-check roll` does).
    pub deletes_machines: bool,
    /// The knob that turned the provider's own replacement off, when it is set.
    pub replacement_disabled_by: Option<&'static str>,
    /// How the provider replaces existing instances itself, where it does: "an instance
    /// refresh", "an EKS managed node group update".
    pub replaced_with: Option<&'static str>,
}

pub fn bootstrap(config_kind: &str) -> Option<Bootstrap> {
    provider_of(config_kind).map(|p| Bootstrap {
        provider: p.clusterctl,
        rendering: p.rendering,
    })
}

/// Whether every path (leaf paths under `spec`, as `analysis::leaf_paths` renders them) is a
/// field the kind's bootstrap controller writes itself: machine-only or fill-once in the
/// policy's records (CABPK's bootstrap token and discovery). Such a write is the controller's,
/// whatever its field manager is called: controller-runtime names it after the binary
/// (`manager` in CAPI's images, the binary's own name in a build of another layout).
pub fn controller_filled(config_kind: &str, paths: &[String]) -> bool {
    let Some(provider) = provider_of(config_kind) else {
        return false;
    };
    !paths.is_empty()
        && paths.iter().all(|path| {
            // A keyed or indexed step (`files[path=/x]`) is no field a controller fills.
            if path.contains('[') {
                return false;
            }
            let mut keys = path.split('.');
            let mut field = FieldPath::root(keys.next().unwrap_or_default());
            for key in keys {
                field.push(Segment::Key(key.to_string()));
            }
            provider
                .machine_only
                .iter()
                .chain(provider.fill_once)
                .any(|pattern| pattern.matches(&field))
        })
}

fn field<'v>(object: Option<&'v Value>, path: &str) -> Option<&'v Value> {
    object
        .and_then(|o| path.split('.').try_fold(o, |v, k| v.get(k)))
        .filter(|v| !v.is_null())
}

/// The record of `group`/`kind`, resolved for `object` (the pool's infrastructure object, when
/// it was found): a field it needs to read bootstrap data, a knob that turns replacement off.
pub fn infra(group: &str, kind: &str, object: Option<&Value>) -> Option<Infra> {
    let record = infrastructure(group, kind)?;
    let reads = match record.reads_bootstrap_data {
        ReadsBootstrapData::Always => true,
        ReadsBootstrapData::Never => false,
        ReadsBootstrapData::When(path) => field(object, path).is_some(),
    };
    let disabled_by = match record.replacement {
        Replacement::ByProviderOnRotation {
            disabled_by: Some(path),
        } if field(object, path) == Some(&Value::Bool(true)) => Some(path),
        _ => None,
    };
    let disabled = disabled_by.is_some();
    let on_rotation = match (reads, record.on_rotation, disabled) {
        (false, _, _) => Effect::NotRead,
        (_, Effect::ReplacesExisting, true) => Effect::NewInstancesOnly,
        (_, effect, _) => effect,
    };
    Some(Infra {
        provider: record.provider,
        kind: record.kind.to_string(),
        reads,
        on_rotation,
        on_content_change: if reads {
            record.on_content_change
        } else {
            Effect::NotRead
        },
        instance_kind: record.instance_kind.map(|(k, _)| k),
        manual: match record.replacement {
            Replacement::Manual { instructions } => Some(instructions),
            _ => None,
        },
        deletes_machines: matches!(
            record.replacement,
            Replacement::DeleteMachinePoolMachines { .. }
        ),
        replacement_disabled_by: disabled_by,
        replaced_with: record.replaced_with,
    })
}
