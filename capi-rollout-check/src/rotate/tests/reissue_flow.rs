//! `rotate --reissue` against the cluster held in memory: the same spec under a fresh name,
//! the ref repointed with the test op, what the infrastructure does after it, and each refusal
//! (exit 2, never 1) changing nothing.

use super::*;
use crate::fake::{DEPLOYMENTS, SETS, TEMPLATES};
use capi_rollout_check::drift::analysis::reissue_name;

/// The time `--reissue` is run at, seconds since the epoch.
const NOW: i64 = 1_796_000_000;

fn reissue(consumer: &str, dry_run: DryRun) -> Request<'_> {
    Request {
        consumer,
        namespace: Some("fleet"),
        edited: Edited::Reissue { now: NOW },
        dry_run,
        timeout: Duration::from_secs(5),
        replace_instances: false,
        wait: false,
        interrupted: &|| false,
    }
}

fn new_name() -> String {
    reissue_name("pool-1-a", NOW)
}

#[test]
fn the_same_spec_under_a_fresh_name_then_the_infrastructure() {
    let fake = fleet_on("DockerMachinePool", json!({}), &["m-a", "m-b"]);
    let (result, out, err) = run(&fake, &reissue("machinepool/pool-1", DryRun::None));
    let new = new_name();
    assert_ne!(new, "pool-1-a");
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    assert_eq!(
        *fake.writes.borrow(),
        [
            format!("create {new} None"),
            format!("patch pool-1 {new} None")
        ]
    );
    assert_eq!(
        *fake.patches.borrow(),
        [json!([
            {"op": "test", "path": "/spec/template/spec/bootstrap/configRef/name", "value": "pool-1-a"},
            {"op": "replace", "path": "/spec/template/spec/bootstrap/configRef/name", "value": new},
        ])]
    );
    let created = fake.object(CONFIGS, &new).unwrap();
    assert_eq!(created["spec"], config("pool-1-a", "a\n")["spec"]);
    assert!(created["metadata"].get("ownerReferences").is_none());
    assert_eq!(
        out,
        format!(
            "MachinePool fleet/pool-1 uses KubeadmConfig pool-1-a; the reissue copies its spec, unchanged, to a fresh name (the policy's \"same content\" warning is expected)\n\
             created KubeadmConfig fleet/{new}\n\
             MachinePool fleet/pool-1: configRef.name pool-1-a -> {new}\n\
             MachinePool fleet/pool-1: CAPI copied dataSecretName {new} into the pool\n\
             DockerMachinePool fleet/pool-1 (CAPD) replaces no existing instance on a rotation: {KEEP_2}\n\
             {}\n\
             left: KubeadmConfig fleet/pool-1-a, rotated out; delete it once the roll-out is done:\n  \
             kubectl delete kubeadmconfigs.bootstrap.cluster.x-k8s.io pool-1-a -n fleet\n",
            replacement_line("DockerMachinePool")
        )
    );
    // The policy's warnings on the writes are shown, not taken for a failure.
    assert_eq!(err, "Warning: a warning of the policy\n");
}

#[test]
fn with_replace_instances_roll_follows() {
    let mut fake = fleet_on("AzureMachinePool", json!({}), &["m-a", "m-b"]);
    fake.scales_back = true;
    let mut request = reissue("machinepool/pool-1", DryRun::None);
    request.replace_instances = true;
    let (result, out, _) = run(&fake, &request);
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    let new = new_name();
    assert_eq!(
        *fake.writes.borrow(),
        [
            format!("create {new} None"),
            format!("patch pool-1 {new} None"),
            "delete m-a".into(),
            "delete m-b".into()
        ]
    );
    assert!(out.contains(&format!("MachinePool fleet/pool-1: done: 2 Machines replaced; every Machine was launched after data Secret {new}\nleft: ")), "{out}");
}

