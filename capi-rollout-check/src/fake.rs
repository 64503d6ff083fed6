//! A cluster held in memory for the flows' tests (`rotate`, `roll`): objects by resource,
//! namespace and name, the writes it was asked for, what CAPI does after a repoint (copy the
//! new config's data secret name) and what an infrastructure provider does after a MachinePool
//! Machine is deleted (launch a replacement, Ready one poll later).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::rotate::cluster::{Cluster, ClusterError, DryRun, Written};

pub const MACHINES: &str = "machines.cluster.x-k8s.io";
pub const SECRETS: &str = "secrets";

/// Objects by (resource without version, namespace, name); the writes it was asked for.
#[derive(Default)]
pub struct Fake {
    pub objects: RefCell<BTreeMap<(String, String, String), Value>>,
    pub denied: Vec<(&'static str, &'static str)>,
    pub writes: RefCell<Vec<String>>,
    /// The JSON patches it was sent, whole.
    pub patches: RefCell<Vec<Value>>,
    /// What CAPI does once the pool is repointed: copy the new config's data secret name.
    pub capi_copies: bool,
    pub refuse_patch: bool,
    /// What the provider does once a MachinePool Machine is deleted: launch a replacement.
    pub scales_back: bool,
    /// The pool (name) whose Machines are replaced.
    pub pending: RefCell<Vec<String>>,
    /// Seconds since 03:00:00: each object the fake makes is launched one second later.
    pub clock: Cell<u32>,
    /// The Ready Machines left after each Machine delete.
    pub ready_after_delete: RefCell<Vec<u32>>,
    /// Successive versions of an object (by resource): each get moves to the next; the last
    /// one stays.
    pub versions: RefCell<BTreeMap<String, Vec<Value>>>,
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
                .unwrap()
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

    /// What the provider does between two looks at the Machines: a replacement launched at
    /// the last look becomes Ready; each Machine deleted since gets a replacement, not Ready yet.
    fn provider_acts(&self) {
        // A Machine being deleted is gone at the third look (its replacement follows).
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
            if seen < 2 {
                m["metadata"]["annotations"] = json!({"fake-looks": seen + 1});
                self.put(MACHINES, m);
                continue;
            }
            self.objects
                .borrow_mut()
                .remove(&(MACHINES.to_string(), "fleet".to_string(), name));
            if self.scales_back {
                let pool = m["metadata"]["labels"]["cluster.x-k8s.io/pool-name"]
                    .as_str()
                    .unwrap();
                self.pending.borrow_mut().push(pool.to_string());
            }
        }
        let launched: Vec<(String, Value)> = self
            .objects
            .borrow()
            .iter()
            .filter(|(k, m)| {
                k.0 == MACHINES && m["metadata"]["name"].as_str().unwrap().starts_with("new-")
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
        for pool in self.pending.take() {
            let created = self.tick();
            let name = format!("new-{}", self.clock.get());
            self.put(MACHINES, machine(&pool, &name, &created, false));
        }
    }
}

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

    fn list(
        &self,
        resource: &str,
        _namespace: &str,
        _selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        if resource == MACHINES {
            self.provider_acts();
        }
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
            let secret = json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": object["metadata"]["name"], "namespace": "fleet",
                             "creationTimestamp": self.tick()}});
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
        let gone = self.objects.borrow_mut().remove(&(
            resource.to_string(),
            "fleet".to_string(),
            name.to_string(),
        ));
        if resource == MACHINES {
            let ready = self
                .objects
                .borrow()
                .iter()
                .filter(|(k, m)| k.0 == MACHINES && m.pointer("/status/nodeRef").is_some())
                .count() as u32;
            self.ready_after_delete.borrow_mut().push(ready);
            if let (true, Some(m)) = (self.scales_back, gone) {
                let pool = m["metadata"]["labels"]["cluster.x-k8s.io/pool-name"]
                    .as_str()
                    .unwrap();
                self.pending.borrow_mut().push(pool.to_string());
            }
        }
        Ok(Written::default())
    }

    fn pause(&self, _interval: Duration) {}
}
