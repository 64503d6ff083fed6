//! The cluster flow against a cluster held in memory: each refusal changes nothing, and a
//! rotation writes exactly the new config and the consumer's ref.

use std::time::Duration;

use rstest::rstest;
use serde_json::{json, Value};

use super::*;
use crate::cluster::DryRun;
use crate::fake::{Fake, CONFIGS, POOLS};

mod reissue_flow;

fn pool(metadata: Value) -> Value {
    let mut pool = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "pool-1", "namespace": "fleet"},
        "spec": {"clusterName": "c1", "template": {"spec": {"clusterName": "c1", "bootstrap": {
            "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "pool-1-a"},
            "dataSecretName": "pool-1-a"}}}}});
    for (k, v) in metadata.as_object().unwrap() {
        pool["metadata"][k] = v.clone();
    }
    pool
}

fn config(name: &str, sysctl: &str) -> Value {
    json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
        "metadata": {"name": name, "namespace": "fleet",
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "pool-1", "uid": "p", "controller": true}]},
        "spec": {"files": [{"path": "/etc/sysctl.d/90-fleet.conf", "content": sysctl}]},
        "status": {"dataSecretName": name}})
}

fn manifest(name: &str, sysctl: &str) -> String {
    format!("apiVersion: bootstrap.cluster.x-k8s.io/v1beta2\nkind: KubeadmConfig\nmetadata:\n  name: {name}\n  namespace: fleet\nspec:\n  files:\n    - path: /etc/sysctl.d/90-fleet.conf\n      content: {sysctl:?}\n")
}

fn fleet() -> Fake {
    let mut fake = Fake::with(&[
        (POOLS, pool(json!({}))),
        (CONFIGS, config("pool-1-a", "a\n")),
    ]);
    fake.capi_copies = true;
    fake
}

fn request(consumer: &str, text: String, dry_run: DryRun) -> Request<'_> {
    Request {
        consumer,
        namespace: Some("fleet"),
        edited: Edited::Manifest {
            text,
            source: "edited.yaml".into(),
        },
        dry_run,
        timeout: Duration::from_secs(5),
        replace_instances: false,
        wait: false,
        interrupted: &|| false,
    }
}

