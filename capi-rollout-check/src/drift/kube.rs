//! The I/O of `drift`: one kubectl list per kind (MachinePools, MachineDeployments,
//! MachineSets, the Machines, each bootstrap config and template kind in use, the Secrets
//! labelled with a cluster name, each infrastructure MachinePool kind in use and, for pools
//! without Machines, each infrastructure machine kind), never a GET per object; kubectl pages
//! each list (500 items a request); then [`analysis::analyze`].

use std::collections::BTreeSet;
use std::fmt;

use capi_bootstrap_rollout_policy::capi::config_ref::RefIdentity;
use serde_json::Value;

use super::analysis::{self, Inputs, Report, WorkerKind, CLUSTER_NAME_LABEL, POOL_NAME_LABEL};
use super::records;
use super::reports;
pub use crate::cluster::Scope;
use crate::cluster::{Cluster, ClusterError};

#[derive(Debug, PartialEq, Eq)]
pub enum DriftError {
    /// A list (or `--apply`'s write) kubectl failed: the resource, and kubectl's error.
    Cluster {
        resource: String,
        error: ClusterError,
    },
    Input(String),
}

impl fmt::Display for DriftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriftError::Cluster { resource, error } => {
                write!(f, "listing {resource}: {}", error.message())
            }
            DriftError::Input(m) => f.write_str(m),
        }
    }
}

/// One list, its failure named by the resource.
fn list(
    cluster: &dyn Cluster,
    resource: &str,
    scope: &Scope,
    selector: Option<&str>,
    managed_fields: bool,
) -> Result<Vec<Value>, DriftError> {
    cluster
        .list_in(resource, scope, selector, managed_fields)
        .map_err(|error| DriftError::Cluster {
            resource: resource.to_string(),
            error,
        })
}

/// `machinepool/NAME`, `machinedeployment/NAME`, `machineset/NAME` (kubectl's plurals and
/// short names `mp`, `md`, `ms`, and `machinepools.cluster.x-k8s.io/NAME`, as well).
pub fn object_arg(arg: &str) -> Result<(WorkerKind, &str), DriftError> {
    WorkerKind::of_arg(arg).ok_or_else(|| {
        DriftError::Input(format!(
            "{arg:?}: name it as machinepool/NAME, machinedeployment/NAME or machineset/NAME"
        ))
    })
}

pub struct Request<'a> {
    pub scope: Scope,
    /// Named objects (`machinepool/NAME`, `machinedeployment/NAME`, `machineset/NAME`); empty:
    /// every one of the scope, of every kind.
    pub objects: &'a [String],
    pub now: i64,
    pub cluster_flags: String,
}

/// The `{group, kind}` of each ref at `pointer` (a ref without a group, or whose kind is not a
/// string, left out: there is nothing to list for it).
fn refs<'v>(
    objects: impl IntoIterator<Item = &'v Value>,
    pointer: &str,
) -> BTreeSet<(String, String)> {
    objects
        .into_iter()
        .filter_map(|p| {
            let r = p.pointer(pointer)?;
            r.get("kind")?.as_str()?;
            let id = RefIdentity::of_value(r);
            (!id.group.is_empty()).then_some((id.group, id.kind))
        })
        .collect()
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The named objects of each kind; none named: every kind, all of its objects.
struct Named<'a> {
    kinds: BTreeSet<WorkerKind>,
    names: Vec<(WorkerKind, &'a str)>,
}

impl Named<'_> {
    fn wants(&self, kind: WorkerKind) -> bool {
        self.kinds.contains(&kind)
    }

    fn names(&self, kind: WorkerKind) -> BTreeSet<&str> {
        self.names
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| *n)
            .collect()
    }
}

fn named<'a>(request: &Request<'a>) -> Result<Named<'a>, DriftError> {
    if request.scope == Scope::All && !request.objects.is_empty() {
        return Err(DriftError::Input(
            "named objects are in one namespace: use -n NS, not -A".into(),
        ));
    }
    let names = request
        .objects
        .iter()
        .map(|o| object_arg(o))
        .collect::<Result<Vec<_>, _>>()?;
    let kinds = if names.is_empty() {
        WorkerKind::ALL.into_iter().collect()
    } else {
        names.iter().map(|(k, _)| *k).collect()
    };
    Ok(Named { kinds, names })
}

