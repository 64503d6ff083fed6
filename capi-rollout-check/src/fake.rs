//! A cluster held in memory for the flows' tests (`rotate`, `roll`): objects by resource,
//! namespace and name, the writes it was asked for, what CAPI does after a repoint (copy the
//! new config's data secret name), what an infrastructure provider does with a MachinePool's
//! instances (keep `replicas` of them: launch one for each missing, Ready one look later;
//! delete the newest when there are too many), Leases as the API server keeps them, and
//! scripted interference: errors for the next calls, actions at the Nth look at the Machines.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cluster::{Cluster, ClusterError, DryRun, Scope, Written};

pub const LEASES: &str = "leases.coordination.k8s.io";
/// The fake's time at start: 2026-12-06T03:10:00Z, in microseconds.
pub const NOW: i64 = 1_796_526_600_000_000;

/// An action on the fake at a look at the Machines.
pub type Action = Box<dyn Fn(&Fake)>;

pub const MACHINES: &str = "machines.cluster.x-k8s.io";
pub const SECRETS: &str = "secrets";

/// Objects by (resource without version, namespace, name); the writes it was asked for.
#[derive(Default)]
pub struct Fake {
    pub objects: RefCell<BTreeMap<(String, String, String), Value>>,
    pub denied: Vec<(&'static str, &'static str)>,
    pub writes: RefCell<Vec<String>>,
    /// The Lease's writes: `lease create|renew|take over|release NAME`.
    pub lease_writes: RefCell<Vec<String>>,
    /// The JSON patches it was sent, whole.
    pub patches: RefCell<Vec<Value>>,
    /// What CAPI does once the pool is repointed: copy the new config's data secret name.
    pub capi_copies: bool,
    pub refuse_patch: bool,
    /// What the provider does with a MachinePool's instances: keep `replicas` of them.
    pub scales_back: bool,
    /// The replacements it launches never become Ready.
    pub never_ready: bool,
    /// Machines the provider never lets go once deleted (a finalizer that stays).
    pub stuck: Vec<&'static str>,
    /// Errors for the next calls of a verb (get, list, create, patch, delete), in order.
    pub fail_next: RefCell<Vec<(&'static str, ClusterError)>>,
    /// Actions at the Nth look at the Machines (1 is the first), before the provider acts.
    pub at_look: RefCell<Vec<(usize, Action)>>,
    pub looks: Cell<usize>,
    /// Microseconds since the epoch; each pause moves it on.
    pub now: Cell<i64>,
    /// Seconds since 03:00:00: each object the fake makes is launched one second later.
    pub clock: Cell<u32>,
    /// The Ready Machines left after each Machine delete (Ready as roll counts them: a
    /// nodeRef, the Ready condition, no deletionTimestamp).
    pub ready_after_delete: RefCell<Vec<u32>>,
    /// Successive versions of an object (by resource): each get moves to the next; the last
    /// one stays.
    pub versions: RefCell<BTreeMap<String, Vec<Value>>>,
    /// Every list it was asked for: `RESOURCE SCOPE SELECTOR MANAGED_FIELDS`.
    pub lists: RefCell<Vec<String>>,
    /// Resources whose every list is refused, with kubectl's words.
    pub refused: Vec<(&'static str, &'static str)>,
    /// The texts it was asked to apply.
    pub applied: RefCell<Vec<String>>,
}

/// Whether `object` has the labels of a kubectl selector: `key` or `key=value`, comma-separated.
fn selected(object: &Value, selector: Option<&str>) -> bool {
    selector.into_iter().flat_map(|s| s.split(',')).all(|term| {
        let labels = &object["metadata"]["labels"];
        match term.split_once('=') {
            Some((key, value)) => labels[key].as_str() == Some(value),
            None => labels.get(term).is_some(),
        }
    })
}

/// `kubeadmconfigs.v1beta2.bootstrap.cluster.x-k8s.io` -> `kubeadmconfigs.bootstrap.cluster.x-k8s.io`.
pub fn unversioned(resource: &str) -> String {
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
    /// A MachineDeployment repointed at template `new`: with `capi_copies`, what CAPI does: a
    /// MachineSet on `new` with every replica Ready (none with `never_ready`), and the older
    /// MachineSets scaled to none (left as they are with `never_ready`).
    fn roll_deployment(&self, name: &str, new: &str) {
        let mut md = self.object(DEPLOYMENTS, name).unwrap();
        md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] = json!(new);
        self.put(DEPLOYMENTS, md.clone());
        if !self.capi_copies {
            return;
        }
        let replicas = md["spec"]["replicas"].as_u64().unwrap_or(1);
        if !self.never_ready {
            for mut set in self.list_now(SETS) {
                set["spec"]["replicas"] = json!(0);
                set["status"] = json!({"replicas": 0, "readyReplicas": 0});
                self.put(SETS, set);
            }
        }
        let mut set = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
            "metadata": {"name": format!("{name}-{}", &new[new.len().saturating_sub(5)..]), "namespace": "fleet",
                         "labels": {"cluster.x-k8s.io/deployment-name": name}},
            "spec": md["spec"].clone()});
        let ready = if self.never_ready { 0 } else { replicas };
        set["status"] = json!({"replicas": replicas, "readyReplicas": ready});
        self.put(SETS, set);
    }

    pub fn with(objects: &[(&str, Value)]) -> Fake {
        let fake = Fake::default();
        for (resource, object) in objects {
            fake.put(resource, object.clone());
        }
        fake
    }

    pub fn put(&self, resource: &str, object: Value) {
        let key = (
            unversioned(resource),
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            object["metadata"]["name"].as_str().unwrap().to_string(),
        );
        self.objects.borrow_mut().insert(key, object);
    }

    pub fn object(&self, resource: &str, name: &str) -> Option<Value> {
        self.objects
            .borrow()
            .get(&(resource.to_string(), "fleet".to_string(), name.to_string()))
            .cloned()
    }
}