#[rstest]
#[case::client(DryRun::Client, &[])]
#[case::server(DryRun::Server, &["create NAME Server", "patch pool-1 NAME Server"])]
fn dry_runs(#[case] dry_run: DryRun, #[case] writes: &[&str]) {
    let fake = fleet();
    let (result, out, _) = run(&fake, &reissue("mp/pool-1", dry_run));
    assert_eq!(result.unwrap(), Done::DryRun, "{out}");
    let new = new_name();
    let expected: Vec<String> = writes.iter().map(|w| w.replace("NAME", &new)).collect();
    assert_eq!(*fake.writes.borrow(), expected);
    assert!(fake.object(CONFIGS, &new).is_none());
    assert_eq!(fake.object(POOLS, "pool-1").unwrap(), pool(json!({})));
    if dry_run == DryRun::Client {
        assert!(
            out.contains(&format!(
                "(dry run) would create KubeadmConfig fleet/{new}:\n"
            )),
            "{out}"
        );
        assert!(out.contains("  - content: |\n      a\n"), "{out}");
        assert!(
            out.ends_with(&format!(
                "(dry run) would set MachinePool fleet/pool-1 configRef.name: pool-1-a -> {new}\n"
            )),
            "{out}"
        );
    }
}

fn without_config_ref() -> Value {
    let mut p = pool(json!({}));
    p["spec"]["template"]["spec"]["bootstrap"] = json!({"dataSecretName": "pool-1-data"});
    p
}

/// fleet() with the reissue's name taken by a config of another spec.
fn name_taken() -> Fake {
    let fake = fleet();
    fake.put(CONFIGS, config(&new_name(), "other\n"));
    fake
}

/// Each refusal: exit 2 (never 1: a reissue always has something to rotate), the message,
/// and no write.
#[rstest]
#[case::no_such_deployment(
    fleet(),
    "machinedeployment/md-9",
    "MachineDeployment md-9 not found in namespace fleet"
)]
#[case::no_such_pool(
    fleet(),
    "machinepool/pool-9",
    "MachinePool pool-9 not found in namespace fleet"
)]
#[case::being_deleted(Fake::with(&[(POOLS, pool(json!({"deletionTimestamp": "2026-12-02T00:00:00Z"}))), (CONFIGS, config("pool-1-a", "a\n"))]),
    "machinepool/pool-1", "MachinePool fleet/pool-1 is being deleted")]
#[case::topology(Fake::with(&[(POOLS, pool(json!({"labels": {"topology.cluster.x-k8s.io/owned": ""}}))), (CONFIGS, config("pool-1-a", "a\n"))]),
    "machinepool/pool-1", "MachinePool fleet/pool-1 is managed by Cluster c1's topology")]
#[case::no_config_ref(Fake::with(&[(POOLS, without_config_ref())]), "machinepool/pool-1",
    "MachinePool fleet/pool-1 has no spec.template.spec.bootstrap.configRef")]
#[case::config_missing(Fake::with(&[(POOLS, pool(json!({})))]), "machinepool/pool-1",
    "MachinePool fleet/pool-1 uses KubeadmConfig pool-1-a, which does not exist in namespace fleet")]
#[case::no_create_rbac(Fake { denied: vec![("create", CONFIGS)], ..fleet() }, "machinepool/pool-1",
    "RBAC: you may not create kubeadmconfigs.bootstrap.cluster.x-k8s.io in namespace fleet; nothing was changed")]
#[case::name_taken(name_taken(), "machinepool/pool-1",
    "KubeadmConfig fleet/pool-1-a-8649fa5d already exists with another spec: nothing was changed; a reissue a second later picks another name")]
fn refusals_change_nothing(#[case] fake: Fake, #[case] consumer: &str, #[case] message: &str) {
    let before = fake.objects.borrow().clone();
    let (result, out, _) = run(&fake, &reissue(consumer, DryRun::None));
    let e = result.unwrap_err();
    assert!(e.to_string().starts_with(message), "{e}");
    assert_eq!(e.exit_code(), EXIT_ERROR);
    assert_eq!(out, "");
    assert!(
        fake.writes.borrow().is_empty(),
        "{:?}",
        fake.writes.borrow()
    );
    assert_eq!(*fake.objects.borrow(), before);
}

