//! The cluster flow against a cluster held in memory: each refusal changes nothing, and a
//! rotation writes exactly the new config and the consumer's ref.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use rstest::rstest;
use serde_json::{json, Value};

use super::cluster::{Cluster, ClusterError, DryRun, Written};
use super::*;

/// Objects by (resource without version, namespace, name); the writes it was asked for.
#[derive(Default)]
struct Fake {
    objects: RefCell<BTreeMap<(String, String, String), Value>>,
    denied: Vec<(&'static str, &'static str)>,
    writes: RefCell<Vec<String>>,
    /// What CAPI does once the pool is repointed: copy the new config's data secret name.
    capi_copies: bool,
    refuse_patch: bool,
}

/// `kubeadmconfigs.v1beta2.bootstrap.cluster.x-k8s.io` -> `kubeadmconfigs.bootstrap.cluster.x-k8s.io`.
fn unversioned(resource: &str) -> String {
    let parts: Vec<&str> = resource.split('.').collect();
    if parts.len() > 2
        && parts[1].starts_with('v')
        && parts[1][1..].starts_with(|c: char| c.is_ascii_digit())
    {
        let mut p = parts.clone();
        p.remove(1);
        return p.join(".");
    }
    resource.to_string()
}

impl Fake {
    fn with(objects: &[(&str, Value)]) -> Fake {
        let fake = Fake::default();
        for (resource, object) in objects {
            fake.put(resource, object.clone());
        }
        fake
    }

    fn put(&self, resource: &str, object: Value) {
        let key = (
            unversioned(resource),
            object["metadata"]["namespace"]
                .as_str()
                .unwrap()
                .to_string(),
            object["metadata"]["name"].as_str().unwrap().to_string(),
        );
        self.objects.borrow_mut().insert(key, object);
    }

    fn object(&self, resource: &str, name: &str) -> Option<Value> {
        self.objects
            .borrow()
            .get(&(resource.to_string(), "fleet".to_string(), name.to_string()))
            .cloned()
    }
}

const POOLS: &str = "machinepools.cluster.x-k8s.io";
const CONFIGS: &str = "kubeadmconfigs.bootstrap.cluster.x-k8s.io";

impl Cluster for Fake {
    fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        if self
            .denied
            .iter()
            .any(|(v, r)| *v == "get" && unversioned(resource) == *r)
        {
            return Err(ClusterError::Forbidden {
                verb: "get".into(),
                resource: resource.into(),
                namespace: "fleet".into(),
                message: "forbidden".into(),
            });
        }
        let ns = namespace.unwrap_or("fleet").to_string();
        Ok(self
            .objects
            .borrow()
            .get(&(unversioned(resource), ns, name.to_string()))
            .cloned())
    }

    fn list(
        &self,
        resource: &str,
        _namespace: &str,
        _selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        Ok(self
            .objects
            .borrow()
            .iter()
            .filter(|(k, _)| k.0 == resource)
            .map(|(_, v)| v.clone())
            .collect())
    }

    fn can_i(&self, verb: &str, resource: &str, _namespace: &str) -> Result<bool, ClusterError> {
        Ok(!self
            .denied
            .iter()
            .any(|(v, r)| *v == verb && *r == resource))
    }

    fn create(&self, object: &Value, dry_run: DryRun) -> Result<Written, ClusterError> {
        self.writes.borrow_mut().push(format!(
            "create {} {:?}",
            object["metadata"]["name"].as_str().unwrap(),
            dry_run
        ));
        if dry_run == DryRun::None {
            let mut object = object.clone();
            object["status"] = json!({"dataSecretName": object["metadata"]["name"]});
            self.put(CONFIGS, object);
        }
        Ok(Written { warnings: vec![] })
    }

    fn patch(
        &self,
        resource: &str,
        _namespace: &str,
        name: &str,
        patch: &Value,
        dry_run: DryRun,
    ) -> Result<Written, ClusterError> {
        self.writes.borrow_mut().push(format!(
            "patch {name} {} {:?}",
            patch[1]["value"].as_str().unwrap(),
            dry_run
        ));
        if self.refuse_patch {
            return Err(ClusterError::Failed {
                command: "patch".into(),
                message: "admission webhook denied the request".into(),
            });
        }
        if dry_run == DryRun::None {
            let mut pool = self.object(resource, name).unwrap();
            let new = patch[1]["value"].as_str().unwrap();
            pool["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] = json!(new);
            if self.capi_copies {
                pool["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] = json!(new);
            }
            self.put(resource, pool);
        }
        Ok(Written {
            warnings: vec!["a warning of the policy".into()],
        })
    }

    fn delete(
        &self,
        resource: &str,
        _namespace: &str,
        name: &str,
    ) -> Result<Written, ClusterError> {
        self.writes.borrow_mut().push(format!("delete {name}"));
        self.objects.borrow_mut().remove(&(
            resource.to_string(),
            "fleet".to_string(),
            name.to_string(),
        ));
        Ok(Written::default())
    }

    fn pause(&self, _interval: Duration) {}
}

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
    let (result, out, err) = run(
        &fake,
        &request(
            "machinepool/pool-1",
            manifest("pool-1-a", "b\n"),
            DryRun::None,
        ),
    );
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
    let (result, out, _) = run(
        &fake,
        &request(
            "machinepool/pool-1",
            manifest("pool-1-a", "b\n"),
            DryRun::None,
        ),
    );
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
    let (result, _, _) = run(
        &fake,
        &request(
            "machinepool/pool-1",
            manifest("pool-1-a", "b\n"),
            DryRun::None,
        ),
    );
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
    let (result, _, _) = run(
        &fake,
        &request(
            "machinepool/pool-1",
            manifest("pool-1-a", "b\n"),
            DryRun::None,
        ),
    );
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