fn run(fake: &Fake, request: &Request) -> (Result<Done, RotateError>, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = rotate(fake, &Settings::default(), request, &mut out, &mut err);
    (
        result,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// The rotation of pool-1's config to the content "b\n", as the person asks for it.
fn rotate_b(fake: &Fake) -> (Result<Done, RotateError>, String, String) {
    run(
        fake,
        &request(
            "machinepool/pool-1",
            manifest("pool-1-a", "b\n"),
            DryRun::None,
        ),
    )
}

/// The name the policy suggests for pool-1-a with content "b\n".
fn suggested() -> String {
    let current = config("pool-1-a", "a\n");
    let edited = one_object(&manifest("pool-1-a", "b\n"), "x").unwrap();
    plan::plan(&Settings::default(), &[&pool(json!({}))], &current, &edited)
        .unwrap()
        .new
        .name
}

#[test]
fn a_rotation_creates_repoints_and_waits() {
    let fake = fleet();
    let (result, out, err) = rotate_b(&fake);
    let name = suggested();
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    assert_eq!(
        *fake.writes.borrow(),
        vec![
            format!("create {name} None"),
            format!("patch pool-1 {name} None")
        ]
    );
    let created = fake.object(CONFIGS, &name).unwrap();
    assert_eq!(created["spec"]["files"][0]["content"], json!("b\n"));
    assert!(created["metadata"].get("ownerReferences").is_none());
    for line in [
        "MachinePool fleet/pool-1 uses KubeadmConfig pool-1-a; the edit changes:\n  spec.files[0].content (changed)\n".to_string(),
        format!("created KubeadmConfig fleet/{name}\n"),
        format!("MachinePool fleet/pool-1: configRef.name pool-1-a -> {name}\n"),
        format!("MachinePool fleet/pool-1: CAPI copied dataSecretName {name} into the pool"),
        "left: KubeadmConfig fleet/pool-1-a, rotated out; delete it once the roll-out is done:\n  kubectl delete kubeadmconfigs.bootstrap.cluster.x-k8s.io pool-1-a -n fleet\n".to_string(),
    ] {
        assert!(out.contains(&line), "missing {line:?} in\n{out}");
    }
    assert_eq!(err, "Warning: a warning of the policy\n");
}

#[test]
fn not_taken_up_in_time() {
    let mut fake = fleet();
    fake.capi_copies = false;
    let (result, out, _) = run(
        &fake,
        &request("mp/pool-1", manifest("pool-1-a", "b\n"), DryRun::None),
    );
    assert_eq!(result.unwrap(), Done::NotYetRolled);
    assert!(out.contains("CAPI has not copied"), "{out}");
}

#[rstest]
#[case::client(DryRun::Client, &[])]
#[case::server(DryRun::Server, &["create NAME Server", "patch pool-1 NAME Server"])]
fn dry_runs(#[case] dry_run: DryRun, #[case] writes: &[&str]) {
    let fake = fleet();
    let (result, out, _) = run(
        &fake,
        &request("machinepool/pool-1", manifest("pool-1-a", "b\n"), dry_run),
    );
    assert_eq!(result.unwrap(), Done::DryRun, "{out}");
    let name = suggested();
    let expected: Vec<String> = writes.iter().map(|w| w.replace("NAME", &name)).collect();
    assert_eq!(*fake.writes.borrow(), expected);
    assert!(fake.object(CONFIGS, &name).is_none());
    assert_eq!(fake.object(POOLS, "pool-1").unwrap(), pool(json!({})));
}

#[test]
fn a_re_run_uses_the_config_it_created() {
    let fake = fleet();
    let name = suggested();
    let mut existing = one_object(&manifest(&name, "b\n"), "x").unwrap();
    existing["status"] = json!({"dataSecretName": name});
    fake.put(CONFIGS, existing);
    let (result, out, _) = rotate_b(&fake);
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    assert_eq!(
        *fake.writes.borrow(),
        vec![format!("patch pool-1 {name} None")]
    );
    assert!(out.contains("exists with this spec already"), "{out}");
}

#[test]
fn a_refused_repoint_takes_the_new_config_back() {
    let mut fake = fleet();
    fake.refuse_patch = true;
    let (result, _, _) = rotate_b(&fake);
    let name = suggested();
    let message = result.unwrap_err().to_string();
    assert!(message.starts_with("MachinePool fleet/pool-1 was not repointed: kubectl patch: admission webhook denied the request"), "{message}");
    assert!(
        message.ends_with(&format!("the new KubeadmConfig {name} was deleted again")),
        "{message}"
    );
    assert!(fake.object(CONFIGS, &name).is_none());
}

/// Each bad input: the message, the exit code, and no write.
#[rstest]
#[case::no_such_pool(Fake::with(&[]), "machinepool/pool-9", "b", 2, "MachinePool pool-9 not found in namespace fleet")]
#[case::bad_type(
    fleet(),
    "deployment/pool-1",
    "b",
    2,
    "\"deployment/pool-1\": name the MachinePool as machinepool/NAME"
)]
#[case::being_deleted(Fake::with(&[(POOLS, pool(json!({"deletionTimestamp": "2026-12-02T00:00:00Z"}))), (CONFIGS, config("pool-1-a", "a\n"))]),
    "machinepool/pool-1", "b", 2, "MachinePool fleet/pool-1 is being deleted")]
#[case::topology(Fake::with(&[(POOLS, pool(json!({"labels": {"topology.cluster.x-k8s.io/owned": ""}}))), (CONFIGS, config("pool-1-a", "a\n"))]),
    "machinepool/pool-1", "b", 2, "MachinePool fleet/pool-1 is managed by Cluster c1's topology")]
#[case::config_missing(Fake::with(&[(POOLS, pool(json!({})))]), "machinepool/pool-1", "b", 2,
    "MachinePool fleet/pool-1 uses KubeadmConfig pool-1-a, which does not exist in namespace fleet")]
#[case::nothing_changes(
    fleet(),
    "machinepool/pool-1",
    "a",
    1,
    "nothing to rotate: the edited spec of KubeadmConfig fleet/pool-1-a is the one it has"
)]
#[case::no_create_rbac(Fake { denied: vec![("create", CONFIGS)], ..fleet() }, "machinepool/pool-1", "b", 2,
    "RBAC: you may not create kubeadmconfigs.bootstrap.cluster.x-k8s.io in namespace fleet; nothing was changed")]