/// MachineDeployment md-1 (3 replicas) on template md-1-t, its MachineSet md-1-s.
fn deployment_fleet() -> Fake {
    let bootstrap = json!({"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "md-1-t"}});
    let spec = json!({"clusterName": "c1", "replicas": 3,
        "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
        "template": {"spec": {"clusterName": "c1", "bootstrap": bootstrap}}});
    let mut fake = Fake::with(&[
        (
            DEPLOYMENTS,
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md-1", "namespace": "fleet", "uid": "md"}, "spec": spec}),
        ),
        (
            SETS,
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
            "metadata": {"name": "md-1-s", "namespace": "fleet", "labels": {"cluster.x-k8s.io/deployment-name": "md-1"}},
            "spec": spec, "status": {"replicas": 3, "readyReplicas": 3}}),
        ),
        (
            TEMPLATES,
            json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
            "metadata": {"name": "md-1-t", "namespace": "fleet"},
            "spec": {"template": {"spec": {"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": "b\n"}]}}}}),
        ),
    ]);
    fake.capi_copies = true;
    fake
}

/// A MachineDeployment's template reissued: the same spec under a fresh name, the ref
/// repointed with the test op, the roll-out CAPI starts named with its strategy and, with
/// `--wait`, followed to its end; the same without CAPI rolling it: exit 3, how to watch.
#[rstest]
#[case::followed(
    true,
    true,
    Done::Rotated,
    "fleet/md-1: rolled out: every Machine is on"
)]
#[case::not_waited_for(false, true, Done::Rotated, "(or rotate with --wait)")]
#[case::never_ready(
    true,
    false,
    Done::NotYetRolled,
    "the roll-out had not ended within 5s; it goes on"
)]
fn a_machine_deployments_template_reissued_then_rolled_out(
    #[case] wait: bool,
    #[case] ready: bool,
    #[case] done: Done,
    #[case] last: &str,
) {
    let fake = Fake {
        never_ready: !ready,
        ..deployment_fleet()
    };
    let request = Request {
        wait,
        ..reissue("machinedeployment/md-1", DryRun::None)
    };
    let (result, out, _) = run(&fake, &request);
    let new = reissue_name("md-1-t", NOW);
    assert_eq!(result.unwrap(), done, "{out}");
    assert_eq!(
        *fake.writes.borrow(),
        [
            format!("create {new} None"),
            format!("patch md-1 {new} None")
        ]
    );
    assert_eq!(
        fake.patches.borrow()[0][0],
        json!({"op": "test", "path": "/spec/template/spec/bootstrap/configRef/name", "value": "md-1-t"})
    );
    let created = fake.object(TEMPLATES, &new).unwrap();
    assert_eq!(
        created["spec"],
        fake.object(TEMPLATES, "md-1-t").unwrap()["spec"]
    );
    assert!(
        out.contains(&format!(
            "MachineDeployment fleet/md-1: CAPI made MachineSet md-1-{} on {new}: it rolls the MachineDeployment out (RollingUpdate, maxSurge 1, maxUnavailable 0), replacing every Machine\n",
            &new[new.len() - 5..]
        )),
        "{out}"
    );
    if wait && ready {
        assert!(
            out.contains(&format!(
                "MachineDeployment fleet/md-1: 3/3 Ready on {new}, 0 left on older MachineSets\n"
            )),
            "{out}"
        );
    }
    assert!(out.contains(last), "{out}");
}

/// A bare MachineSet's template reissued: new Machines use it; the older ones are the
/// person's to delete, said with where drift names them.
#[test]
fn a_machine_sets_template_reissued_says_what_is_left_to_do() {
    let fake = deployment_fleet();
    let mut set = fake.object(SETS, "md-1-s").unwrap();
    set["metadata"]["name"] = json!("ms-1");
    set["metadata"]["labels"] = json!({});
    fake.put(SETS, set);
    let (result, out, _) = run(&fake, &reissue("machineset/ms-1", DryRun::None));
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    let new = reissue_name("md-1-t", NOW);
    assert!(
        out.contains(&format!(
            "MachineSet fleet/ms-1: a MachineSet replaces no Machine on a template change; new Machines use {new}. Delete the older ones one at a time, once each replacement is Ready (capi-rollout-check drift machineset/ms-1 -n fleet names them)\n"
        )),
        "{out}"
    );
}
