//! ClusterClass: configs of topology-managed MachinePools are patched in place by CAPI's
//! topology controller (cluster-api #10496). Only that controller may do so, as one of
//! `controllerUsers` (allowed by the engine, audited); the label alone, which any editor can
//! set, changes nothing.

use crate::reader::object::Object;

pub const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";

/// Whether the stored object carries the topology label (any value).
pub fn is_topology_owned(object: Option<&Object>) -> bool {
    object.is_some_and(|o| o.has_label(TOPOLOGY_OWNED_LABEL))
}
