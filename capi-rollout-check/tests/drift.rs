//! `capi-rollout-check drift` as a person runs it, against a fake kubectl that answers each
//! list from a file: the exit codes (0 nothing stale, 1 something stale, 2 an error), the
//! table, the JSON, and the flags handed on to kubectl.

#![cfg(unix)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

mod common;
use common::Run;

const NOW: &str = "2026-12-06T05:00:00Z";

/// A pool `name` on CAPD whose data Secret was created at `secret` (its config at the same
/// time, never edited), with Machines launched at `machines`.
fn pool(name: &str, secret: &str, machines: &[&str]) -> Vec<(&'static str, Value)> {
    let config = format!("{name}-a");
    let mut objects = vec![
        (
            "machinepools",
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                "metadata": {"name": name, "namespace": "fleet", "creationTimestamp": "2026-12-06T00:00:00Z"},
                "spec": {"template": {"spec": {
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": config},
                                  "dataSecretName": config},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool", "name": name}}}},
                "status": {"replicas": machines.len(), "nodeRefs": [{"name": "n"}]}}),
        ),
        (
            "kubeadmconfigs",
            json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                "metadata": {"name": config, "namespace": "fleet", "creationTimestamp": secret,
                    "managedFields": [{"manager": "kubectl-create", "operation": "Update", "time": secret,
                                       "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:files": {}}}}]},
                "spec": {"joinConfiguration": {"discovery": {"bootstrapToken": {}}}},
                "status": {"dataSecretName": config}}),
        ),
        (
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": config, "namespace": "fleet", "creationTimestamp": secret,
                    "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                    "managedFields": [{"manager": "manager", "operation": "Update", "time": "2026-12-06T04:55:00Z",
                                       "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]}}),
        ),
        (
            "dockermachinepools",
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachinePool",
                "metadata": {"name": name, "namespace": "fleet"}}),
        ),
    ];
    for (n, launched) in machines.iter().enumerate() {
        objects.push((
            "machines",
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": format!("{name}-m{n}"), "namespace": "fleet", "creationTimestamp": launched,
                             "labels": {"cluster.x-k8s.io/pool-name": name}}}),
        ));
    }
    objects
}