/// Each of `names` is among `objects`; the first that is not is an error naming it.
fn all_found(
    request: &Request,
    kind: WorkerKind,
    names: &BTreeSet<&str>,
    objects: &[Value],
) -> Result<(), DriftError> {
    let found: BTreeSet<&str> = objects.iter().map(name_of).collect();
    let Some(missing) = names.iter().find(|n| !found.contains(*n)) else {
        return Ok(());
    };
    let ns = match &request.scope {
        Scope::Namespace(Some(ns)) => ns.as_str(),
        _ => "the context's namespace",
    };
    Err(DriftError::Input(format!(
        "{} {missing} not found in {ns}",
        kind.name()
    )))
}

/// The objects of `kind` in scope: the named ones, each required to exist.
fn listed(
    cluster: &dyn Cluster,
    request: &Request,
    named: &Named,
    kind: WorkerKind,
) -> Result<Vec<Value>, DriftError> {
    if !named.wants(kind) {
        return Ok(Vec::new());
    }
    let mut objects = list(cluster, kind.resource(), &request.scope, None, false)?;
    let names = named.names(kind);
    if !names.is_empty() {
        objects.retain(|o| names.contains(name_of(o)));
        all_found(request, kind, &names, &objects)?;
    }
    objects.retain(|p| {
        p.pointer("/spec/template/spec/bootstrap/configRef")
            .is_some()
    });
    Ok(objects)
}

/// The MachineSets: those the listed MachineDeployments own, and the ones no
/// MachineDeployment owns where MachineSets are asked for. A named MachineSet that a
/// MachineDeployment owns is answered by its MachineDeployment.
fn listed_sets(
    cluster: &dyn Cluster,
    request: &Request,
    named: &Named,
    deployments: &[Value],
) -> Result<Vec<Value>, DriftError> {
    if !named.wants(WorkerKind::MachineDeployment) && !named.wants(WorkerKind::MachineSet) {
        return Ok(Vec::new());
    }
    let mut sets = list(
        cluster,
        WorkerKind::MachineSet.resource(),
        &request.scope,
        None,
        false,
    )?;
    let names = named.names(WorkerKind::MachineSet);
    for set in &sets {
        if let Some(md) =
            analysis::owner(set, "MachineDeployment").filter(|_| names.contains(name_of(set)))
        {
            return Err(DriftError::Input(format!(
                "MachineSet {} belongs to MachineDeployment {md}: name machinedeployment/{md}",
                name_of(set)
            )));
        }
    }
    let deployment_names: BTreeSet<(&str, &str)> = deployments
        .iter()
        .map(|d| (namespace_of(d), name_of(d)))
        .collect();
    sets.retain(|set| match analysis::owner(set, "MachineDeployment") {
        Some(md) => deployment_names.contains(&(namespace_of(set), md)),
        None => {
            named.wants(WorkerKind::MachineSet)
                && (names.is_empty() || names.contains(name_of(set)))
        }
    });
    all_found(request, WorkerKind::MachineSet, &names, &sets)?;
    Ok(sets)
}

