//! The I/O of `drift`: one kubectl list per kind (MachinePools, each bootstrap config kind in
//! use, the Secrets labelled with a cluster name, the MachinePool Machines, each infrastructure
//! MachinePool kind in use and, for pools without Machines, each infrastructure machine kind),
//! never a GET per pool; then [`analysis::analyze`].

use std::collections::BTreeSet;
use std::fmt;
use std::process::{Command, Stdio};

use capi_bootstrap_rollout_policy::capi::config_ref::RefIdentity;
use serde_json::Value;

use super::analysis::{self, Inputs, Report, CLUSTER_NAME_LABEL, POOL_NAME_LABEL};
use super::records;

/// Which namespaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `-n NS`, or None: the context's namespace.
    Namespace(Option<String>),
    /// `-A`.
    All,
}

#[derive(Debug, PartialEq, Eq)]
pub struct ListError {
    pub resource: String,
    pub message: String,
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "listing {}: {}", self.resource, self.message)
    }
}

/// A cluster that lists. `managed_fields`: keep `metadata.managedFields` (kubectl drops it
/// unless `--show-managed-fields`).
pub trait Lister {
    fn list(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed_fields: bool,
    ) -> Result<Vec<Value>, ListError>;
}

/// kubectl with the person's flags.
pub struct Kubectl {
    pub program: String,
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
}

impl Kubectl {
    /// The list command's arguments (without the program).
    pub fn args(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed_fields: bool,
    ) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(k) = &self.kubeconfig {
            args.extend(["--kubeconfig".to_string(), k.clone()]);
        }
        if let Some(c) = &self.context {
            args.extend(["--context".to_string(), c.clone()]);
        }
        args.extend(["get".to_string(), resource.to_string()]);
        match scope {
            Scope::All => args.push("--all-namespaces".into()),
            Scope::Namespace(Some(ns)) => args.extend(["-n".to_string(), ns.clone()]),
            Scope::Namespace(None) => {}
        }
        if let Some(selector) = selector {
            args.extend(["-l".to_string(), selector.to_string()]);
        }
        if managed_fields {
            args.push("--show-managed-fields".into());
        }
        args.extend(["-o".to_string(), "json".to_string()]);
        args
    }
}

impl Lister for Kubectl {
    fn list(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed_fields: bool,
    ) -> Result<Vec<Value>, ListError> {
        let fail = |message: String| ListError {
            resource: resource.to_string(),
            message,
        };
        let output = Command::new(&self.program)
            .args(self.args(resource, scope, selector, managed_fields))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                fail(format!(
                    "cannot run {}: {e} (set --kubectl or KUBECTL)",
                    self.program
                ))
            })?;
        if !output.status.success() {
            return Err(fail(crate::kubectl_words::explained(
                &String::from_utf8_lossy(&output.stderr),
            )));
        }
        let list: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| fail(format!("unreadable output: {e}")))?;
        Ok(list
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum DriftError {
    List(ListError),
    Input(String),
}

impl fmt::Display for DriftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriftError::List(e) => e.fmt(f),
            DriftError::Input(m) => f.write_str(m),
        }
    }
}

impl From<ListError> for DriftError {
    fn from(e: ListError) -> Self {
        DriftError::List(e)
    }
}

/// `machinepool/NAME` (`machinepools/NAME`, `mp/NAME`, `machinepools.cluster.x-k8s.io/NAME`).
pub fn pool_name(arg: &str) -> Result<&str, DriftError> {
    let usage = || DriftError::Input(format!("{arg:?}: name a pool as machinepool/NAME"));
    let (kind, name) = arg.split_once('/').ok_or_else(usage)?;
    let kind = kind
        .strip_suffix(".cluster.x-k8s.io")
        .unwrap_or(kind)
        .to_lowercase();
    if !["machinepool", "machinepools", "mp"].contains(&kind.as_str()) || name.is_empty() {
        return Err(usage());
    }
    Ok(name)
}

pub struct Request<'a> {
    pub scope: Scope,
    /// Named pools (`machinepool/NAME`); empty: every pool of the scope.
    pub pools: &'a [String],
    pub now: i64,
    pub cluster_flags: String,
}

/// The `{group, kind}` of each ref at `pointer` (a ref without a group, or whose kind is not a
/// string, left out: there is nothing to list for it).
fn refs(pools: &[Value], pointer: &str) -> BTreeSet<(String, String)> {
    pools
        .iter()
        .filter_map(|p| {
            let r = p.pointer(pointer)?;
            r.get("kind")?.as_str()?;
            let id = RefIdentity::of_value(r);
            (!id.group.is_empty()).then_some((id.group, id.kind))
        })
        .collect()
}

