//! The kubectl layer against the shared fake cluster (`crate::fake`) and a fake kubectl.

use super::*;
use crate::cluster::{Cluster, Kubectl};
use crate::drift::analysis::WorkerKind;
use crate::fake::Fake;

// ---- the kubectl layer -------------------------------------------------------------------

/// kubectl's resource of a listed object: `kubeadmconfigs.bootstrap.cluster.x-k8s.io`,
/// `secrets`.
fn resource_of(object: &Value) -> String {
    let plural = format!("{}s", object["kind"].as_str().unwrap().to_lowercase());
    match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((group, _)) => format!("{plural}.{group}"),
        None => plural,
    }
}

/// The shared fake cluster holding a World's objects and namespace `fleet`; it records every
/// list (`fake.lists`).
fn fake_of(world: &World) -> Fake {
    let fake = Fake::default();
    let w = world;
    for object in w
        .pools
        .iter()
        .chain(&w.configs)
        .chain(&w.secrets)
        .chain(&w.machines)
        .chain(&w.infra_pools)
        .chain(&w.infra_instances)
        .chain(&w.deployments)
        .chain(&w.machine_sets)
        .chain(&w.templates)
        .chain(&w.set_machines)
        .chain(&w.reports)
    {
        fake.put(&resource_of(object), object.clone());
    }
    fake.put(
        "namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "fleet", "labels": {"kubernetes.io/metadata.name": "fleet"}}}),
    );
    fake
}

fn fleet_of(count: usize) -> World {
    let mut world = World::default();
    for n in 0..count {
        let (kind, infra) = if n % 2 == 0 {
            ("KubeadmConfig", "AzureMachinePool")
        } else {
            ("RKE2Config", "DockerMachinePool")
        };
        let mut one = World::pool(&Pool::new(kind, infra), 0, vec![], 1, 290);
        let name = format!("pool-{n}");
        one.pools[0]["metadata"]["name"] = json!(name);
        for o in one.configs.iter_mut().chain(&mut one.secrets) {
            o["metadata"]["name"] = json!(format!("{name}-a"));
        }
        one.configs[0]["status"]["dataSecretName"] = json!(format!("{name}-a"));
        one.pools[0]["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] =
            json!(format!("{name}-a"));
        one.pools[0]["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] =
            json!(format!("{name}-a"));
        one.pools[0]["spec"]["template"]["spec"]["infrastructureRef"]["name"] = json!(name);
        one.infra_pools[0]["metadata"]["name"] = json!(name);
        world.pools.extend(one.pools);
        world.configs.extend(one.configs);
        world.secrets.extend(one.secrets);
        world.infra_pools.extend(one.infra_pools);
    }
    world
}

fn request(scope: Scope, objects: &[String]) -> kube::Request<'_> {
    kube::Request {
        scope,
        objects,
        now: T0 + NOW * 60,
        cluster_flags: String::new(),
    }
}

#[test]
fn one_list_per_kind_however_many_pools() {
    let lister = fake_of(&fleet_of(40));
    let report = kube::drift(
        &lister,
        &request(Scope::Namespace(Some("fleet".into())), &[]),
    )
    .unwrap();
    assert_eq!(report.pools.len(), 40);
    let ns = "Namespace(Some(\"fleet\"))";
    assert_eq!(
        *lister.lists.borrow(),
        [
            format!("machinepools.cluster.x-k8s.io {ns} None false"),
            format!("machinedeployments.cluster.x-k8s.io {ns} None false"),
            format!("machinesets.cluster.x-k8s.io {ns} None false"),
            // No MachineSet: only the pools' Machines.
            format!("machines.cluster.x-k8s.io {ns} Some(\"cluster.x-k8s.io/pool-name\") false"),
            format!("kubeadmconfigs.bootstrap.cluster.x-k8s.io {ns} None true"),
            format!("rke2configs.bootstrap.cluster.x-k8s.io {ns} None true"),
            format!("secrets {ns} Some(\"cluster.x-k8s.io/cluster-name\") true"),
            format!("azuremachinepools.infrastructure.cluster.x-k8s.io {ns} None false"),
            // No MachinePool Machines: CAPZ's own instances, once.
            format!("azuremachinepoolmachines.infrastructure.cluster.x-k8s.io {ns} None false"),
            format!("dockermachinepools.infrastructure.cluster.x-k8s.io {ns} None false"),
            format!("dockermachines.infrastructure.cluster.x-k8s.io {ns} None false"),
        ]
    );
}

#[rstest]
#[case::named_pool_missing(Scope::Namespace(Some("fleet".into())), &["machinepool/pool-9"], "MachinePool pool-9 not found in fleet")]
#[case::named_deployment_missing(Scope::Namespace(None), &["md/md-0"], "MachineDeployment md-0 not found in the context's namespace")]
#[case::not_a_worker_kind(Scope::Namespace(None), &["deployment/md-0"], "\"deployment/md-0\": name it as machinepool/NAME, machinedeployment/NAME or machineset/NAME")]
#[case::names_with_all_namespaces(Scope::All, &["machinepool/pool-1"], "named objects are in one namespace: use -n NS, not -A")]
fn usage_errors(#[case] scope: Scope, #[case] pools: &[&str], #[case] message: &str) {
    let lister = fake_of(&fleet_of(2));
    let pools: Vec<String> = pools.iter().map(|p| p.to_string()).collect();
    let e = kube::drift(&lister, &request(scope, &pools)).unwrap_err();
    assert_eq!(e.to_string(), message);
}

/// `-n` of a namespace with no pools: a report of none if it exists, an error naming it if not
/// (a typo must not look like a clean namespace), a report of none if namespaces may not be
/// listed to tell.
#[rstest]
#[case::exists("fleet", None)]
#[case::does_not_exist(
    "flet",
    Some("namespace flet does not exist (kubectl get namespace flet)")
)]
#[case::may_not_list_namespaces("forbidden", None)]
fn a_namespace_without_pools(#[case] ns: &str, #[case] error: Option<&str>) {
    let lister = Fake {
        refused: if ns == "forbidden" {
            vec![(
                "namespaces",
                "Error from server (Forbidden): namespaces is forbidden",
            )]
        } else {
            vec![]
        },
        ..fake_of(&World::default())
    };
    let result = kube::drift(&lister, &request(Scope::Namespace(Some(ns.into())), &[]));
    match error {
        None => assert!(result.unwrap().pools.is_empty()),
        Some(message) => assert_eq!(result.unwrap_err().to_string(), message),
    }
    assert_eq!(
        lister.lists.borrow().last().unwrap(),
        &format!("namespaces Namespace(None) Some(\"kubernetes.io/metadata.name={ns}\") false")
    );
}

