//! The bootstrap `configRef` of a MachinePool (and of a MachineDeployment or MachineSet, which
//! name a template in the same place), and the identity CAPI compares refs by.

use serde_json::Value;

use crate::kinds::{at, group_of_api_version, str_field};

pub const CONFIG_REF: &str = "spec.template.spec.bootstrap.configRef";

/// The identity of a configRef: {group, kind, name}. apiVersion is not part of it: in v1beta1
/// CAPI bumps it to a newer version of the same group on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefIdentity {
    pub group: String,
    pub kind: String,
    pub name: String,
    /// v1beta1 only; empty means the MachinePool's namespace.
    pub namespace: String,
}

impl RefIdentity {
    pub fn of(config_ref: &Value) -> Self {
        let group = str_field(config_ref, "apiGroup")
            .or_else(|| str_field(config_ref, "apiVersion").map(group_of_api_version))
            .unwrap_or("");
        let field = |key| str_field(config_ref, key).unwrap_or("").to_string();
        RefIdentity {
            group: group.to_string(),
            kind: field("kind"),
            name: field("name"),
            namespace: field("namespace"),
        }
    }
}

/// The configRef of a MachinePool: `Ok(None)` when absent (dataSecretName only), an error when
/// it is not an object.
pub fn config_ref(machine_pool: Option<&Value>) -> Result<Option<&Value>, String> {
    let keys = ["spec", "template", "spec", "bootstrap", "configRef"];
    match machine_pool.and_then(|mp| at(mp, &keys)) {
        None | Some(Value::Null) => Ok(None),
        Some(r @ Value::Object(_)) => Ok(Some(r)),
        Some(_) => Err(format!(
            "{CONFIG_REF}: Invalid value: must be an object reference"
        )),
    }
}
