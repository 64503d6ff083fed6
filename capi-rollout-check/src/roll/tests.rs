//! `roll` against a cluster held in memory whose provider launches a replacement for each
//! deleted MachinePool Machine: the deletes, their order, the floor, the waits, a stop and a
//! re-run, and each refusal deleting nothing.

use std::time::Duration;

use capi_bootstrap_rollout_policy::capi::infrastructure::{infrastructure, Replacement};
use rstest::rstest;
use serde_json::{json, Value};

use super::*;
use crate::fake::{machine, Fake, CONFIGS, MACHINES, POOLS, SECRETS};

mod fleet_safety;

const GROUP: &str = "infrastructure.cluster.x-k8s.io";
const SECRET_AT: &str = "2026-12-06T03:00:00Z";

fn pool(kind: &str, replicas: u32) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "pool-1", "namespace": "fleet"},
        "spec": {"clusterName": "c1", "replicas": replicas, "template": {"spec": {"clusterName": "c1",
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "pool-1-b"},
                          "dataSecretName": "pool-1-b"},
            "infrastructureRef": {"apiGroup": GROUP, "kind": kind, "name": "pool-1"}}}}})
}

fn infra(kind: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1beta1"), "kind": kind,
        "metadata": {"name": "pool-1", "namespace": "fleet"}, "spec": spec})
}

/// An AzureMachinePool (CAPZ: delete MachinePool Machines) of `replicas`, its data Secret
/// made at 03:00:00, and `machines` (`name:minute:R|N`, minutes of 02:xx, before the Secret).
fn fleet(replicas: u32, strategy: Value, machines: &str) -> Fake {
    let mut fake = Fake::with(&[
        (POOLS, pool("AzureMachinePool", replicas)),
        (
            "azuremachinepools.infrastructure.cluster.x-k8s.io",
            infra("AzureMachinePool", json!({"strategy": strategy})),
        ),
        (
            CONFIGS,
            json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                "metadata": {"name": "pool-1-b", "namespace": "fleet"}, "spec": {},
                "status": {"dataSecretName": "pool-1-b"}}),
        ),
        (
            SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "pool-1-b", "namespace": "fleet", "creationTimestamp": SECRET_AT}}),
        ),
    ]);
    for m in machines.split_whitespace() {
        let p: Vec<&str> = m.split(':').collect();
        let created = format!("2026-12-06T02:{}:00Z", p[1]);
        fake.put(MACHINES, machine("pool-1", p[0], &created, p[2] == "R"));
    }
    fake.scales_back = true;
    fake
}

fn request<'a>(dry_run: bool, interrupted: &'a dyn Fn() -> bool) -> Request<'a> {
    Request {
        pool: "machinepool/pool-1",
        namespace: Some("fleet"),
        dry_run,
        timeout: Duration::from_secs(60),
        interval: Duration::from_secs(1),
        interrupted,
        take_over: false,
    }
}

fn run(fake: &Fake, request: &Request) -> (Result<Rolled, RollError>, String) {
    let mut out = Vec::new();
    let result = roll(fake, request, &mut out);
    (result, String::from_utf8(out).unwrap())
}

fn deletes(fake: &Fake) -> Vec<String> {
    fake.writes.borrow().clone()
}

const PLAN_3: &str = "\
MachinePool fleet/pool-1: infrastructure AzureMachinePool fleet/pool-1 (CAPZ); data Secret pool-1-b, created 2026-12-06T03:00:00Z
MachinePool fleet/pool-1: 3 replicas, maxUnavailable 1: deletes up to 1 Machine at a time, never below 2 Ready
MachinePool fleet/pool-1: 3 of 3 Machines were launched before data Secret pool-1-b; in this order:
  1. Machine fleet/m-a (launched 2026-12-06T02:10:00Z, Ready)
  2. Machine fleet/m-b (launched 2026-12-06T02:11:00Z, Ready)
  3. Machine fleet/m-c (launched 2026-12-06T02:12:00Z, Ready)
";