pub const POOLS: &str = "machinepools.cluster.x-k8s.io";
pub const CONFIGS: &str = "kubeadmconfigs.bootstrap.cluster.x-k8s.io";
pub const TEMPLATES: &str = "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io";
pub const DEPLOYMENTS: &str = "machinedeployments.cluster.x-k8s.io";
pub const SETS: &str = "machinesets.cluster.x-k8s.io";

/// A MachinePool Machine of `pool`, launched at `created`.
pub fn machine(pool: &str, name: &str, created: &str, ready: bool) -> Value {
    let mut m = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": "fleet", "creationTimestamp": created,
                     "labels": {"cluster.x-k8s.io/pool-name": pool, "cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": {"clusterName": "c1"}, "status": {}});
    if ready {
        m["status"] = json!({"nodeRef": {"name": name},
            "conditions": [{"type": "Ready", "status": "True"}]});
    }
    m
}

impl Fake {
    /// The next launch time, one second after the last.
    pub fn tick(&self) -> String {
        let s = self.clock.get() + 1;
        self.clock.set(s);
        format!(
            "2026-12-06T{:02}:{:02}:{:02}Z",
            3 + s / 3600,
            s / 60 % 60,
            s % 60
        )
    }

    /// What the provider does between two looks at the Machines: a Machine being deleted is
    /// gone at the third look (unless stuck); a replacement launched at the last look becomes
    /// Ready; then each pool gets back to its replicas: one launched (not Ready yet) for each
    /// missing, the newest deleted when there are too many.
    fn provider_acts(&self) {
        let leaving: Vec<(String, Value)> = self
            .objects
            .borrow()
            .iter()
            .filter(|(k, m)| k.0 == MACHINES && m.pointer("/metadata/deletionTimestamp").is_some())
            .map(|(k, m)| (k.2.clone(), m.clone()))
            .collect();
        for (name, mut m) in leaving {
            let seen = m
                .pointer("/metadata/annotations/fake-looks")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if seen < 2 || self.stuck.contains(&name.as_str()) {
                m["metadata"]["annotations"] = json!({"fake-looks": seen + 1});
                self.put(MACHINES, m);
                continue;
            }
            self.objects
                .borrow_mut()
                .remove(&(MACHINES.to_string(), "fleet".to_string(), name));
        }
        if !self.never_ready {
            let launched: Vec<(String, Value)> = self
                .objects
                .borrow()
                .iter()
                .filter(|(k, m)| {
                    k.0 == MACHINES
                        && m["metadata"]["name"].as_str().unwrap().starts_with("new-")
                        && m.pointer("/metadata/deletionTimestamp").is_none()
                })
                .map(|(k, m)| (k.2.clone(), m.clone()))
                .collect();
            for (name, m) in launched {
                let pool = m["metadata"]["labels"]["cluster.x-k8s.io/pool-name"]
                    .as_str()
                    .unwrap();
                let created = m["metadata"]["creationTimestamp"].as_str().unwrap();
                self.put(MACHINES, machine(pool, &name, created, true));
            }
        }
        if !self.scales_back {
            return;
        }
        let pools: Vec<Value> = self
            .objects
            .borrow()
            .iter()
            .filter(|(k, _)| k.0 == POOLS)
            .map(|(_, p)| p.clone())
            .collect();
        for p in pools {
            let name = p["metadata"]["name"].as_str().unwrap().to_string();
            let replicas = p
                .pointer("/spec/replicas")
                .and_then(Value::as_u64)
                .unwrap_or(1) as usize;
            let mut live: Vec<(String, String)> = self
                .objects
                .borrow()
                .iter()
                .filter(|(k, m)| {
                    k.0 == MACHINES
                        && m["metadata"]["labels"]["cluster.x-k8s.io/pool-name"] == name.as_str()
                        && m.pointer("/metadata/deletionTimestamp").is_none()
                })
                .map(|(k, m)| {
                    (
                        m["metadata"]["creationTimestamp"]
                            .as_str()
                            .unwrap()
                            .to_string(),
                        k.2.clone(),
                    )
                })
                .collect();
            live.sort();
            for _ in live.len()..replicas {
                let created = self.tick();
                let new = format!("new-{}", self.clock.get());
                self.put(MACHINES, machine(&name, &new, &created, false));
            }
            for (_, extra) in live.iter().skip(replicas).rev() {
                self.mark_deleting(extra);
            }
        }
    }