#[case::no_patch_rbac(Fake { denied: vec![("patch", POOLS)], ..fleet() }, "machinepool/pool-1", "b", 2,
    "RBAC: you may not patch machinepools.cluster.x-k8s.io in namespace fleet; nothing was changed")]
#[case::no_get_rbac(Fake { denied: vec![("get", POOLS)], ..fleet() }, "machinepool/pool-1", "b", 2,
    "RBAC: you may not get machinepools.cluster.x-k8s.io in namespace fleet")]
fn bad_input_changes_nothing(
    #[case] fake: Fake,
    #[case] consumer: &str,
    #[case] content: &str,
    #[case] code: u8,
    #[case] message: &str,
) {
    let before = fake.objects.borrow().clone();
    let (result, _, _) = run(
        &fake,
        &request(
            consumer,
            manifest("pool-1-a", &format!("{content}\n")),
            DryRun::None,
        ),
    );
    let e = result.unwrap_err();
    assert!(e.to_string().starts_with(message), "{e}");
    assert_eq!(e.exit_code(), code);
    assert!(
        fake.writes.borrow().is_empty(),
        "{:?}",
        fake.writes.borrow()
    );
    assert_eq!(*fake.objects.borrow(), before);
}

#[test]
fn a_config_that_is_not_the_current_one() {
    let fake = fleet();
    fake.put(CONFIGS, config("pool-1-old", "a\n"));
    let (result, _, _) = run(
        &fake,
        &request(
            "machinepool/pool-1",
            manifest("pool-1-old", "b\n"),
            DryRun::None,
        ),
    );
    let e = result.unwrap_err().to_string();
    assert!(
        e.starts_with(
            "MachinePool fleet/pool-1 uses KubeadmConfig pool-1-a, not KubeadmConfig pool-1-old"
        ),
        "{e}"
    );
    assert!(fake.writes.borrow().is_empty());
}

#[test]
fn a_name_taken_by_another_spec() {
    let fake = fleet();
    let name = suggested();
    fake.put(CONFIGS, config(&name, "someone else's\n"));
    let (result, _, _) = rotate_b(&fake);
    let e = result.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "KubeadmConfig fleet/{name} already exists with another spec: nothing was changed"
        )),
        "{e}"
    );
    assert!(fake.writes.borrow().is_empty());
}

#[rstest]
#[case::unchanged(false, Err("nothing to rotate: "))]
#[case::edited(true, Ok(()))]
fn the_editor(#[case] edit: bool, #[case] expected: Result<(), &str>) {
    let fake = fleet();
    let editor: Box<EditorFn> = Box::new(move |text: &str| {
        assert!(
            text.starts_with("# Edit the spec of KubeadmConfig fleet/pool-1-a"),
            "{text}"
        );
        assert!(
            !text.contains("ownerReferences") && !text.contains("status"),
            "{text}"
        );
        Ok(if edit {
            text.replace("content: |\n      a", "content: |\n      b")
        } else {
            text.to_string()
        })
    });
    let request = Request {
        consumer: "machinepool/pool-1",
        namespace: Some("fleet"),
        edited: Edited::Editor(editor),
        dry_run: DryRun::None,
        timeout: Duration::ZERO,
        replace_instances: false,
        wait: false,
        interrupted: &|| false,
    };
    let (result, out, _) = run(&fake, &request);
    match expected {
        Ok(()) => {
            assert_eq!(result.unwrap(), Done::Rotated, "{out}");
            assert!(
                fake.object(CONFIGS, &suggested()).is_some(),
                "{:?}",
                fake.writes.borrow()
            );
        }
        Err(prefix) => {
            assert!(result.unwrap_err().to_string().starts_with(prefix));
            assert!(fake.writes.borrow().is_empty());
        }
    }
}