#[test]
fn one_at_a_time_each_replacement_ready_before_the_next() {
    let fake = fleet(3, json!(null), "m-c:12:R m-a:10:R m-b:11:R");
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(3), "{out}");
    assert_eq!(
        out,
        format!(
            "{PLAN_3}\
step 1: deleted Machine fleet/m-a (launched 2026-12-06T02:10:00Z)
step 1: Machine fleet/new-1 is Ready (launched 2026-12-06T03:00:01Z): 3 of 3 Machines Ready
step 2: deleted Machine fleet/m-b (launched 2026-12-06T02:11:00Z)
step 2: Machine fleet/new-2 is Ready (launched 2026-12-06T03:00:02Z): 3 of 3 Machines Ready
step 3: deleted Machine fleet/m-c (launched 2026-12-06T02:12:00Z)
step 3: Machine fleet/new-3 is Ready (launched 2026-12-06T03:00:03Z): 3 of 3 Machines Ready
MachinePool fleet/pool-1: done: 3 Machines replaced; every Machine was launched after data Secret pool-1-b
"
        )
    );
    assert_eq!(deletes(&fake), ["delete m-a", "delete m-b", "delete m-c"]);
    assert_eq!(*fake.ready_after_delete.borrow(), [2, 2, 2]);
}

#[rstest]
#[case::int(json!({"rollingUpdate": {"maxUnavailable": 2}}), "maxUnavailable 2")]
#[case::percent(json!({"rollingUpdate": {"maxUnavailable": "50%"}}), "maxUnavailable 50% of 4 = 2")]
fn up_to_max_unavailable_at_a_time(#[case] strategy: Value, #[case] said: &str) {
    let fake = fleet(4, strategy, "m-a:10:R m-b:11:R m-c:12:R m-d:13:R");
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(4), "{out}");
    assert!(out.contains(&format!("MachinePool fleet/pool-1: 4 replicas, {said}: deletes up to 2 Machines at a time, never below 2 Ready\n")), "{out}");
    assert!(out.contains("step 1: deleted Machine fleet/m-a (launched 2026-12-06T02:10:00Z)\nstep 1: deleted Machine fleet/m-b (launched 2026-12-06T02:11:00Z)\nstep 1: Machine fleet/new-1 is Ready (launched 2026-12-06T03:00:01Z): 4 of 4 Machines Ready\nstep 1: Machine fleet/new-2 is Ready (launched 2026-12-06T03:00:02Z): 4 of 4 Machines Ready\nstep 2: deleted Machine fleet/m-c"), "{out}");
    assert_eq!(
        deletes(&fake),
        ["delete m-a", "delete m-b", "delete m-c", "delete m-d"]
    );
    assert_eq!(*fake.ready_after_delete.borrow(), [3, 2, 3, 2]);
}

#[test]
fn maximum_unavailable_zero_is_taken_as_one() {
    let fake = fleet(
        2,
        json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}),
        "m-a:10:R m-b:11:R",
    );
    let (result, out) = run(&fake, &request(true, &|| false));
    assert_eq!(result.unwrap(), Rolled::DryRun);
    assert!(out.contains("MachinePool fleet/pool-1: 2 replicas, maxUnavailable 0 (taken as 1: roll deletes before the provider creates): deletes up to 1 Machine at a time, never below 1 Ready\n"), "{out}");
}

#[test]
fn a_dry_run_prints_the_plan_and_deletes_nothing() {
    let fake = fleet(3, json!(null), "m-a:10:R m-b:11:R m-c:12:R");
    let before = fake.objects.borrow().clone();
    let (result, out) = run(&fake, &request(true, &|| false));
    assert_eq!(result.unwrap(), Rolled::DryRun);
    assert_eq!(out, format!("{PLAN_3}(dry run) nothing was deleted\n"));
    assert!(deletes(&fake).is_empty());
    assert_eq!(*fake.objects.borrow(), before);
}

