//! MachineDeployments and MachineSets: each Machine's own config against the template.

use super::*;
use crate::drift::analysis::{CauseKind, Level, PathsAre, StaleBecause, WorkerKind};
use crate::drift::reports;

const SYSCTL: &str = "vm.max_map_count = 262144";
const EDITED: &str = "vm.max_map_count = 524288";

/// A template's (or a Machine's config's) spec with `content` in its one file.
fn spec(content: &str) -> Value {
    json!({"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": content}],
           "joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [{"name": "max-pods", "value": "110"}]}}})
}

/// What CABPK fills into a Machine's config: the join discovery, the token; the defaulter's
/// format.
fn filled(mut spec: Value) -> Value {
    spec["joinConfiguration"]["discovery"] = json!({"bootstrapToken": {
        "apiServerEndpoint": "10.0.0.1:6443", "caCertHashes": ["sha256:ab"], "token": "abc.def"}});
    spec["format"] = json!("cloud-config");
    spec
}

fn template_edit(manager: &str, minute: i64) -> Value {
    json!({"manager": manager, "operation": "Update", "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
           "time": at(minute), "fieldsType": "FieldsV1",
           "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:files": {}}}}}})
}

/// A MachineDeployment `name` (or, with `deployment` false, a bare MachineSet `name`) on
/// template `name-t` holding `template`, its MachineSet `name-s`, and a Machine per `(minute, content)`
/// with a config of its own holding that content.
struct Workers<'a> {
    name: &'a str,
    deployment: bool,
    template: &'a str,
    managed: Vec<Value>,
    machines: &'a [(i64, &'a str)],
}

impl World {
    fn workers(w: Workers) -> World {
        let (name, template) = (w.name, format!("{}-t", w.name));
        let set = if w.deployment {
            format!("{name}-s")
        } else {
            name.to_string()
        };
        let bootstrap = json!({"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": template}});
        let infra = json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": name});
        let mut world = World::default();
        let mut set_meta = json!({"name": set, "namespace": "fleet", "uid": format!("{set}-uid"),
            "labels": {"cluster.x-k8s.io/cluster-name": "c1"}});
        if w.deployment {
            world.deployments.push(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
                "metadata": {"name": name, "namespace": "fleet", "uid": format!("{name}-uid"), "creationTimestamp": at(0),
                             "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
                "spec": {"clusterName": "c1", "replicas": w.machines.len(),
                         "template": {"spec": {"bootstrap": bootstrap, "infrastructureRef": infra}}}
            }));
            set_meta["ownerReferences"] = json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "name": name, "uid": format!("{name}-uid"), "controller": true}]);
        }
        world.machine_sets.push(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "metadata": set_meta,
            "spec": {"clusterName": "c1", "template": {"spec": {"bootstrap": bootstrap, "infrastructureRef": infra}}}
        }));
        let mut managed = vec![template_edit("kubectl-client-side-apply", 0)];
        managed.extend(w.managed);
        world.templates.push(json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
            "metadata": {"name": template, "namespace": "fleet", "creationTimestamp": at(0), "managedFields": managed},
            "spec": {"template": {"spec": spec(w.template)}}
        }));
        for (n, (minute, content)) in w.machines.iter().enumerate() {
            let machine = format!("{name}-m{n}");
            world.set_machines.push(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": machine, "namespace": "fleet", "creationTimestamp": at(*minute),
                             "labels": {"cluster.x-k8s.io/set-name": set, "cluster.x-k8s.io/cluster-name": "c1"},
                             "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": set, "uid": format!("{set}-uid"), "controller": true}]},
                "spec": {"clusterName": "c1", "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": machine}}}
            }));
            world.configs.push(json!({
                "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                "metadata": {"name": machine, "namespace": "fleet", "creationTimestamp": at(*minute)},
                "spec": filled(spec(content)),
                "status": {"dataSecretName": machine}
            }));
        }
        world
    }
}

