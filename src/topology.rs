//! ClusterClass: configs of topology-managed MachinePools are patched in place by CAPI's
//! topology controller (cluster-api #10496). Only that controller may do so; the label alone,
//! which any editor can set, changes nothing.

use serde_json::Value;

use crate::identity::Requester;
use crate::kinds::at;
use crate::settings::Settings;

pub const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";

/// Whether the stored object carries the topology label (any value).
pub fn is_topology_owned(object: Option<&Value>) -> bool {
    object
        .and_then(|o| at(o, &["metadata", "labels"]))
        .and_then(Value::as_object)
        .is_some_and(|labels| labels.contains_key(TOPOLOGY_OWNED_LABEL))
}

/// The topology controller patching a config it manages: the one in-place edit CAPI makes.
/// The label is read from the OLD object, so adding it in the same request buys nothing.
pub fn controller_may_patch(
    settings: &Settings,
    requester: &Requester,
    old: Option<&Value>,
) -> bool {
    is_topology_owned(old) && requester.is_controller(settings)
}