#[rstest]
#[case::roll(false)]
#[case::dry_run(true)]
fn nothing_to_replace(#[case] dry_run: bool) {
    let fake = fleet(2, json!(null), "");
    fake.put(
        MACHINES,
        machine("pool-1", "m-new", "2026-12-06T03:10:00Z", true),
    );
    // Another pool's Machine is not this pool's.
    fake.put(
        MACHINES,
        machine("pool-2", "m-other", "2026-12-06T02:00:00Z", true),
    );
    let (result, out) = run(&fake, &request(dry_run, &|| false));
    assert_eq!(result.unwrap(), Rolled::NothingToDo);
    assert!(out.ends_with("MachinePool fleet/pool-1: nothing to replace: every Machine was launched after data Secret pool-1-b\n"), "{out}");
    assert!(deletes(&fake).is_empty());
}

#[test]
fn a_machine_not_ready_blocks_until_the_timeout() {
    let fake = fleet(3, json!(null), "m-a:10:R m-b:11:R");
    fake.put(
        MACHINES,
        machine("pool-1", "late", "2026-12-06T03:05:00Z", false),
    );
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_TIMED_OUT);
    assert_eq!(e.to_string(), "timed out after 60s waiting for 3 Ready Machines: 0 Machines deleted so far; roll kept at least 2 Ready by its own deletes; re-run the same command to go on: capi-rollout-check roll machinepool/pool-1 -n fleet");
    assert!(
        out.ends_with("waiting: 2 of 3 Machines Ready, 3 needed before the next delete\n"),
        "{out}"
    );
    assert!(deletes(&fake).is_empty());
}

#[test]
fn a_stale_machine_not_ready_goes_first() {
    let fake = fleet(3, json!(null), "m-a:10:R m-b:11:N m-c:12:R");
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(3), "{out}");
    assert!(
        out.contains("  1. Machine fleet/m-b (launched 2026-12-06T02:11:00Z, not Ready)\n"),
        "{out}"
    );
    assert_eq!(deletes(&fake), ["delete m-b", "delete m-a", "delete m-c"]);
    assert_eq!(*fake.ready_after_delete.borrow(), [2, 2, 2]);
}

#[test]
fn interrupted_then_resumed_by_a_re_run() {
    let fake = fleet(3, json!(null), "m-a:10:R m-b:11:R m-c:12:R");
    let stop = || fake.writes.borrow().len() == 1;
    let (result, out) = run(&fake, &request(false, &stop));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_INTERRUPTED, "{out}");
    assert_eq!(e.to_string(), "interrupted: 1 Machine deleted so far; roll kept at least 2 Ready by its own deletes; re-run the same command to go on: capi-rollout-check roll machinepool/pool-1 -n fleet");
    assert_eq!(deletes(&fake), ["delete m-a"]);

    // The same command again: it goes on with what is left, the replacement of m-a counted
    // once it is Ready.
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(2), "{out}");
    assert!(out.contains("MachinePool fleet/pool-1: 2 of 3 Machines were launched before data Secret pool-1-b; in this order:\n  1. Machine fleet/m-b (launched 2026-12-06T02:11:00Z, Ready)\n  2. Machine fleet/m-c"), "{out}");
    assert_eq!(deletes(&fake), ["delete m-a", "delete m-b", "delete m-c"]);
    assert_eq!(*fake.ready_after_delete.borrow(), [2, 2, 2]);
}

#[test]
fn a_replacement_that_never_comes() {
    let mut fake = fleet(2, json!(null), "m-a:10:R m-b:11:R");
    fake.scales_back = false;
    let (result, out) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert_eq!(e.exit_code(), EXIT_TIMED_OUT, "{out}");
    assert!(e.to_string().starts_with("timed out after 60s waiting for the replacement of m-a: 1 Machine deleted so far; roll kept at least 1 Ready by its own deletes; re-run"), "{e}");
    assert_eq!(deletes(&fake), ["delete m-a"]);
}