const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// fleet() with pool-1 of 2 replicas on `kind` (its object's spec `spec`), and `machines`
/// (MachinePool Machines launched at 02:10, 02:11: before any data Secret the rotation makes).
fn fleet_on(kind: &str, spec: Value, machines: &[&str]) -> Fake {
    let fake = fleet();
    let mut p = pool(json!({}));
    p["spec"]["replicas"] = json!(2);
    p["spec"]["template"]["spec"]["infrastructureRef"] =
        json!({"apiGroup": INFRA_GROUP, "kind": kind, "name": "pool-1"});
    fake.put(POOLS, p);
    fake.put(
        &resource_of(kind, INFRA_GROUP, None),
        json!({"apiVersion": format!("{INFRA_GROUP}/v1beta2"), "kind": kind,
               "metadata": {"name": "pool-1", "namespace": "fleet"}, "spec": spec}),
    );
    for (i, m) in machines.iter().enumerate() {
        let created = format!("2026-12-06T02:1{i}:00Z");
        fake.put(
            crate::fake::MACHINES,
            crate::fake::machine("pool-1", m, &created, true),
        );
    }
    fake
}

fn replacement_line(kind: &str) -> String {
    use capi_bootstrap_rollout_policy::capi::infrastructure::{infrastructure, Replacement};
    match infrastructure(INFRA_GROUP, kind).unwrap().replacement {
        Replacement::DeleteMachinePoolMachines { .. } => {
            "replace them: capi-rollout-check roll machinepool/pool-1 -n fleet".to_string()
        }
        Replacement::Manual { instructions } => format!("replace them by hand: {instructions}"),
        other => panic!("{kind}: {other:?}"),
    }
}

const KEEP_2: &str =
    "2 existing instances keep the old bootstrap data; new instances take the new data";
const BY_REPLICAS: &str = " (counted from spec.replicas: no MachinePool Machines)";

/// What rotate says, once CAPI copied the new dataSecretName, per infrastructure kind: the
/// exact lines between that one and "left:".
#[rstest]
#[case::capz("AzureMachinePool", json!({}), &["m-a", "m-b"],
    format!("AzureMachinePool fleet/pool-1 (CAPZ) replaces no existing instance on a rotation: {KEEP_2}\n{}\n", replacement_line("AzureMachinePool")))]
#[case::capd("DockerMachinePool", json!({}), &["m-a", "m-b"],
    format!("DockerMachinePool fleet/pool-1 (CAPD) replaces no existing instance on a rotation: {KEEP_2}\n{}\n", replacement_line("DockerMachinePool")))]
#[case::capd_one("DockerMachinePool", json!({}), &["m-a"],
    format!("DockerMachinePool fleet/pool-1 (CAPD) replaces no existing instance on a rotation: 1 existing instance keeps the old bootstrap data; new instances take the new data\n{}\n", replacement_line("DockerMachinePool")))]
#[case::capoci("OCIMachinePool", json!({}), &[],
    format!("OCIMachinePool fleet/pool-1 (CAPOCI) replaces no existing instance on a rotation: {KEEP_2}{BY_REPLICAS}\n{}\n", replacement_line("OCIMachinePool")))]
#[case::capg("GCPMachinePool", json!({}), &[],
    format!("GCPMachinePool fleet/pool-1 (CAPG) replaces no existing instance on a rotation (inferred from Google's API reference): {KEEP_2}{BY_REPLICAS}\n{}\n", replacement_line("GCPMachinePool")))]
#[case::capa_refresh_off("AWSMachinePool", json!({"refreshPreferences": {"disable": true}}), &[],
    format!("AWSMachinePool fleet/pool-1 (CAPA) replaces no existing instance (spec.refreshPreferences.disable is true): {KEEP_2}{BY_REPLICAS}\n\
replace them by hand: start an instance refresh of its Auto Scaling group (aws autoscaling start-instance-refresh --auto-scaling-group-name pool-1), or unset spec.refreshPreferences.disable before the next rotation\n"))]
#[case::eks_launch_template("AWSManagedMachinePool", json!({"awsLaunchTemplate": {"name": "lt"}}), &[],
    "AWSManagedMachinePool fleet/pool-1 (CAPA) replaces the existing instances: an EKS managed node group update\n".to_string())]
#[case::eks_without_launch_template("AWSManagedMachinePool", json!({}), &[],
    "AWSManagedMachinePool fleet/pool-1 (CAPA) reads bootstrap data only with spec.awsLaunchTemplate, which is not set: the rotation changes no instance\n".to_string())]