fn deployment<'a>(managed: Vec<Value>, machines: &'a [(i64, &'a str)]) -> World {
    World::workers(Workers {
        name: "md-1",
        deployment: true,
        template: EDITED,
        managed,
        machines,
    })
}

const EDITED_MACHINES: &[(i64, &str)] = &[(10, SYSCTL), (20, SYSCTL), (250, EDITED)];

/// MachineDeployment md-1 in `fleet`, its template edited in place: two stale Machines of three.
pub(super) fn deployments_world() -> World {
    deployment(vec![template_edit("kubectl-edit", 200)], EDITED_MACHINES)
}

/// The template edited in place at minute 200 by an exempt person, then a scale-up: the two
/// older Machines stale with the changed path, the new one current; the fix rotates the
/// template and names the roll-out CAPI does.
#[test]
fn a_template_edited_in_place_names_exactly_the_older_machines() {
    let p = one(&deployment(
        vec![template_edit("kubectl-edit", 200)],
        EDITED_MACHINES,
    ));
    assert_eq!(
        (p.kind, p.verdict),
        (WorkerKind::MachineDeployment, Verdict::Stale)
    );
    assert_eq!(p.confidence.level, Level::Exact, "{:?}", p.confidence);
    assert_eq!(
        p.confidence.reasons,
        ["each Machine's KubeadmConfig compared with KubeadmConfigTemplate md-1-t's spec (3 Machines compared)"]
    );
    let stale: Vec<(&str, StaleBecause, &[String])> = p
        .instances
        .stale
        .iter()
        .map(|s| (s.name.as_str(), s.because, s.paths.as_slice()))
        .collect();
    let path = ["spec.template.spec.files[0].content".to_string()];
    assert_eq!(
        stale,
        [
            ("md-1-m0", StaleBecause::ConfigDiffers, &path[..]),
            ("md-1-m1", StaleBecause::ConfigDiffers, &path[..]),
        ]
    );
    assert_eq!(render::stale_column(&p), "2/3");
    let cause = &p.causes[0];
    assert_eq!(cause.kind, CauseKind::InPlaceEdit);
    assert_eq!(cause.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(cause.time, Some(T0 + 200 * 60));
    assert_eq!(
        (cause.paths.as_slice(), cause.paths_are),
        (&path[..], PathsAre::Different)
    );
    assert_eq!(
        p.fix,
        [
            "capi-rollout-check rotate machinedeployment/md-1 -n fleet --reissue",
            "# CAPI then rolls MachineDeployment md-1 out (RollingUpdate, maxSurge 1, maxUnavailable 0): a new MachineSet on the new template replaces every Machine; add --wait to follow it to the end, or watch:",
            "kubectl get machinedeployments.cluster.x-k8s.io md-1 -n fleet -w",
        ]
    );
}

#[rstest]
// Every config as the template, CABPK's fills and the token aside.
#[case::clean(vec![], &[(10, EDITED), (20, EDITED)], Verdict::Current, Level::Exact, "2 Machines compared")]
#[case::no_machines(vec![], &[], Verdict::Current, Level::Exact, "no Machine made from KubeadmConfigTemplate md-1-t")]
// A controller's write of the template is no cause; the configs differing still are stale.
#[case::differs_without_an_edit_on_record(vec![template_edit("manager", 200)], &[(10, SYSCTL)], Verdict::Stale, Level::Exact, "3 Machines")]
fn verdicts(
    #[case] managed: Vec<Value>,
    #[case] machines: &[(i64, &str)],
    #[case] verdict: Verdict,
    #[case] level: Level,
    #[case] reason: &str,
) {
    let p = one(&deployment(managed, machines));
    assert_eq!((p.verdict, p.confidence.level), (verdict, level), "{p:#?}");
    if verdict == Verdict::Stale {
        assert_eq!(p.causes[0].manager, None, "{:?}", p.causes);
        assert!(
            p.causes[0]
                .summary
                .contains("no write of its spec after they were made"),
            "{}",
            p.causes[0].summary
        );
    } else {
        assert!(
            p.confidence.reasons[0].contains(reason),
            "{:?}",
            p.confidence.reasons
        );
        assert!(p.fix.is_empty());
    }
}

/// A Machine's config deleted: that Machine cannot be compared, said so; stale Machines beside
/// it keep the verdict stale, bounded.
#[rstest]
#[case::alone(&[(10, EDITED), (20, EDITED)], Verdict::Unknown, Level::Unknown)]
#[case::beside_a_stale_one(&[(10, EDITED), (20, SYSCTL)], Verdict::Stale, Level::Bounded)]
fn a_config_gone_is_unknown_with_why(
    #[case] machines: &[(i64, &str)],
    #[case] verdict: Verdict,
    #[case] level: Level,
) {
    let world = deployment(vec![], machines).with(|w| {
        w.configs.retain(|c| c["metadata"]["name"] != "md-1-m0");
    });
    let p = one(&world);
    assert_eq!((p.verdict, p.confidence.level), (verdict, level));
    assert_eq!(
        p.confidence.reasons[0],
        "Machine md-1-m0's KubeadmConfig md-1-m0 was not found (deleted or garbage-collected): what it booted from cannot be compared"
    );
}

/// The Machines of an older MachineSet (a roll-out CAPI is doing) are not compared: CAPI
/// replaces them.
#[test]
fn an_older_machine_sets_machines_are_capis_roll_out() {
    let world = deployment(vec![], &[(10, EDITED)]).with(|w| {
        let mut old = w.machine_sets[0].clone();
        old["metadata"]["name"] = json!("md-1-old");
        old["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] = json!("md-1-t-old");
        w.machine_sets.push(old);
        let mut m = w.set_machines[0].clone();
        m["metadata"]["name"] = json!("md-1-old-m0");
        m["metadata"]["ownerReferences"][0]["name"] = json!("md-1-old");
        w.set_machines.push(m);
    });
    let p = one(&world);
    assert_eq!(p.verdict, Verdict::Current);
    assert_eq!(p.instances.total, Some(1));
    assert_eq!(
        p.confidence.reasons[1],
        "1 Machine of older MachineSets not compared: CAPI's roll-out replaces them"
    );
}

/// A MachineSet no MachineDeployment owns: judged on its own; its fix deletes the stale
/// Machines, since a MachineSet replaces none on a template change. One a MachineDeployment owns
/// is judged through it.
#[test]
fn a_bare_machine_set_and_its_fix() {
    let world = World::workers(Workers {
        name: "ms-1",
        deployment: false,
        template: EDITED,
        managed: vec![template_edit("kubectl-edit", 200)],
        machines: &[(10, SYSCTL), (250, EDITED)],
    });
    let p = one(&world);
    assert_eq!(
        (p.kind, p.name.as_str(), p.verdict),
        (WorkerKind::MachineSet, "ms-1", Verdict::Stale)
    );
    assert_eq!(
        p.fix,
        [
            "capi-rollout-check rotate machineset/ms-1 -n fleet --reissue",
            "# a MachineSet replaces no Machine on a template change: delete each stale Machine, one at a time once its replacement is Ready; MachineSet ms-1 makes it again from the new template",
            "kubectl delete machines.cluster.x-k8s.io ms-1-m0 -n fleet",
        ]
    );
    // Owned by a MachineDeployment: one report, the MachineDeployment's.
    let both = deployment(vec![], &[(10, EDITED)]).report();
    assert_eq!(both.pools.len(), 1);
    assert_eq!(both.pools[0].kind, WorkerKind::MachineDeployment);
}

/// A ClusterClass MachineDeployment: the fix goes through the class, never a rotation by hand.
#[test]
fn a_cluster_class_deployment_is_fixed_the_class_way() {
    let world = deployment(vec![template_edit("capi-topology", 200)], EDITED_MACHINES).with(|w| {
        let labels = &mut w.deployments[0]["metadata"]["labels"];
        labels["topology.cluster.x-k8s.io/owned"] = json!("");
        labels["topology.cluster.x-k8s.io/deployment-name"] = json!("workers-a");
    });
    let p = one(&world);
    assert_eq!(p.causes[0].kind, CauseKind::TopologyPatch);
    assert!(
        p.fix[0].starts_with("# a ClusterClass MachineDeployment"),
        "{:?}",
        p.fix
    );
    assert!(p.fix[0].contains("the entry workers-a"), "{:?}", p.fix);
    assert_eq!(
        p.fix[1],
        "kubectl edit clusters.cluster.x-k8s.io c1 -n fleet"
    );
}

/// The table and JSON carry the kind, the per-Machine paths and one schema for every kind.
#[test]
fn the_table_and_json_name_the_kind_and_each_machines_paths() {
    let mut world = deployment(vec![template_edit("kubectl-edit", 200)], EDITED_MACHINES);
    let pool = World::pool(&kubeadm_docker(), 0, vec![], 1, 1).machines(&[2]);
    world.pools = pool.pools;
    world.configs.extend(pool.configs);
    world.secrets = pool.secrets;
    world.machines = pool.machines;
    world.infra_pools = pool.infra_pools;
    let report = world.report();
    let text = render::table(&report);
    assert!(
        text.contains(&format!(
            "  md-1-m0 launched {} (config-differs-from-template): spec.template.spec.files[0].content\n",
            at(10)
        )),
        "{text}"
    );
    assert!(
        text.contains("fleet machinedeployment/md-1: stale (exact)"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "2 objects (1 MachinePool, 1 MachineDeployment): 1 current, 1 stale, 0 unknown\n"
        ),
        "{text}"
    );
    let value: Value = serde_json::from_str(&render::json(&report)).unwrap();
    let kinds: Vec<&str> = value["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["MachinePool", "MachineDeployment"]);
    assert_eq!(value["items"][1]["causes"][0]["pathsAre"], "different");
    assert_eq!(
        value["items"][1]["instances"]["stale"][0]["paths"],
        json!(["spec.template.spec.files[0].content"])
    );
}

/// `-o report`: one Report per namespace, a result per object (pass, fail, skip), the object
/// in its resources, the cause and fix in its properties; the namespace of `-n` gets an empty
/// Report when it has no object, so an older one is emptied.
#[test]
fn one_open_report_per_namespace() {
    let mut world = deployment(vec![template_edit("kubectl-edit", 200)], EDITED_MACHINES);
    let clean = World::workers(Workers {
        name: "md-2",
        deployment: true,
        template: EDITED,
        managed: vec![],
        machines: &[(10, EDITED)],
    });
    world.deployments.extend(clean.deployments);
    world.machine_sets.extend(clean.machine_sets);
    world.templates.extend(clean.templates);
    world.set_machines.extend(clean.set_machines);
    world.configs.extend(clean.configs);
    let report = world.report();
    let written = reports::reports(&report, &["empty".to_string()]);
    assert_eq!(written.len(), 2);
    assert_eq!(written[0]["metadata"]["namespace"], "empty");
    assert_eq!(written[0]["results"], json!([]));
    let r = &written[1];
    assert_eq!(r["apiVersion"], "openreports.io/v1alpha1");
    assert_eq!(r["kind"], "Report");
    assert_eq!(r["metadata"]["name"], "capi-rollout-check-drift");
    assert_eq!(r["source"], "capi-rollout-check");
    assert_eq!(
        r["summary"],
        json!({"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0})
    );
    let stale = &r["results"][0];
    assert_eq!(stale["result"], "fail");
    assert_eq!(stale["severity"], "medium");
    assert_eq!(
        stale["resources"],
        json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "name": "md-1", "namespace": "fleet", "uid": "md-1-uid"}])
    );
    assert_eq!(
        stale["message"],
        "MachineDeployment md-1: 2 of 3 instances run older bootstrap data than KubeadmConfigTemplate md-1-t says"
    );
    let props = &stale["properties"];
    assert_eq!(props["confidence"], "exact");
    assert_eq!(props["cause"], "in-place-edit");
    assert_eq!(props["manager"], "kubectl-edit");
    assert_eq!(props["staleInstances"], "md-1-m0, md-1-m1");
    assert_eq!(props["paths"], "spec.template.spec.files[0].content");
    assert!(props["fix"]
        .as_str()
        .unwrap()
        .starts_with("capi-rollout-check rotate machinedeployment/md-1"));
    assert!(props.as_object().unwrap().values().all(Value::is_string));
    assert_eq!(r["results"][1]["result"], "pass");
    assert!(r["results"][1].get("severity").is_none());
    let yaml = reports::yaml(&written);
    assert_eq!(yaml.matches("---\n").count(), 2, "{yaml}");
}