/// Each refusal: the message, the exit code, and no delete.
#[rstest]
#[case::bad_type(fleet(3, json!(null), "m-a:10:R"), "machinedeployment/pool-1", "\"machinedeployment/pool-1\": name the pool as machinepool/NAME")]
#[case::not_found(fleet(3, json!(null), "m-a:10:R"), "machinepool/pool-9", "MachinePool pool-9 not found in namespace fleet")]
#[case::no_delete_rbac(Fake { denied: vec![("delete", MACHINES)], ..fleet(3, json!(null), "m-a:10:R") }, "machinepool/pool-1",
    "RBAC: you may not delete machines.cluster.x-k8s.io in namespace fleet; nothing was changed (kubectl auth can-i delete machines.cluster.x-k8s.io -n fleet: no)")]
#[case::no_secret_rbac(Fake { denied: vec![("get", SECRETS)], ..fleet(3, json!(null), "m-a:10:R") }, "machinepool/pool-1",
    "RBAC: you may not get secrets in namespace fleet; nothing was changed")]
#[case::bad_max_unavailable(fleet(3, json!({"rollingUpdate": {"maxUnavailable": "half"}}), "m-a:10:R"), "machinepool/pool-1",
    "AzureMachinePool fleet/pool-1 spec.strategy.rollingUpdate.maxUnavailable: maxUnavailable \"half\": not a count or a percent (1, \"25%\")")]
fn refusals(#[case] fake: Fake, #[case] pool: &str, #[case] message: &str) {
    let mut request = request(false, &|| false);
    request.pool = pool;
    let (result, _) = run(&fake, &request);
    let e = result.unwrap_err();
    assert!(e.to_string().starts_with(message), "{e}");
    assert_eq!(e.exit_code(), EXIT_ERROR);
    assert!(deletes(&fake).is_empty());
}

#[rstest]
#[case::being_deleted(json!({"metadata": {"deletionTimestamp": "2026-12-06T03:01:00Z"}}),
    "MachinePool fleet/pool-1 is being deleted (it has a deletionTimestamp): nothing to replace")]
#[case::not_taken_up(json!({"spec": {"template": {"spec": {"bootstrap": {"dataSecretName": "pool-1-a"}}}}}),
    "MachinePool fleet/pool-1: CAPI has not copied KubeadmConfig pool-1-b's dataSecretName into the pool yet (the pool has pool-1-a, the config pool-1-b)")]
#[case::no_data_secret(json!({"spec": {"template": {"spec": {"bootstrap": {"dataSecretName": null}}}}}),
    "MachinePool fleet/pool-1 has no bootstrap dataSecretName yet")]
#[case::no_infrastructure(json!({"spec": {"template": {"spec": {"infrastructureRef": null}}}}),
    "MachinePool fleet/pool-1 has no spec.template.spec.infrastructureRef: roll cannot tell how to replace its instances")]
fn pools_roll_refuses(#[case] change: Value, #[case] message: &str) {
    let fake = fleet(3, json!(null), "m-a:10:R");
    let mut p = pool("AzureMachinePool", 3);
    merge(&mut p, &change);
    fake.put(POOLS, p);
    let (result, _) = run(&fake, &request(false, &|| false));
    let e = result.unwrap_err();
    assert!(e.to_string().starts_with(message), "{e}");
    assert_eq!(e.exit_code(), EXIT_ERROR);
    assert!(deletes(&fake).is_empty());
}

fn merge(target: &mut Value, change: &Value) {
    match (target, change) {
        (Value::Object(t), Value::Object(c)) => {
            for (k, v) in c {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, c) => *t = c.clone(),
    }
}

fn manual(kind: &str) -> String {
    match infrastructure(GROUP, kind).unwrap().replacement {
        Replacement::Manual { instructions } => instructions.to_string(),
        other => panic!("{kind}: {other:?}"),
    }
}

/// Where deleting Machines is not the way: what roll says, its exit code, and no delete.
#[rstest]
#[case::capa("AWSMachinePool", json!({}), 0,
    "AWSMachinePool fleet/pool-1 (CAPA) replaces the instances itself on a rotation (an instance refresh); spec.refreshPreferences.disable: true turns that off: roll deletes nothing".to_string())]