/// The MachinePools in scope (the named ones, each required to exist) that name a bootstrap
/// `configRef`.
fn listed_pools(lister: &dyn Lister, request: &Request) -> Result<Vec<Value>, DriftError> {
    if request.scope == Scope::All && !request.pools.is_empty() {
        return Err(DriftError::Input(
            "named pools are in one namespace: use -n NS, not -A".into(),
        ));
    }
    let names = request
        .pools
        .iter()
        .map(|p| pool_name(p))
        .collect::<Result<BTreeSet<_>, _>>()?;
    let scope = &request.scope;
    let mut pools = lister.list("machinepools.cluster.x-k8s.io", scope, None, false)?;
    if !names.is_empty() {
        pools.retain(|p| {
            p.pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_some_and(|n| names.contains(n))
        });
        let found: BTreeSet<&str> = pools
            .iter()
            .filter_map(|p| p.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        if let Some(missing) = names.iter().find(|n| !found.contains(*n)) {
            let ns = match scope {
                Scope::Namespace(Some(ns)) => ns.as_str(),
                _ => "the context's namespace",
            };
            return Err(DriftError::Input(format!(
                "MachinePool {missing} not found in {ns}"
            )));
        }
    }
    pools.retain(|p| {
        p.pointer("/spec/template/spec/bootstrap/configRef")
            .is_some()
    });
    Ok(pools)
}

/// A namespace named with `-n` that does not exist is a mistake to name, not a namespace with
/// no pools. One list of namespaces by the label the API server gives each its name; one the
/// person may not list namespaces to check is taken as it was named.
fn namespace_exists(lister: &dyn Lister, ns: &str) -> Result<(), DriftError> {
    let selector = format!("kubernetes.io/metadata.name={ns}");
    let scope = Scope::Namespace(None);
    let Ok(found) = lister.list("namespaces", &scope, Some(&selector), false) else {
        return Ok(());
    };
    if found.is_empty() {
        return Err(DriftError::Input(format!(
            "namespace {ns} does not exist (kubectl get namespace {ns})"
        )));
    }
    Ok(())
}

pub fn drift(lister: &dyn Lister, request: &Request) -> Result<Report, DriftError> {
    let scope = &request.scope;
    let pools = listed_pools(lister, request)?;
    let mut report = Report {
        now: request.now,
        pools: Vec::new(),
    };
    if pools.is_empty() {
        if let Scope::Namespace(Some(ns)) = scope {
            namespace_exists(lister, ns)?;
        }
        return Ok(report);
    }
    let mut configs = Vec::new();
    for (group, kind) in refs(&pools, "/spec/template/spec/bootstrap/configRef") {
        configs.extend(lister.list(&analysis::resource(&kind, &group), scope, None, true)?);
    }
    let secrets = lister.list("secrets", scope, Some(CLUSTER_NAME_LABEL), true)?;
    let machines = lister.list(
        "machines.cluster.x-k8s.io",
        scope,
        Some(POOL_NAME_LABEL),
        false,
    )?;
    let with_machines: BTreeSet<&str> = machines
        .iter()
        .filter_map(|m| {
            m.pointer("/metadata/labels")
                .and_then(|l| l.get(POOL_NAME_LABEL))
                .and_then(Value::as_str)
        })
        .collect();
    let mut infra_pools = Vec::new();
    let mut infra_instances = Vec::new();
    for (group, kind) in refs(&pools, "/spec/template/spec/infrastructureRef") {
        if group.is_empty() {
            continue;
        }
        infra_pools.extend(lister.list(&analysis::resource(&kind, &group), scope, None, false)?);
        let needs_instances = pools.iter().any(|p| {
            p.pointer("/spec/template/spec/infrastructureRef/kind")
                .and_then(Value::as_str)
                == Some(kind.as_str())
                && !p
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| with_machines.contains(n))
        });
        if let Some(instance_kind) =
            records::infra(&group, &kind, None).and_then(|i| i.instance_kind)
        {
            if needs_instances {
                infra_instances.extend(lister.list(
                    &analysis::resource(instance_kind, &group),
                    scope,
                    None,
                    false,
                )?);
            }
        }
    }
    report = analysis::analyze(&Inputs {
        now: request.now,
        pools: &pools,
        configs: &configs,
        secrets: &secrets,
        machines: &machines,
        infra_pools: &infra_pools,
        infra_instances: &infra_instances,
        cluster_flags: request.cluster_flags.clone(),
    });
    Ok(report)
}