/// A directory holding `kubectl` (a script) and one `<plural>.json` list per kind; `fail`: the
/// kind whose list kubectl refuses.
fn fake_kubectl(case: &str, objects: &[(&str, Value)], fail: Option<&str>) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("drift-{case}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let mut lists: std::collections::BTreeMap<&str, Vec<Value>> = Default::default();
    for (plural, object) in objects {
        lists.entry(plural).or_default().push(object.clone());
    }
    for (plural, items) in lists {
        fs::write(
            dir.join(format!("{plural}.json")),
            json!({"items": items}).to_string(),
        )
        .unwrap();
    }
    let refuse = fail.map_or(String::new(), |kind| {
        format!(
            "  {kind}) echo 'Error from server (Forbidden): {kind} is forbidden' >&2; exit 1 ;;\n"
        )
    });
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> {dir}/calls\nwhile [ \"$1\" != get ]; do shift; done\nplural=${{2%%.*}}\n\
         case \"$plural\" in\n{refuse}esac\n\
         if [ -f {dir}/$plural.json ]; then cat {dir}/$plural.json; else echo '{{\"items\": []}}'; fi\n",
        dir = dir.display()
    );
    let path = dir.join("kubectl");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn drift(dir: &Path, args: &[&str]) -> Run {
    let kubectl = dir.join("kubectl").display().to_string();
    let mut all = vec!["drift", "--kubectl", &kubectl, "--now", NOW];
    all.extend(args);
    common::run(&all, None)
}

#[test]
fn nothing_stale_exits_0() {
    let dir = fake_kubectl(
        "clean",
        &pool("pool-1", "2026-12-06T00:01:00Z", &["2026-12-06T00:02:00Z"]),
        None,
    );
    let run = drift(&dir, &["-n", "fleet"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .ends_with("1 object (1 MachinePool): 1 current, 0 stale, 0 unknown\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_stale_pool_exits_1_and_names_the_roll() {
    let mut objects = pool(
        "pool-1",
        "2026-12-06T03:00:00Z",
        &["2026-12-06T00:02:00Z", "2026-12-06T03:05:00Z"],
    );
    objects.extend(pool(
        "pool-2",
        "2026-12-06T00:01:00Z",
        &["2026-12-06T00:02:00Z"],
    ));
    let dir = fake_kubectl("stale", &objects, None);
    let run = drift(&dir, &["-n", "fleet", "--context", "prod"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("pool-1-m0 launched 2026-12-06T00:02:00Z (launched-before-data-secret)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("    capi-rollout-check roll machinepool/pool-1 -n fleet --context prod\n"),
        "{}",
        run.stdout
    );
    // One list per kind, with the person's context.
    let calls = fs::read_to_string(dir.join("calls")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            "--context prod get machinepools.cluster.x-k8s.io -n fleet -o json",
            "--context prod get machinedeployments.cluster.x-k8s.io -n fleet -o json",
            "--context prod get machinesets.cluster.x-k8s.io -n fleet -o json",
            "--context prod get machines.cluster.x-k8s.io -n fleet -l cluster.x-k8s.io/pool-name -o json",
            "--context prod get kubeadmconfigs.bootstrap.cluster.x-k8s.io -n fleet --show-managed-fields -o json",
            "--context prod get secrets -n fleet -l cluster.x-k8s.io/cluster-name --show-managed-fields -o json",
            "--context prod get dockermachinepools.infrastructure.cluster.x-k8s.io -n fleet -o json",
        ]
    );
    let json = drift(&dir, &["machinepool/pool-1", "-n", "fleet", "-o", "json"]);
    assert_eq!(json.code, 1);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["schema"], "capi-rollout-check.drift/v2");
    assert_eq!(
        report["summary"],
        json!({"objects": 1, "current": 0, "stale": 1, "unknown": 0,
               "kinds": {"MachinePool": 1, "MachineDeployment": 0, "MachineSet": 0}})
    );
    assert_eq!(report["items"][0]["instances"]["staleCount"], 1);
}

#[test]
fn a_kubectl_error_exits_2() {
    let dir = fake_kubectl(
        "forbidden",
        &pool("pool-1", "2026-12-06T00:01:00Z", &[]),
        Some("secrets"),
    );
    let run = drift(&dir, &["-n", "fleet"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stderr,
        "capi-rollout-check drift: listing secrets: Error from server (Forbidden): secrets is forbidden\n"
    );
    assert_eq!(run.stdout, "");
}

#[test]
fn a_missing_pool_exits_2() {
    let dir = fake_kubectl(
        "missing",
        &pool("pool-1", "2026-12-06T00:01:00Z", &[]),
        None,
    );
    let run = drift(&dir, &["machinepool/pool-9", "-n", "fleet"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "capi-rollout-check drift: MachinePool pool-9 not found in fleet\n"
    );
}

/// The console block of docs/drift.md that starts with `$ {command}`: the command's output as
/// the page shows it.
fn documented_output(command: &str) -> String {
    let page =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/drift.md")).unwrap();
    let start = page
        .find(&format!("$ {command}\n"))
        .unwrap_or_else(|| panic!("docs/drift.md shows no `$ {command}`"));
    let block = &page[start + command.len() + 3..];
    let end = block
        .find("\n$ ")
        .into_iter()
        .chain(block.find("\n```"))
        .min()
        .unwrap();
    format!("{}\n", &block[..end])
}

/// docs/drift.md's sample output is what the command prints for the objects of
/// tests/fixtures/drift/sample.json (five pools and a MachineDeployment, at
/// 2026-12-06T02:40:00Z).
#[test]
fn the_documented_sample_is_what_the_command_prints() {
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/drift/sample.json"),
    )
    .unwrap();
    let world: Vec<Value> = serde_json::from_str(&text).unwrap();
    let plurals: Vec<String> = world
        .iter()
        .map(|o| format!("{}s", o["kind"].as_str().unwrap().to_lowercase()))
        .collect();
    let objects: Vec<(&str, Value)> = plurals
        .iter()
        .map(String::as_str)
        .zip(world.iter().cloned())
        .collect();
    let dir = fake_kubectl("sample", &objects, None);
    let kubectl = dir.join("kubectl").display().to_string();
    let at = [
        "--kubectl",
        kubectl.as_str(),
        "--now",
        "2026-12-06T02:40:00Z",
    ];
    let table = common::run(&[&["drift", "-n", "fleet"][..], &at].concat(), None);
    assert_eq!(table.code, 1);
    assert_eq!(
        table.stdout,
        documented_output("capi-rollout-check drift -n fleet")
    );
    let json = common::run(
        &[
            &["drift", "machinepool/pool-2", "-n", "fleet", "-o", "json"][..],
            &at,
        ]
        .concat(),
        None,
    );
    assert_eq!(json.code, 1);
    assert_eq!(
        json.stdout,
        documented_output("capi-rollout-check drift machinepool/pool-2 -n fleet -o json")
    );
}

/// deploy/drift-reports.yaml: its ClusterRole grants the list of every kind drift lists for the
/// sample fleet and nothing else but the Reports' writes, and its CronJob runs the command that
/// writes them.
#[test]
fn the_cronjobs_rbac_covers_what_drift_reads_and_writes_only_reports() {
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/drift-reports.yaml"))
            .unwrap();
    let docs: Vec<Value> = text
        .split("\n---\n")
        .map(|d| yaml_serde::from_str(d).unwrap())
        .collect();
    let role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let mut granted: Vec<(String, String)> = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let verbs: Vec<&str> = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                let (group, resource) = (group.as_str().unwrap(), resource.as_str().unwrap());
                if group == "openreports.io" {
                    assert_eq!(verbs, ["get", "list", "create", "patch", "delete"]);
                } else {
                    assert_eq!(verbs, ["list"], "{group}/{resource} is read-only");
                }
                granted.push((resource.to_string(), group.to_string()));
            }
        }
    }
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/drift/sample.json"),
    )
    .unwrap();
    let world: Vec<Value> = serde_json::from_str(&text).unwrap();
    let objects: Vec<(String, Value)> = world
        .iter()
        .map(|o| {
            (
                format!("{}s", o["kind"].as_str().unwrap().to_lowercase()),
                o.clone(),
            )
        })
        .collect();
    let objects: Vec<(&str, Value)> = objects
        .iter()
        .map(|(p, o)| (p.as_str(), o.clone()))
        .collect();
    let dir = fake_kubectl("cronjob-rbac", &objects, None);
    let run = drift(&dir, &["-A"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    for call in fs::read_to_string(dir.join("calls")).unwrap().lines() {
        let resource = call.split_whitespace().nth(1).unwrap();
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        assert!(
            granted.contains(&(plural.to_string(), group.to_string())),
            "drift lists {resource}, which the ClusterRole does not grant"
        );
    }
    let cronjob = docs.iter().find(|d| d["kind"] == "CronJob").unwrap();
    let container = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["args"],
        json!(["drift", "-A", "-o", "report", "--apply"])
    );
}