    /// A delete as the API server takes it for an object with finalizers: a deletionTimestamp.
    pub fn mark_deleting(&self, name: &str) {
        if let Some(mut m) = self.object(MACHINES, name) {
            m["metadata"]["deletionTimestamp"] = json!("2026-12-06T03:20:00Z");
            m["metadata"]["finalizers"] = json!(["machine.cluster.x-k8s.io"]);
            self.put(MACHINES, m);
        }
    }

    /// The pool's replicas set to `n`, as `kubectl scale` does.
    pub fn scale(&self, n: u32) {
        let mut p = self.object(POOLS, "pool-1").unwrap();
        p["spec"]["replicas"] = json!(n);
        self.put(POOLS, p);
    }

    /// The objects of a resource now, without the provider acting.
    pub fn list_now(&self, resource: &str) -> Vec<Value> {
        self.objects
            .borrow()
            .iter()
            .filter(|(k, _)| k.0 == resource)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Ready as roll counts it.
    pub fn ready(&self) -> u32 {
        self.objects
            .borrow()
            .iter()
            .filter(|(k, m)| {
                k.0 == MACHINES
                    && m.pointer("/status/nodeRef").is_some()
                    && m.pointer("/metadata/deletionTimestamp").is_none()
            })
            .count() as u32
    }

    /// The error scripted for the next call of `verb`, if any.
    fn fails(&self, verb: &str) -> Result<(), ClusterError> {
        let mut next = self.fail_next.borrow_mut();
        match next.iter().position(|(v, _)| *v == verb) {
            Some(i) => Err(next.remove(i).1),
            None => Ok(()),
        }
    }

    fn patch_lease(&self, name: &str, patch: &Value) -> Result<(), ClusterError> {
        let Some(mut lease) = self.object(LEASES, name) else {
            return Err(not_found(name));
        };
        for op in patch.as_array().unwrap() {
            let path = op["path"].as_str().unwrap();
            let field = path.strip_prefix("/spec/").unwrap();
            match op["op"].as_str().unwrap() {
                "test" if lease["spec"][field] != op["value"] => {
                    return Err(ClusterError::Failed {
                        command: "patch".into(),
                        message: format!("The request is invalid: the server rejected our request due to an error in our request: testing value {path} failed"),
                    })
                }
                "test" => {}
                _ => lease["spec"][field] = op["value"].clone(),
            }
        }
        self.put(LEASES, lease);
        Ok(())
    }
}

fn not_found(name: &str) -> ClusterError {
    ClusterError::Failed {
        command: "delete".into(),
        message: format!("Error from server (NotFound): \"{name}\" not found"),
    }
}

impl Cluster for Fake {
    fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        self.fails("get")?;
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
        let next = self
            .versions
            .borrow_mut()
            .get_mut(&unversioned(resource))
            .filter(|v| !v.is_empty())
            .map(|v| {
                if v.len() > 1 {
                    v.remove(0)
                } else {
                    v[0].clone()
                }
            });
        if let Some(next) = next {
            self.put(resource, next);
        }
        let ns = namespace.unwrap_or("fleet").to_string();
        Ok(self
            .objects
            .borrow()
            .get(&(unversioned(resource), ns, name.to_string()))
            .cloned())
    }

    fn list_in(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed_fields: bool,
    ) -> Result<Vec<Value>, ClusterError> {
        self.lists.borrow_mut().push(format!(
            "{resource} {scope:?} {selector:?} {managed_fields}"
        ));
        self.fails("list")?;
        if let Some((_, message)) = self.refused.iter().find(|(r, _)| *r == resource) {
            return Err(ClusterError::Failed {
                command: format!("get {resource}"),
                message: message.to_string(),
            });
        }
        if resource == MACHINES {
            let look = self.looks.get() + 1;
            self.looks.set(look);
            let actions: Vec<Action> = {
                let mut all = self.at_look.borrow_mut();
                let (now, later): (Vec<_>, Vec<_>) = all.drain(..).partition(|(n, _)| *n == look);
                *all = later;
                now.into_iter().map(|(_, a)| a).collect()
            };
            for action in actions {
                action(self);
            }
            self.provider_acts();
        }
        let in_scope = |ns: &str| match scope {
            Scope::Namespace(Some(n)) => resource == "namespaces" || ns == n,
            _ => true,
        };
        Ok(self
            .objects
            .borrow()
            .iter()
            .filter(|(k, v)| k.0 == resource && in_scope(&k.1) && selected(v, selector))
            .map(|(_, v)| v.clone())
            .collect())
    }