#[case::aks("AzureManagedMachinePool", json!({}), &[],
    "AzureManagedMachinePool fleet/pool-1 (CAPZ) never reads bootstrap data: the rotation changes no instance\n".to_string())]
#[case::unknown("ExampleMachinePool", json!({}), &["m-a"],
    "ExampleMachinePool fleet/pool-1: capi-rollout-check does not know this infrastructure kind (infrastructure.cluster.x-k8s.io): it cannot tell whether existing instances are replaced; new instances take the new data\n".to_string())]
fn what_comes_after_the_rotation(
    #[case] kind: &str,
    #[case] spec: Value,
    #[case] machines: &[&str],
    #[case] report: String,
) {
    let fake = fleet_on(kind, spec, machines);
    let (result, out, _) = rotate_b(&fake);
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    let name = suggested();
    let expected = format!(
        "MachinePool fleet/pool-1: CAPI copied dataSecretName {name} into the pool\n{report}left: KubeadmConfig fleet/pool-1-a, rotated out"
    );
    assert!(out.contains(&expected), "want\n{expected}\nin\n{out}");
    assert_eq!(fake.writes.borrow().len(), 2, "{:?}", fake.writes.borrow());
}

#[test]
fn no_instance_predates_the_new_data() {
    let fake = fleet_on("AzureMachinePool", json!({}), &[]);
    fake.put(
        crate::fake::MACHINES,
        crate::fake::machine("pool-1", "m-late", "2026-12-06T04:00:00Z", true),
    );
    let (result, out, _) = rotate_b(&fake);
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    assert!(out.contains("into the pool\nAzureMachinePool fleet/pool-1 (CAPZ) replaces no existing instance on a rotation: no existing instance predates the new data\nleft: "), "{out}");
}

#[test]
fn a_pool_without_an_infrastructure_ref() {
    let fake = fleet();
    let (_, out, _) = rotate_b(&fake);
    assert!(out.contains("into the pool\nMachinePool fleet/pool-1 has no spec.template.spec.infrastructureRef: capi-rollout-check cannot tell whether existing instances are replaced; new instances take the new data\nleft: "), "{out}");
}

/// An AWSMachinePool with these instances and CAPA's refresh condition (status, message, and
/// when it changed: the rotation's config is created at 03:00:01).
fn aws_pool(ids: &[&str], condition: Option<(&str, &str, &str)>) -> Value {
    let mut object = json!({"apiVersion": format!("{INFRA_GROUP}/v1beta2"), "kind": "AWSMachinePool",
        "metadata": {"name": "pool-1", "namespace": "fleet"},
        "spec": {"providerIDList": ids.iter().map(|i| format!("aws:///us-east-1a/{i}")).collect::<Vec<_>>()}});
    if let Some((status, message, at)) = condition {
        object["status"] = json!({"conditions": [{"type": "PostLaunchTemplateUpdateOperationSuccess",
            "status": status, "message": message, "lastTransitionTime": at}]});
    }
    object
}

const NOW: &str = "2026-12-06T03:00:05Z";
const BEFORE: &str = "2026-12-06T02:00:00Z";

const REFRESH: &str = "AWSMachinePool fleet/pool-1 (CAPA) replaces the existing instances: an instance refresh (spec.refreshPreferences.disable: true turns it off)\n";

/// CAPA's instance refresh, followed through the AWSMachinePool as CAPA updates it.
#[rstest]
#[case::done(vec![aws_pool(&["i-1", "i-2"], None), aws_pool(&["i-1", "i-2", "i-3"], Some(("True", "", NOW))), aws_pool(&["i-3", "i-4"], Some(("True", "", NOW)))],
    Done::Rotated, format!("{REFRESH}AWSMachinePool fleet/pool-1: instance refresh in progress\nAWSMachinePool fleet/pool-1: instance refresh done: none of the 2 instances it had before is left\n"))]
#[case::not_started(vec![aws_pool(&["i-1", "i-2"], None), aws_pool(&["i-1", "i-2"], Some(("False", "AccessDenied: autoscaling:StartInstanceRefresh", NOW)))],
    Done::NotYetRolled, format!("{REFRESH}AWSMachinePool fleet/pool-1: CAPA could not start the instance refresh (PostLaunchTemplateUpdateOperationSuccess False): AccessDenied: autoscaling:StartInstanceRefresh\n"))]