#[test]
fn named_pools_still_cost_one_list_each_kind() {
    let lister = fake_of(&fleet_of(4));
    let pools = vec!["machinepool/pool-2".to_string(), "mp/pool-0".to_string()];
    let report = kube::drift(
        &lister,
        &request(Scope::Namespace(Some("fleet".into())), &pools),
    )
    .unwrap();
    assert_eq!(
        report
            .pools
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        ["pool-0", "pool-2"]
    );
    assert!(
        !lister
            .lists
            .borrow()
            .iter()
            .any(|c| c.starts_with("rke2configs")),
        "{:?}",
        lister.lists.borrow()
    );
}

/// A fake kubectl: writes its arguments to a file and answers from a directory of lists.
#[cfg(unix)]
#[test]
fn kubectl_is_asked_with_the_persons_flags_and_its_errors_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("drift-fake-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("kubectl");
    let log = dir.join("calls");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> {log}\ncase \"$*\" in\n  *machinepools*) echo '{{\"items\": []}}' ;;\n  *secrets*) echo 'Error from server (Forbidden): secrets is forbidden' >&2; exit 1 ;;\n  *) echo '{{\"items\": []}}' ;;\nesac\n",
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kubectl = Kubectl {
        program: script.display().to_string(),
        kubeconfig: Some("/k/config".into()),
        context: Some("prod".into()),
        detached: false,
    };
    assert_eq!(
        kubectl
            .list_in("machinepools.cluster.x-k8s.io", &Scope::All, None, false)
            .unwrap(),
        Vec::<Value>::new()
    );
    let e = kubectl
        .list_in(
            "secrets",
            &Scope::Namespace(Some("fleet".into())),
            Some("a"),
            true,
        )
        .unwrap_err();
    assert_eq!(
        e.message(),
        "Error from server (Forbidden): secrets is forbidden"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls,
        "--kubeconfig /k/config --context prod get machinepools.cluster.x-k8s.io --all-namespaces -o json\n\
         --kubeconfig /k/config --context prod get secrets -n fleet -l a --show-managed-fields -o json\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_fleet_report_counts_verdicts() {
    let report = kube::drift(
        &fake_of(&fleet_of(6)),
        &request(Scope::Namespace(Some("fleet".into())), &[]),
    )
    .unwrap();
    let counts: BTreeMap<&str, usize> = [Verdict::Current, Verdict::Stale, Verdict::Unknown]
        .into_iter()
        .map(|v| (v.name(), report.count(v)))
        .collect();
    assert_eq!(
        counts,
        BTreeMap::from([("current", 6), ("stale", 0), ("unknown", 0)])
    );
}

/// MachineDeployments and MachineSets cost one list each, the Machines one list for pools and
/// sets alike, and each template kind one list; never a GET per object.
#[test]
fn deployments_cost_one_list_per_kind_too() {
    let mut world = fleet_of(2);
    let md = super::deployments_world();
    world.deployments = md.deployments;
    world.machine_sets = md.machine_sets;
    world.templates = md.templates;
    world.set_machines = md.set_machines;
    world.configs.extend(md.configs);
    let lister = fake_of(&world);
    let report = kube::drift(&lister, &request(Scope::All, &[])).unwrap();
    assert_eq!(report.count_kind(WorkerKind::MachineDeployment), 1);
    assert_eq!(report.count_kind(WorkerKind::MachinePool), 2);
    let calls = lister.lists.borrow();
    let lists = |prefix: &str| calls.iter().filter(|c| c.starts_with(prefix)).count();
    assert_eq!(lists("machinedeployments."), 1);
    assert_eq!(lists("machinesets."), 1);
    assert_eq!(lists("kubeadmconfigtemplates."), 1);
    assert_eq!(lists("kubeadmconfigs."), 1);
    assert!(
        calls.contains(&"machines.cluster.x-k8s.io All None false".to_string()),
        "{calls:#?}"
    );
}

/// A MachineSet a MachineDeployment owns is answered by its MachineDeployment: naming it says so.
#[test]
fn a_named_machine_set_of_a_deployment_names_the_deployment() {
    let lister = fake_of(&super::deployments_world());
    let named = vec!["ms/md-1-s".to_string()];
    let e = kube::drift(
        &lister,
        &request(Scope::Namespace(Some("fleet".into())), &named),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "MachineSet md-1-s belongs to MachineDeployment md-1: name machinedeployment/md-1"
    );
    let named = vec!["md/md-1".to_string()];
    let report = kube::drift(
        &lister,
        &request(Scope::Namespace(Some("fleet".into())), &named),
    )
    .unwrap();
    assert_eq!(report.pools.len(), 1);
}

/// `--apply`: the Reports applied in one server-side apply; a Report drift wrote before in a
/// namespace that has no object now is deleted; another tool's Report is left alone.
#[test]
fn apply_writes_the_reports_and_prunes_its_own_old_ones() {
    let mut world = super::deployments_world();
    let report_in = |ns: &str, name: &str| {
        json!({"apiVersion": "openreports.io/v1alpha1", "kind": "Report",
               "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/managed-by": "capi-rollout-check"}}})
    };
    world.reports = vec![
        report_in("fleet", "capi-rollout-check-drift"),
        report_in("gone", "capi-rollout-check-drift"),
        report_in("gone", "someone-elses"),
    ];
    let lister = fake_of(&world);
    let request = request(Scope::All, &[]);
    let report = kube::drift(&lister, &request).unwrap();
    let lines = kube::apply_reports(&lister, &request, &report).unwrap();
    assert_eq!(
        lines,
        [
            "reports.openreports.io fleet/capi-rollout-check-drift applied (1 results)",
            "reports.openreports.io gone/capi-rollout-check-drift deleted (no MachinePool, MachineDeployment or MachineSet left there)",
        ]
    );
    let applies = lister.applied.borrow();
    assert_eq!(applies.len(), 1);
    assert!(
        applies[0].starts_with("capi-rollout-check: ---\n") && applies[0].contains("kind: Report"),
        "{}",
        applies[0]
    );
    assert_eq!(*lister.writes.borrow(), ["delete capi-rollout-check-drift"]);
    let calls = lister.lists.borrow();
    assert!(calls.contains(&"reports.openreports.io All Some(\"app.kubernetes.io/managed-by=capi-rollout-check\") false".to_string()), "{calls:#?}");
    let named = vec!["md/md-1".to_string()];
    let partial = super::super::kube::Request {
        objects: &named,
        ..request
    };
    assert_eq!(
        kube::apply_reports(&lister, &partial, &report)
            .unwrap_err()
            .to_string(),
        "--apply writes each namespace's whole Report: name no objects"
    );
}

