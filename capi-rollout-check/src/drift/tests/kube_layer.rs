//! The kubectl layer against an in-memory lister and a fake kubectl.

use super::*;

// ---- the kubectl layer -------------------------------------------------------------------

/// Lists from a World; records every call.
struct FakeLister {
    world: World,
    calls: RefCell<Vec<String>>,
}

impl Lister for FakeLister {
    fn list(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed: bool,
    ) -> Result<Vec<Value>, ListError> {
        self.calls
            .borrow_mut()
            .push(format!("{resource} {scope:?} {selector:?} {managed}"));
        let w = &self.world;
        let items = match resource {
            "machinepools.cluster.x-k8s.io" => w.pools.clone(),
            "secrets" => w.secrets.clone(),
            "machines.cluster.x-k8s.io" => w.machines.clone(),
            // One namespace exists: fleet.
            "namespaces" if selector == Some("kubernetes.io/metadata.name=fleet") => {
                vec![json!({"metadata": {"name": "fleet"}})]
            }
            "namespaces" if selector == Some("kubernetes.io/metadata.name=forbidden") => {
                return Err(ListError {
                    resource: resource.into(),
                    message: "Error from server (Forbidden): namespaces is forbidden".into(),
                })
            }
            "namespaces" => vec![],
            r if r.ends_with(".bootstrap.cluster.x-k8s.io") => w
                .configs
                .iter()
                .filter(|c| {
                    format!("{}s", c["kind"].as_str().unwrap().to_lowercase())
                        == r.split('.').next().unwrap()
                })
                .cloned()
                .collect(),
            r if r.ends_with(".infrastructure.cluster.x-k8s.io") => w
                .infra_pools
                .iter()
                .chain(&w.infra_instances)
                .filter(|c| {
                    format!("{}s", c["kind"].as_str().unwrap().to_lowercase())
                        == r.split('.').next().unwrap()
                })
                .cloned()
                .collect(),
            _ => {
                return Err(ListError {
                    resource: resource.into(),
                    message: "the server doesn't have a resource type".into(),
                })
            }
        };
        Ok(items)
    }
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

fn request(scope: Scope, pools: &[String]) -> kube::Request<'_> {
    kube::Request {
        scope,
        pools,
        now: T0 + NOW * 60,
        cluster_flags: String::new(),
    }
}

#[test]
fn one_list_per_kind_however_many_pools() {
    let lister = FakeLister {
        world: fleet_of(40),
        calls: RefCell::default(),
    };
    let report = kube::drift(
        &lister,
        &request(Scope::Namespace(Some("fleet".into())), &[]),
    )
    .unwrap();
    assert_eq!(report.pools.len(), 40);
    let ns = "Namespace(Some(\"fleet\"))";
    assert_eq!(
        *lister.calls.borrow(),
        [
            format!("machinepools.cluster.x-k8s.io {ns} None false"),
            format!("kubeadmconfigs.bootstrap.cluster.x-k8s.io {ns} None true"),
            format!("rke2configs.bootstrap.cluster.x-k8s.io {ns} None true"),
            format!("secrets {ns} Some(\"cluster.x-k8s.io/cluster-name\") true"),
            format!("machines.cluster.x-k8s.io {ns} Some(\"cluster.x-k8s.io/pool-name\") false"),
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
#[case::not_a_pool(Scope::Namespace(None), &["machinedeployment/md-0"], "\"machinedeployment/md-0\": name a pool as machinepool/NAME")]
#[case::names_with_all_namespaces(Scope::All, &["machinepool/pool-1"], "named pools are in one namespace: use -n NS, not -A")]
fn usage_errors(#[case] scope: Scope, #[case] pools: &[&str], #[case] message: &str) {
    let lister = FakeLister {
        world: fleet_of(2),
        calls: RefCell::default(),
    };
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
    let lister = FakeLister {
        world: World::default(),
        calls: RefCell::default(),
    };
    let result = kube::drift(&lister, &request(Scope::Namespace(Some(ns.into())), &[]));
    match error {
        None => assert!(result.unwrap().pools.is_empty()),
        Some(message) => assert_eq!(result.unwrap_err().to_string(), message),
    }
    assert_eq!(
        lister.calls.borrow().last().unwrap(),
        &format!("namespaces Namespace(None) Some(\"kubernetes.io/metadata.name={ns}\") false")
    );
}

#[test]
fn named_pools_still_cost_one_list_each_kind() {
    let lister = FakeLister {
        world: fleet_of(4),
        calls: RefCell::default(),
    };
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
            .calls
            .borrow()
            .iter()
            .any(|c| c.starts_with("rke2configs")),
        "{:?}",
        lister.calls.borrow()
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
    };
    assert_eq!(
        kubectl
            .list("machinepools.cluster.x-k8s.io", &Scope::All, None, false)
            .unwrap(),
        Vec::<Value>::new()
    );
    let e = kubectl
        .list(
            "secrets",
            &Scope::Namespace(Some("fleet".into())),
            Some("a"),
            true,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "listing secrets: Error from server (Forbidden): secrets is forbidden"
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
        &FakeLister {
            world: fleet_of(6),
            calls: RefCell::default(),
        },
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