    fn apply(&self, text: &str, field_manager: &str) -> Result<Written, ClusterError> {
        self.fails("apply")?;
        self.applied
            .borrow_mut()
            .push(format!("{field_manager}: {text}"));
        Ok(Written::default())
    }

    fn can_i(&self, verb: &str, resource: &str, _namespace: &str) -> Result<bool, ClusterError> {
        Ok(!self
            .denied
            .iter()
            .any(|(v, r)| *v == verb && *r == resource))
    }

    fn create(&self, object: &Value, dry_run: DryRun) -> Result<Written, ClusterError> {
        self.fails("create")?;
        if object["kind"] == "Lease" {
            let name = object["metadata"]["name"].as_str().unwrap();
            self.lease_writes
                .borrow_mut()
                .push(format!("lease create {name}"));
            if self.object(LEASES, name).is_some() {
                return Err(ClusterError::Failed {
                    command: "create".into(),
                    message: format!("Error from server (AlreadyExists): error when creating \"STDIN\": leases.coordination.k8s.io \"{name}\" already exists"),
                });
            }
            self.put(LEASES, object.clone());
            return Ok(Written::default());
        }
        self.writes.borrow_mut().push(format!(
            "create {} {:?}",
            object["metadata"]["name"].as_str().unwrap(),
            dry_run
        ));
        if dry_run == DryRun::None && object["kind"] == "KubeadmConfigTemplate" {
            self.put(TEMPLATES, object.clone());
        } else if dry_run == DryRun::None {
            let mut object = object.clone();
            let created = self.tick();
            object["status"] = json!({"dataSecretName": object["metadata"]["name"]});
            object["metadata"]["creationTimestamp"] = json!(created);
            let secret = json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": object["metadata"]["name"], "namespace": "fleet",
                             "creationTimestamp": created}});
            self.put(CONFIGS, object);
            self.put(SECRETS, secret);
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
        self.fails("patch")?;
        if resource == LEASES {
            let what = if patch.as_array().map_or(0, Vec::len) == 2 {
                "renew"
            } else {
                "take over"
            };
            self.lease_writes
                .borrow_mut()
                .push(format!("lease {what} {name}"));
            self.patch_lease(name, patch)?;
            return Ok(Written::default());
        }
        self.writes.borrow_mut().push(format!(
            "patch {name} {} {:?}",
            patch[1]["value"].as_str().unwrap(),
            dry_run
        ));
        self.patches.borrow_mut().push(patch.clone());
        if self.refuse_patch {
            return Err(ClusterError::Failed {
                command: "patch".into(),
                message: "admission webhook denied the request".into(),
            });
        }
        if dry_run == DryRun::None && resource == DEPLOYMENTS {
            self.roll_deployment(name, patch[1]["value"].as_str().unwrap());
        } else if dry_run == DryRun::None {
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
        self.fails("delete")?;
        if resource == LEASES {
            self.lease_writes
                .borrow_mut()
                .push(format!("lease release {name}"));
            return match self.objects.borrow_mut().remove(&(
                LEASES.to_string(),
                "fleet".to_string(),
                name.to_string(),
            )) {
                Some(_) => Ok(Written::default()),
                None => Err(not_found(name)),
            };
        }
        self.writes.borrow_mut().push(format!("delete {name}"));
        if resource != MACHINES {
            self.objects.borrow_mut().remove(&(
                resource.to_string(),
                "fleet".to_string(),
                name.to_string(),
            ));
            return Ok(Written::default());
        }
        if self.object(MACHINES, name).is_none() {
            return Err(not_found(name));
        }
        // Gone at once, as a Machine CAPI drains in no time; a stuck one stays, being deleted.
        if self.stuck.contains(&name) {
            self.mark_deleting(name);
        } else {
            self.objects.borrow_mut().remove(&(
                MACHINES.to_string(),
                "fleet".to_string(),
                name.to_string(),
            ));
        }
        let ready = self.ready();
        self.ready_after_delete.borrow_mut().push(ready);
        Ok(Written::default())
    }

    fn pause(&self, interval: Duration) {
        let now = self.now_micros();
        self.now.set(now + interval.as_micros() as i64);
    }

    fn now_micros(&self) -> i64 {
        if self.now.get() == 0 {
            self.now.set(NOW);
        }
        self.now.get()
    }
}
