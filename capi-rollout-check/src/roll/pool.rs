//! What a MachinePool's infrastructure does with new bootstrap data, read from the cluster:
//! the object its `spec.template.spec.infrastructureRef` names, the policy's record of that
//! kind, and the pool's MachinePool Machines with their age against the data Secret.

use capi_bootstrap_rollout_policy::capi::config_ref::RefIdentity;
use capi_bootstrap_rollout_policy::capi::infrastructure::{
    infrastructure, Infrastructure, ReadsBootstrapData, Replacement,
};
use serde_json::Value;

use super::plan::Instance;
use crate::cluster::{resource_of, Cluster, ClusterError};
use crate::manifests::named;

pub const MACHINES: &str = "machines.cluster.x-k8s.io";
pub const SECRETS: &str = "secrets";
pub const POOL_NAME_LABEL: &str = "cluster.x-k8s.io/pool-name";

/// A pool's `spec.template.spec.infrastructureRef`, in either API version (`apiGroup` in
/// v1beta2, `apiVersion` in v1beta1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfraRef {
    pub group: String,
    pub kind: String,
    pub name: String,
}

impl InfraRef {
    /// `None` unless the ref names a group, a kind and a name.
    pub fn of(pool: &Value) -> Option<InfraRef> {
        let r = pool.pointer("/spec/template/spec/infrastructureRef")?;
        let (group, kind, name) = named(RefIdentity::of_value(r))?;
        Some(InfraRef { group, kind, name })
    }

    /// kubectl's resource: `dockermachinepools.infrastructure.cluster.x-k8s.io`.
    pub fn resource(&self) -> String {
        resource_of(&self.kind, &self.group, None)
    }
}

/// The pool's infrastructure as read: the ref, the object (when it could be read) and the
/// record (when the policy knows the kind).
pub struct PoolInfra {
    pub reference: InfraRef,
    pub namespace: String,
    pub object: Option<Value>,
    /// Why `object` is empty: not found, or the API server's refusal (RBAC).
    pub unread: Option<String>,
    pub record: Option<&'static Infrastructure>,
}

impl PoolInfra {
    /// `DockerMachinePool fleet/pool-1`.
    pub fn name(&self) -> String {
        format!(
            "{} {}/{}",
            self.reference.kind, self.namespace, self.reference.name
        )
    }

    /// `DockerMachinePool fleet/pool-1 (CAPD)`, or without the provider for an unknown kind.
    pub fn named(&self) -> String {
        match self.record {
            Some(r) => format!("{} ({})", self.name(), r.provider),
            None => self.name(),
        }
    }

    /// The field at `path` (`spec.refreshPreferences.disable`) of the object.
    pub fn field(&self, path: &str) -> Option<&Value> {
        let pointer = format!("/{}", path.replace('.', "/"));
        self.object.as_ref()?.pointer(&pointer)
    }

    /// What happens to the instances on a rotation. What depends on a field of an object
    /// that could not be read is [`Route::Unread`]: never a guess.
    pub fn route(&self) -> Route {
        let Some(record) = self.record else {
            return Route::Unknown;
        };
        if let Some(why) = &self.unread {
            let depends_on = match (record.reads_bootstrap_data, &record.replacement) {
                (ReadsBootstrapData::When(field), _) => Some(Depends::ReadsOnlyWith(field)),
                (
                    _,
                    Replacement::ByProviderOnRotation {
                        disabled_by: Some(field),
                    },
                ) => Some(Depends::DisabledBy(field)),
                _ => None,
            };
            if let Some(depends_on) = depends_on {
                return Route::Unread {
                    depends_on,
                    why: why.clone(),
                };
            }
        }
        match record.reads_bootstrap_data {
            ReadsBootstrapData::Never => return Route::NotRead { unless: None },
            ReadsBootstrapData::When(field) if self.field(field).is_none_or(Value::is_null) => {
                return Route::NotRead {
                    unless: Some(field),
                }
            }
            _ => {}
        }
        match &record.replacement {
            Replacement::ByProviderOnRotation { disabled_by } => {
                let disabled =
                    disabled_by.filter(|path| self.field(path) == Some(&Value::Bool(true)));
                match disabled {
                    Some(path) => Route::ProviderDisabled { by: path },
                    None => Route::Provider {
                        disabled_by: *disabled_by,
                    },
                }
            }
            Replacement::DeleteMachinePoolMachines { .. } => Route::DeleteMachines,
            Replacement::Manual { instructions } => Route::Manual { instructions },
            Replacement::NotApplicable => Route::NotRead { unless: None },
        }
    }
}