/// No OpenReports CRD: said so, with where it comes from.
#[test]
fn apply_without_the_crd_names_it() {
    let lister = Fake {
        refused: vec![(
            "reports.openreports.io",
            "error: the server doesn't have a resource type \"reports\"",
        )],
        ..fake_of(&super::deployments_world())
    };
    let request = request(Scope::All, &[]);
    let report = kube::drift(&lister, &request).unwrap();
    let e = kube::apply_reports(&lister, &request, &report).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the OpenReports CRD (reports.openreports.io) is not installed"),
        "{e}"
    );
}

/// The `kind/NAME` every command takes, as kubectl names the kinds.
#[rstest]
#[case::full_resource("machinepools.cluster.x-k8s.io/p-1", Some((WorkerKind::MachinePool, "p-1")))]
#[case::short_upper("MD/md-0", Some((WorkerKind::MachineDeployment, "md-0")))]
#[case::plural("machinesets/ms-0", Some((WorkerKind::MachineSet, "ms-0")))]
#[case::no_name("ms/", None)]
#[case::another_kind("deployment/md-0", None)]
#[case::no_slash("machinepool", None)]
fn a_kind_and_name_as_kubectl_takes_them(
    #[case] arg: &str,
    #[case] parsed: Option<(WorkerKind, &str)>,
) {
    assert_eq!(WorkerKind::of_arg(arg), parsed);
}