#[case::a_failure_left_by_an_earlier_rotation_is_not_this_ones(vec![aws_pool(&["i-1", "i-2"], Some(("False", "AccessDenied", BEFORE)))],
    Done::NotYetRolled, format!("{REFRESH}AWSMachinePool fleet/pool-1: the instance refresh has not ended within 5s (0 of 2 instances replaced); CAPA goes on with it (aws autoscaling describe-instance-refreshes --auto-scaling-group-name pool-1)\n\
AWSMachinePool fleet/pool-1: PostLaunchTemplateUpdateOperationSuccess is False since 2026-12-06T02:00:00Z, before this rotation (2026-12-06T03:00:01Z): CAPA has not reported on this rotation's refresh\n"))]
#[case::a_success_left_by_an_earlier_rotation_is_not_progress(vec![aws_pool(&["i-1", "i-2"], Some(("True", "", BEFORE))), aws_pool(&["i-3", "i-4"], Some(("True", "", BEFORE)))],
    Done::Rotated, format!("{REFRESH}AWSMachinePool fleet/pool-1: instance refresh done: none of the 2 instances it had before is left\n"))]
#[case::a_condition_without_its_time_is_not_counted(vec![aws_pool(&["i-1", "i-2"], Some(("False", "AccessDenied", "")))],
    Done::NotYetRolled, format!("{REFRESH}AWSMachinePool fleet/pool-1: the instance refresh has not ended within 5s (0 of 2 instances replaced); CAPA goes on with it (aws autoscaling describe-instance-refreshes --auto-scaling-group-name pool-1)\n\
AWSMachinePool fleet/pool-1: PostLaunchTemplateUpdateOperationSuccess is False since , before this rotation (2026-12-06T03:00:01Z): CAPA has not reported on this rotation's refresh\n"))]
#[case::not_ended(vec![aws_pool(&["i-1", "i-2"], None), aws_pool(&["i-1", "i-3"], Some(("True", "", NOW)))],
    Done::NotYetRolled, format!("{REFRESH}AWSMachinePool fleet/pool-1: instance refresh in progress\nAWSMachinePool fleet/pool-1: the instance refresh has not ended within 5s (1 of 2 instances replaced); CAPA goes on with it (aws autoscaling describe-instance-refreshes --auto-scaling-group-name pool-1)\n"))]
fn the_instance_refresh(#[case] versions: Vec<Value>, #[case] done: Done, #[case] report: String) {
    let fake = fleet_on("AWSMachinePool", json!({}), &[]);
    fake.versions.borrow_mut().insert(
        "awsmachinepools.infrastructure.cluster.x-k8s.io".into(),
        versions,
    );
    let (result, out, _) = rotate_b(&fake);
    assert_eq!(result.unwrap(), done, "{out}");
    assert!(
        out.contains(&format!("into the pool\n{report}left: ")),
        "want\n{report}\nin\n{out}"
    );
}

#[test]
fn replace_instances_rolls_after_the_rotation() {
    let mut fake = fleet_on("AzureMachinePool", json!({}), &["m-a", "m-b"]);
    fake.scales_back = true;
    let mut request = request(
        "machinepool/pool-1",
        manifest("pool-1-a", "b\n"),
        DryRun::None,
    );
    request.replace_instances = true;
    let (result, out, _) = run(&fake, &request);
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    let name = suggested();
    assert_eq!(
        *fake.writes.borrow(),
        [
            format!("create {name} None"),
            format!("patch pool-1 {name} None"),
            "delete m-a".into(),
            "delete m-b".into()
        ]
    );
    assert!(!out.contains("replace them:"), "{out}");
    assert!(out.contains(&format!("AzureMachinePool fleet/pool-1 (CAPZ) replaces no existing instance on a rotation: {KEEP_2}\nMachinePool fleet/pool-1: infrastructure AzureMachinePool fleet/pool-1 (CAPZ); data Secret {name}, created 2026-12-06T03:00:01Z\n")), "{out}");
    assert!(out.contains(&format!("MachinePool fleet/pool-1: done: 2 Machines replaced; every Machine was launched after data Secret {name}\nleft: ")), "{out}");
    assert_eq!(*fake.ready_after_delete.borrow(), [1, 1]);
}