/// What puts the new bootstrap data on a pool's existing instances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// The provider replaces them on a rotation (CAPA's instance refresh); `disabled_by` is
    /// the field that would turn it off.
    Provider { disabled_by: Option<&'static str> },
    /// The provider would, but the field at `by` is true.
    ProviderDisabled { by: &'static str },
    /// Delete the MachinePool Machines; the provider scales back up with the new data.
    DeleteMachines,
    /// By hand, as the instructions say.
    Manual { instructions: &'static str },
    /// Bootstrap data is never read (or only with the field `unless`, which is not set).
    NotRead { unless: Option<&'static str> },
    /// A kind the policy has no record of.
    Unknown,
    /// The object could not be read (`why`), and what the provider does depends on it.
    Unread { depends_on: Depends, why: String },
}

/// The field of an unread infrastructure object the answer depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Depends {
    /// Bootstrap data is read only with this field set (EKS's `spec.awsLaunchTemplate`).
    ReadsOnlyWith(&'static str),
    /// The provider replaces the instances unless this field is true.
    DisabledBy(&'static str),
}

impl PoolInfra {
    /// What the provider does to the existing instances when it replaces them on a rotation,
    /// in the record's words: `an instance refresh`, `an EKS managed node group update`.
    pub fn replaces_them(&self) -> String {
        match self.record {
            Some(r) => r.replaced_with.map_or_else(
                || format!("{} rolls them to the new data", r.provider),
                str::to_string,
            ),
            None => "the provider rolls them to the new data".into(),
        }
    }

    /// What each case of an unread object would mean, and the RBAC to read it.
    pub fn unread_line(&self, depends_on: &Depends, why: &str) -> String {
        let cases = match depends_on {
            Depends::ReadsOnlyWith(field) => format!(
                "if it has {field}, {} replaces every instance on a rotation ({}); if not, it never \
                 reads bootstrap data and a rotation changes no instance",
                self.record.map_or("the provider", |r| r.provider),
                self.replaces_them()
            ),
            Depends::DisabledBy(field) => format!(
                "unless {field} is true, {} replaces the existing instances on a rotation ({}); \
                 with it true, none is replaced",
                self.record.map_or("the provider", |r| r.provider),
                self.replaces_them()
            ),
        };
        format!(
            "{}: cannot read it ({why}; it needs: kubectl auth can-i get {} -n {}), so \
             capi-rollout-check cannot tell what happens to the existing instances: {cases}",
            self.named(),
            self.reference.resource(),
            self.namespace
        )
    }
}

/// The pool's infrastructure: `None` when the pool has no infrastructureRef. An object that
/// cannot be read (absent, or RBAC) leaves `object` empty: the record alone still answers.
pub fn read(cluster: &dyn Cluster, pool: &Value, namespace: &str) -> Option<PoolInfra> {
    let reference = InfraRef::of(pool)?;
    let (object, unread) =
        match cluster.get(&reference.resource(), Some(namespace), &reference.name) {
            Ok(Some(object)) => (Some(object), None),
            Ok(None) => (None, Some("not found".to_string())),
            Err(ClusterError::Forbidden { .. }) => (None, Some("RBAC: forbidden".to_string())),
            Err(e) => (None, Some(e.to_string())),
        };
    let record = infrastructure(&reference.group, &reference.kind);
    Some(PoolInfra {
        reference,
        namespace: namespace.to_string(),
        object,
        unread,
        record,
    })
}

/// The pool's MachinePool Machines.
pub fn instances(
    cluster: &dyn Cluster,
    namespace: &str,
    pool: &str,
) -> Result<Vec<Instance>, ClusterError> {
    let selector = format!("{POOL_NAME_LABEL}={pool}");
    Ok(cluster
        .list(MACHINES, namespace, &selector)?
        .iter()
        // The fake and some clients do not filter: the label decides.
        .filter(|m| {
            m.pointer("/metadata/labels")
                .and_then(|l| l.get(POOL_NAME_LABEL))
                .and_then(Value::as_str)
                == Some(pool)
        })
        .map(Instance::of)
        .collect())
}

/// The creationTimestamp of the data Secret, `None` when it does not exist.
pub fn secret_created(
    cluster: &dyn Cluster,
    namespace: &str,
    secret: &str,
) -> Result<Option<String>, ClusterError> {
    Ok(cluster
        .get(SECRETS, Some(namespace), secret)?
        .and_then(|s| {
            s.pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .map(str::to_string)
        }))
}

/// The pool's `spec.replicas` (CAPI's default: 1).
pub fn replicas(pool: &Value) -> u32 {
    pool.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The pool's bootstrap `dataSecretName`.
pub fn data_secret_name(pool: &Value) -> Option<&str> {
    pool.pointer("/spec/template/spec/bootstrap/dataSecretName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}