fn namespace_of(object: &Value) -> &str {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A namespace named with `-n` that does not exist is a mistake to name, not a namespace with
/// no pools. One list of namespaces by the label the API server gives each its name; one the
/// person may not list namespaces to check is taken as it was named.
fn namespace_exists(cluster: &dyn Cluster, ns: &str) -> Result<(), DriftError> {
    let selector = format!("kubernetes.io/metadata.name={ns}");
    let scope = Scope::Namespace(None);
    let Ok(found) = cluster.list_in("namespaces", &scope, Some(&selector), false) else {
        return Ok(());
    };
    if found.is_empty() {
        return Err(DriftError::Input(format!(
            "namespace {ns} does not exist (kubectl get namespace {ns})"
        )));
    }
    Ok(())
}

pub fn drift(cluster: &dyn Cluster, request: &Request) -> Result<Report, DriftError> {
    let scope = &request.scope;
    let named = named(request)?;
    let pools = listed(cluster, request, &named, WorkerKind::MachinePool)?;
    let deployments = listed(cluster, request, &named, WorkerKind::MachineDeployment)?;
    let machine_sets = listed_sets(cluster, request, &named, &deployments)?;
    let mut report = Report {
        now: request.now,
        pools: Vec::new(),
    };
    if pools.is_empty() && deployments.is_empty() && machine_sets.is_empty() {
        if let Scope::Namespace(Some(ns)) = scope {
            namespace_exists(cluster, ns)?;
        }
        return Ok(report);
    }
    // One list of Machines serves both: a pool's by its label, a MachineSet's by its owner.
    let sets_in_scope = !machine_sets.is_empty();
    let machines = if pools.is_empty() && !sets_in_scope {
        Vec::new()
    } else {
        let selector = (!sets_in_scope).then_some(POOL_NAME_LABEL);
        list(cluster, "machines.cluster.x-k8s.io", scope, selector, false)?
    };
    let mut config_kinds = refs(&pools, "/spec/template/spec/bootstrap/configRef");
    config_kinds.extend(refs(
        machines
            .iter()
            .filter(|m| analysis::owner(m, "MachineSet").is_some()),
        "/spec/bootstrap/configRef",
    ));
    let mut configs = Vec::new();
    for (group, kind) in config_kinds {
        configs.extend(list(
            cluster,
            &analysis::resource(&kind, &group),
            scope,
            None,
            true,
        )?);
    }
    let mut templates = Vec::new();
    for (group, kind) in refs(
        deployments.iter().chain(&machine_sets),
        "/spec/template/spec/bootstrap/configRef",
    ) {
        templates.extend(list(
            cluster,
            &analysis::resource(&kind, &group),
            scope,
            None,
            true,
        )?);
    }
    let secrets = if pools.is_empty() {
        Vec::new()
    } else {
        list(cluster, "secrets", scope, Some(CLUSTER_NAME_LABEL), true)?
    };
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
        infra_pools.extend(list(
            cluster,
            &analysis::resource(&kind, &group),
            scope,
            None,
            false,
        )?);
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
                infra_instances.extend(list(
                    cluster,
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
        deployments: &deployments,
        machine_sets: &machine_sets,
        templates: &templates,
        // The analysis takes a MachineSet's Machines by their owner.
        set_machines: &machines,
        cluster_flags: request.cluster_flags.clone(),
    });
    Ok(report)
}

/// The namespaces whose Reports `request` writes: every namespace with an object, and the one
/// `-n` names even without one (its older Report is emptied).
pub fn report_namespaces(request: &Request, report: &Report) -> Vec<String> {
    let mut namespaces: BTreeSet<String> =
        report.pools.iter().map(|p| p.namespace.clone()).collect();
    if let Scope::Namespace(Some(ns)) = &request.scope {
        namespaces.insert(ns.clone());
    }
    namespaces.into_iter().collect()
}

/// `--apply`: the Reports written (server-side apply), and the Reports drift wrote before in
/// namespaces of the scope that now have none deleted. Returns a line per write.
pub fn apply_reports(
    cluster: &dyn Cluster,
    request: &Request,
    report: &Report,
) -> Result<Vec<String>, DriftError> {
    if !request.objects.is_empty() {
        return Err(DriftError::Input(
            "--apply writes each namespace's whole Report: name no objects".into(),
        ));
    }
    let not_installed = |error: ClusterError| {
        if error
            .message()
            .contains("the server doesn't have a resource type")
            || error.message().contains("no matches for kind")
        {
            DriftError::Input(format!(
                "the OpenReports CRD ({}) is not installed: Kubewarden's kubewarden-crds chart installs it (installOpenReportsCRDs: true), or apply it from openreports.io",
                reports::RESOURCE
            ))
        } else {
            DriftError::Cluster {
                resource: reports::RESOURCE.to_string(),
                error,
            }
        }
    };
    let selector = format!("{}={}", reports::MANAGED_BY.0, reports::MANAGED_BY.1);
    let before = cluster
        .list_in(reports::RESOURCE, &request.scope, Some(&selector), false)
        .map_err(not_installed)?;
    let namespaces = report_namespaces(request, report);
    let written = reports::reports(report, &namespaces);
    let mut lines = Vec::new();
    if !written.is_empty() {
        cluster
            .apply(&reports::yaml(&written), reports::SOURCE)
            .map_err(not_installed)?;
        for r in &written {
            lines.push(format!(
                "{} {}/{} applied ({} results)",
                reports::RESOURCE,
                r.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                reports::NAME,
                r.get("results")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            ));
        }
    }
    for old in &before {
        let (ns, name) = (namespace_of(old), name_of(old));
        if name == reports::NAME && !namespaces.iter().any(|n| n == ns) {
            cluster
                .delete(reports::RESOURCE, ns, name)
                .map_err(|error| DriftError::Cluster {
                    resource: reports::RESOURCE.to_string(),
                    error,
                })?;
            lines.push(format!(
                "{} {ns}/{name} deleted (no MachinePool, MachineDeployment or MachineSet left there)",
                reports::RESOURCE
            ));
        }
    }
    Ok(lines)
}
