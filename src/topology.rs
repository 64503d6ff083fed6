//! ClusterClass: configs of topology-managed MachinePools are patched in place by CAPI's
//! topology controller (cluster-api #10496). Only that controller may do so, as one of
//! `controllerUsers` (allowed by the engine, audited); the label alone, which any editor can
//! set, changes nothing.

use serde_json::Value;

use crate::kinds::at;

pub const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";

/// Whether the stored object carries the topology label (any value).
pub fn is_topology_owned(object: Option<&Value>) -> bool {
    object
        .and_then(|o| at(o, &["metadata", "labels"]))
        .and_then(Value::as_object)
        .is_some_and(|labels| labels.contains_key(TOPOLOGY_OWNED_LABEL))
}