#[case::capa_refresh_off("AWSMachinePool", json!({"refreshPreferences": {"disable": true}}), 1,
    "AWSMachinePool fleet/pool-1 (CAPA) has spec.refreshPreferences.disable: true, so it replaces no instance on a rotation; roll cannot replace them from the management cluster: start an instance refresh of its Auto Scaling group, or unset spec.refreshPreferences.disable before the next rotation".to_string())]
#[case::aks("AzureManagedMachinePool", json!({}), 0,
    "AzureManagedMachinePool fleet/pool-1 (CAPZ) never reads bootstrap data: nothing to replace".to_string())]
#[case::eks_without_launch_template("AWSManagedMachinePool", json!({}), 0,
    "AWSManagedMachinePool fleet/pool-1 (CAPA) never reads bootstrap data: nothing to replace".to_string())]
#[case::capg("GCPMachinePool", json!({}), 1,
    format!("GCPMachinePool fleet/pool-1 (CAPG): roll cannot replace its instances from the management cluster: {}", manual("GCPMachinePool")))]
#[case::oci("OCIMachinePool", json!({}), 1,
    format!("OCIMachinePool fleet/pool-1 (CAPOCI): roll cannot replace its instances from the management cluster: {}", manual("OCIMachinePool")))]
#[case::unknown("ExampleMachinePool", json!({}), 1,
    "ExampleMachinePool fleet/pool-1: capi-rollout-check does not know this infrastructure kind (infrastructure.cluster.x-k8s.io): roll cannot tell how to replace its instances".to_string())]
fn other_infrastructures(
    #[case] kind: &str,
    #[case] spec: Value,
    #[case] code: u8,
    #[case] line: String,
) {
    let fake = fleet(3, json!(null), "m-a:10:R");
    fake.put(POOLS, pool(kind, 3));
    let resource = crate::cluster::resource_of(kind, GROUP, None);
    fake.put(&resource, infra(kind, spec));
    let (result, out) = run(&fake, &request(false, &|| false));
    let rolled = result.unwrap();
    assert_eq!(out, format!("{line}\n"));
    assert_eq!(rolled.exit_code(), code);
    assert!(deletes(&fake).is_empty());
}

#[test]
fn a_docker_machine_pool_has_no_max_unavailable() {
    let fake = fleet(3, json!(null), "m-a:10:R m-b:11:R m-c:12:R");
    fake.put(POOLS, pool("DockerMachinePool", 3));
    fake.put(
        "dockermachinepools.infrastructure.cluster.x-k8s.io",
        infra(
            "DockerMachinePool",
            json!({"template": {"customImage": "kindest/node:v1.34.0"}}),
        ),
    );
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(3), "{out}");
    assert!(
        out.starts_with(&PLAN_3.replace(
            "AzureMachinePool fleet/pool-1 (CAPZ)",
            "DockerMachinePool fleet/pool-1 (CAPD)"
        )),
        "{out}"
    );
    assert_eq!(deletes(&fake), ["delete m-a", "delete m-b", "delete m-c"]);
}

/// A re-run after an interruption that left the last stale Machine being deleted: it waits
/// until that one is gone, and then for nothing else.
#[test]
fn the_last_stale_machine_still_being_deleted() {
    let fake = fleet(2, json!(null), "");
    let mut leaving = machine("pool-1", "m-a", "2026-12-06T02:10:00Z", true);
    leaving["metadata"]["deletionTimestamp"] = json!("2026-12-06T03:05:00Z");
    fake.put(MACHINES, leaving);
    fake.put(
        MACHINES,
        machine("pool-1", "m-new", "2026-12-06T03:04:00Z", true),
    );
    let (result, out) = run(&fake, &request(false, &|| false));
    assert_eq!(result.unwrap(), Rolled::Replaced(0), "{out}");
    assert!(out.ends_with("MachinePool fleet/pool-1: 2 replicas, maxUnavailable 1: deletes up to 1 Machine at a time, never below 1 Ready\n\
waiting: 1 Machine launched before data Secret pool-1-b still being deleted\n\
MachinePool fleet/pool-1: done: 0 Machines replaced; every Machine was launched after data Secret pool-1-b\n"), "{out}");
    assert!(deletes(&fake).is_empty());
}