#[test]
fn replace_instances_checks_rbac_before_the_rotation() {
    let fake = Fake {
        denied: vec![("delete", crate::fake::MACHINES)],
        ..fleet_on("AzureMachinePool", json!({}), &["m-a", "m-b"])
    };
    let mut request = request(
        "machinepool/pool-1",
        manifest("pool-1-a", "b\n"),
        DryRun::None,
    );
    request.replace_instances = true;
    let (result, _, _) = run(&fake, &request);
    let e = result.unwrap_err();
    assert_eq!(e.to_string(), "RBAC: you may not delete machines.cluster.x-k8s.io in namespace fleet; nothing was changed (kubectl auth can-i delete machines.cluster.x-k8s.io -n fleet: no)");
    assert_eq!(e.exit_code(), EXIT_ERROR);
    assert!(fake.writes.borrow().is_empty());
}

#[test]
fn replace_instances_stopped_after_the_rotation() {
    let fake = fleet_on("AzureMachinePool", json!({}), &["m-a", "m-b"]);
    let mut request = request(
        "machinepool/pool-1",
        manifest("pool-1-a", "b\n"),
        DryRun::None,
    );
    request.replace_instances = true;
    // The provider launches no replacement: the first step times out.
    let (result, out, _) = run(&fake, &request);
    let e = result.unwrap_err();
    assert!(e.to_string().starts_with("the rotation is in place; replacing the instances stopped: timed out after 5s waiting for the replacement of m-a: 1 Machine deleted so far; roll kept at least 1 Ready by its own deletes; re-run the same command to go on: capi-rollout-check roll machinepool/pool-1 -n fleet"), "{e}\n{out}");
    assert_eq!(e.exit_code(), 3);
    assert_eq!(fake.writes.borrow().len(), 3, "{:?}", fake.writes.borrow());
}

/// An infrastructure object the person may not read: what each case would mean, never a guess.
#[rstest]
#[case::capa("AWSMachinePool",
    "AWSMachinePool fleet/pool-1 (CAPA): cannot read it (RBAC: forbidden; it needs: kubectl auth can-i get awsmachinepools.infrastructure.cluster.x-k8s.io -n fleet), so capi-rollout-check cannot tell what happens to the existing instances: unless spec.refreshPreferences.disable is true, CAPA replaces the existing instances on a rotation (an instance refresh); with it true, none is replaced\n")]
#[case::eks("AWSManagedMachinePool",
    "AWSManagedMachinePool fleet/pool-1 (CAPA): cannot read it (RBAC: forbidden; it needs: kubectl auth can-i get awsmanagedmachinepools.infrastructure.cluster.x-k8s.io -n fleet), so capi-rollout-check cannot tell what happens to the existing instances: if it has spec.awsLaunchTemplate, CAPA replaces every instance on a rotation (an EKS managed node group update); if not, it never reads bootstrap data and a rotation changes no instance\n")]
fn an_infrastructure_object_it_cannot_read(#[case] kind: &'static str, #[case] line: &str) {
    let resource = format!("{}s.infrastructure.cluster.x-k8s.io", kind.to_lowercase());
    let fake = Fake {
        denied: vec![("get", Box::leak(resource.into_boxed_str()))],
        ..fleet_on(kind, json!({"awsLaunchTemplate": {"name": "lt"}}), &[])
    };
    let (result, out, _) = rotate_b(&fake);
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    assert!(
        out.contains(&format!("into the pool\n{line}left: ")),
        "{out}"
    );
}

#[rstest]
#[case::no_instances(None, json!({"providerIDList": []}),
    "AWSMachinePool fleet/pool-1: instance refresh: no instance listed in spec.providerIDList to replace\n")]
fn an_instance_refresh_not_followed(
    #[case] denied: Option<(&'static str, &'static str)>,
    #[case] spec: Value,
    #[case] line: &str,
) {
    let fake = Fake {
        denied: denied.into_iter().collect(),
        ..fleet_on("AWSMachinePool", spec, &[])
    };
    let (result, out, _) = rotate_b(&fake);
    assert_eq!(result.unwrap(), Done::Rotated, "{out}");
    assert!(
        out.contains(&format!("into the pool\n{REFRESH}{line}left: ")),
        "{out}"
    );
}
