//! The cluster `rotate`, `roll` and `drift` talk to, through kubectl: its kubeconfig, context
//! and namespace flags as the person uses them, and every write an API request the policy
//! judges. The commands see the cluster through [`Cluster`], so that their error cases are
//! tested without one (`fake.rs`).

use std::fmt;
use std::io::Write;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// kubectl's resource name of a config kind: `kubeadmconfigs.bootstrap.cluster.x-k8s.io`, with
/// the version when given (`kubeadmconfigs.v1beta1.bootstrap.cluster.x-k8s.io`).
pub fn resource_of(kind: &str, group: &str, version: Option<&str>) -> String {
    let plural = format!("{}s", kind.to_lowercase());
    match version {
        Some(v) => format!("{plural}.{v}.{group}"),
        None => format!("{plural}.{group}"),
    }
}

/// Which namespaces a list reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `-n NS`, or None: the context's namespace.
    Namespace(Option<String>),
    /// `--all-namespaces`.
    All,
}

/// kubectl's `--dry-run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    None,
    Client,
    Server,
}

/// What went wrong talking to the cluster.
#[derive(Debug, PartialEq, Eq)]
pub enum ClusterError {
    /// The API server refused a request for RBAC: the verb and resource, and kubectl's words.
    Forbidden {
        verb: String,
        resource: String,
        namespace: String,
        message: String,
    },
    /// Anything else kubectl said, as it said it.
    Failed { command: String, message: String },
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::Forbidden {
                verb,
                resource,
                namespace,
                message,
            } => write!(
                f,
                "RBAC: you may not {verb} {resource} in namespace {namespace}; nothing was changed ({message})"
            ),
            ClusterError::Failed { command, message } => write!(f, "kubectl {command}: {message}"),
        }
    }
}

impl std::error::Error for ClusterError {}

/// What kind of failure a [`ClusterError`] is, as far as retrying it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Worth another try: a conflict (409), throttling (429), a server error (5xx), the API
    /// server unreachable for a moment.
    Transient,
    /// The object is not there (404).
    NotFound,
    /// A create found the name taken (409 AlreadyExists).
    AlreadyExists,
    /// Anything else: RBAC, a refused write, bad input. Trying again changes nothing.
    Permanent,
}

/// kubectl's words for the API server out of reach, or answering with a retryable status.
const TRANSIENT: [&str; 19] = [
    "(Conflict)",
    "(TooManyRequests)",
    "(InternalError)",
    "(ServiceUnavailable)",
    "(ServerTimeout)",
    "(Timeout)",
    "the server is currently unable to handle the request",
    "Too many requests",
    "connection refused",
    "was refused",
    "Unable to connect to the server",
    "connection reset by peer",
    "i/o timeout",
    "TLS handshake timeout",
    "http2: client connection lost",
    "context deadline exceeded",
    "etcdserver: ",
    // An API server starting up serves a custom resource's type a moment after it answers.
    "the server could not find the requested resource",
    "the server doesn't have a resource type",
];

impl ClusterError {
    /// kubectl's own words.
    pub fn message(&self) -> &str {
        match self {
            ClusterError::Forbidden { message, .. } | ClusterError::Failed { message, .. } => {
                message
            }
        }
    }

    pub fn fault(&self) -> Fault {
        let ClusterError::Failed { message, .. } = self else {
            return Fault::Permanent;
        };
        if message.contains("(AlreadyExists)") {
            Fault::AlreadyExists
        } else if message.contains("(NotFound)") && !message.contains("the requested resource") {
            Fault::NotFound
        } else if TRANSIENT.iter().any(|t| message.contains(t)) {
            Fault::Transient
        } else {
            Fault::Permanent
        }
    }
}

/// What a write printed besides its result: the API server's warnings (the policy's among them).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub warnings: Vec<String>,
}

pub trait Cluster {
    /// The object, or `None` when it does not exist. `resource` is kubectl's `TYPE[.VERSION].GROUP`.
    fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError>;
    /// The objects of `resource` in `scope`, with the label selector when given;
    /// `managed_fields`: with their `metadata.managedFields` (kubectl drops it unless
    /// `--show-managed-fields`).
    fn list_in(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed_fields: bool,
    ) -> Result<Vec<Value>, ClusterError>;
    /// The objects of `resource` in `namespace` with the label selector.
    fn list(
        &self,
        resource: &str,
        namespace: &str,
        selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        let scope = Scope::Namespace(Some(namespace.to_string()));
        self.list_in(
            resource,
            &scope,
            Some(selector).filter(|s| !s.is_empty()),
            false,
        )
    }
    /// Server-side apply of `text` (YAML documents), as `field_manager`, taking the fields it
    /// applied from another manager.
    fn apply(&self, text: &str, field_manager: &str) -> Result<Written, ClusterError>;
    /// `kubectl auth can-i VERB RESOURCE -n NAMESPACE`.
    fn can_i(&self, verb: &str, resource: &str, namespace: &str) -> Result<bool, ClusterError>;
    fn create(&self, object: &Value, dry_run: DryRun) -> Result<Written, ClusterError>;
    /// A JSON patch.
    fn patch(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
        dry_run: DryRun,
    ) -> Result<Written, ClusterError>;
    fn delete(&self, resource: &str, namespace: &str, name: &str) -> Result<Written, ClusterError>;
    /// Waits `interval` between polls (a fake cluster need not).
    fn pause(&self, interval: Duration) {
        sleep(interval);
    }
    /// The time now, in microseconds since the Unix epoch (a fake cluster keeps its own).
    fn now_micros(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    }
}

/// kubectl with the person's flags.
pub struct Kubectl {
    pub program: String,
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
    /// kubectl in a process group of its own: the terminal's Ctrl-C reaches only this process,
    /// which stops between steps (`roll`), not a request half done.
    pub detached: bool,
}

impl Kubectl {
    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        #[cfg(unix)]
        if self.detached {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        if let Some(kubeconfig) = &self.kubeconfig {
            command.args(["--kubeconfig", kubeconfig]);
        }
        if let Some(context) = &self.context {
            command.args(["--context", context]);
        }
        command
    }

    /// Runs kubectl; `Ok((stdout, stderr))` on success, the error as kubectl printed it.
    fn run(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        what: (&str, &str, &str),
    ) -> Result<(String, String), ClusterError> {
        let mut command = self.command();
        command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let shown = args.join(" ");
        let mut child = command.spawn().map_err(|e| ClusterError::Failed {
            command: shown.clone(),
            message: format!(
                "cannot run {}: {e} (set --kubectl or KUBECTL)",
                self.program
            ),
        })?;
        if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
            let _ = input.write_all(text.as_bytes());
        }
        let output = child.wait_with_output().map_err(|e| ClusterError::Failed {
            command: shown.clone(),
            message: e.to_string(),
        })?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            return Ok((stdout, stderr));
        }
        let message = crate::kubectl_words::explained(&stderr);
        if message.contains("(Forbidden)") && message.contains(" cannot ") {
            let (verb, resource, namespace) = what;
            return Err(ClusterError::Forbidden {
                verb: verb.into(),
                resource: resource.into(),
                namespace: namespace.into(),
                message,
            });
        }
        Err(ClusterError::Failed {
            command: shown,
            message,
        })
    }
}

/// The lines of kubectl's stderr that are the API server's warnings.
fn warnings(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("Warning: "))
        .map(str::to_string)
        .collect()
}

fn dry_run_flag(dry_run: DryRun) -> &'static str {
    match dry_run {
        DryRun::None => "--dry-run=none",
        DryRun::Client => "--dry-run=client",
        DryRun::Server => "--dry-run=server",
    }
}

fn parse(stdout: &str, command: &str) -> Result<Value, ClusterError> {
    serde_json::from_str(stdout).map_err(|e| ClusterError::Failed {
        command: command.into(),
        message: format!("unreadable output: {e}"),
    })
}

impl Cluster for Kubectl {
    fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let mut args = vec!["get", resource, name, "-o", "json", "--ignore-not-found"];
        if let Some(namespace) = namespace {
            args.extend(["-n", namespace]);
        }
        let (stdout, _) = self.run(
            &args,
            None,
            ("get", resource, namespace.unwrap_or("(the context's)")),
        )?;
        if stdout.trim().is_empty() {
            return Ok(None);
        }
        parse(&stdout, &args.join(" ")).map(Some)
    }

    fn list_in(
        &self,
        resource: &str,
        scope: &Scope,
        selector: Option<&str>,
        managed_fields: bool,
    ) -> Result<Vec<Value>, ClusterError> {
        let mut args = vec!["get", resource];
        let namespace = match scope {
            Scope::All => {
                args.push("--all-namespaces");
                "(all)"
            }
            Scope::Namespace(Some(ns)) => {
                args.extend(["-n", ns.as_str()]);
                ns.as_str()
            }
            Scope::Namespace(None) => "(the context's)",
        };
        if let Some(selector) = selector {
            args.extend(["-l", selector]);
        }
        if managed_fields {
            args.push("--show-managed-fields");
        }
        args.extend(["-o", "json"]);
        let (stdout, _) = self.run(&args, None, ("list", resource, namespace))?;
        let list = parse(&stdout, &args.join(" "))?;
        Ok(list
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    fn apply(&self, text: &str, field_manager: &str) -> Result<Written, ClusterError> {
        let manager = format!("--field-manager={field_manager}");
        let (_, stderr) = self.run(
            &[
                "apply",
                "--server-side",
                &manager,
                "--force-conflicts",
                "-f",
                "-",
            ],
            Some(text),
            ("apply", "the objects", "theirs"),
        )?;
        Ok(Written {
            warnings: warnings(&stderr),
        })
    }

    fn can_i(&self, verb: &str, resource: &str, namespace: &str) -> Result<bool, ClusterError> {
        let mut command = self.command();
        command.args(["auth", "can-i", verb, resource, "-n", namespace]);
        let shown = format!("auth can-i {verb} {resource} -n {namespace}");
        let output = command.output().map_err(|e| ClusterError::Failed {
            command: shown.clone(),
            message: format!(
                "cannot run {}: {e} (set --kubectl or KUBECTL)",
                self.program
            ),
        })?;
        // can-i exits 1 for "no"; its answer is the first word. No answer at all is kubectl
        // failing (an unreachable cluster, a bad kubeconfig), not a "no".
        match String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .next()
        {
            Some("yes") => Ok(true),
            Some("no") => Ok(false),
            _ => Err(ClusterError::Failed {
                command: shown,
                message: crate::kubectl_words::explained(&String::from_utf8_lossy(&output.stderr)),
            }),
        }
    }

    fn create(&self, object: &Value, dry_run: DryRun) -> Result<Written, ClusterError> {
        let kind = object["kind"].as_str().unwrap_or("").to_lowercase();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("");
        let text = object.to_string();
        let (_, stderr) = self.run(
            &[
                "create",
                "-f",
                "-",
                "--save-config",
                dry_run_flag(dry_run),
                "-o",
                "name",
            ],
            Some(&text),
            ("create", &kind, namespace),
        )?;
        Ok(Written {
            warnings: warnings(&stderr),
        })
    }

    fn patch(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
        dry_run: DryRun,
    ) -> Result<Written, ClusterError> {
        let patch = patch.to_string();
        let (_, stderr) = self.run(
            &[
                "patch",
                resource,
                name,
                "-n",
                namespace,
                "--type",
                "json",
                "-p",
                &patch,
                dry_run_flag(dry_run),
            ],
            None,
            ("patch", resource, namespace),
        )?;
        Ok(Written {
            warnings: warnings(&stderr),
        })
    }

    fn delete(&self, resource: &str, namespace: &str, name: &str) -> Result<Written, ClusterError> {
        let (_, stderr) = self.run(
            &["delete", resource, name, "-n", namespace, "--wait=false"],
            None,
            ("delete", resource, namespace),
        )?;
        Ok(Written {
            warnings: warnings(&stderr),
        })
    }
}

/// Polls `check` every `interval` until it answers `Some`, or `timeout` passes (in time, or
/// in polls: a fake cluster does not sleep).
pub fn poll<T>(
    cluster: &dyn Cluster,
    timeout: Duration,
    interval: Duration,
    mut check: impl FnMut() -> Result<Option<T>, ClusterError>,
) -> Result<Option<T>, ClusterError> {
    let start = Instant::now();
    let polls = timeout.as_millis() / interval.as_millis().max(1);
    for poll in 0.. {
        if let Some(found) = check()? {
            return Ok(Some(found));
        }
        if poll >= polls || start.elapsed() >= timeout {
            break;
        }
        cluster.pause(interval);
    }
    Ok(None)
}

/// The JSON patch that repoints a consumer: only if it still names `old` (a `test` first), so a
/// concurrent rotation is not overwritten.
pub fn repoint_patch(old: &str, new: &str) -> Value {
    let path = "/spec/template/spec/bootstrap/configRef/name";
    json!([
        {"op": "test", "path": path, "value": old},
        {"op": "replace", "path": path, "value": new},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// kubectl's words for each failure, as it prints them.
    #[rstest]
    #[case::refused("The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?", Fault::Transient)]
    #[case::eof("Unable to connect to the server: EOF", Fault::Transient)]
    #[case::conflict("Error from server (Conflict): Operation cannot be fulfilled on machines.cluster.x-k8s.io \"m-a\": the object has been modified", Fault::Transient)]
    #[case::throttled("Error from server (TooManyRequests): the server has received too many requests and has asked us to try again later", Fault::Transient)]
    #[case::etcd(
        "Error from server (InternalError): etcdserver: leader changed",
        Fault::Transient
    )]
    #[case::starting(
        "Error from server (NotFound): the server could not find the requested resource",
        Fault::Transient
    )]
    #[case::not_served_yet(
        "error: the server doesn't have a resource type \"machines\"",
        Fault::Transient
    )]
    #[case::gone(
        "Error from server (NotFound): machines.cluster.x-k8s.io \"m-a\" not found",
        Fault::NotFound
    )]
    #[case::taken("Error from server (AlreadyExists): error when creating \"STDIN\": leases.coordination.k8s.io \"x\" already exists", Fault::AlreadyExists)]
    #[case::denied(
        "admission webhook \"deny.example.com\" denied the request: frozen",
        Fault::Permanent
    )]
    #[case::invalid(
        "The request is invalid: the server rejected our request due to an error in our request",
        Fault::Permanent
    )]
    fn faults(#[case] message: &str, #[case] fault: Fault) {
        let e = ClusterError::Failed {
            command: "x".into(),
            message: message.into(),
        };
        assert_eq!(e.fault(), fault);
    }

    #[test]
    fn rbac_is_never_retried() {
        let e = ClusterError::Forbidden {
            verb: "delete".into(),
            resource: "machines".into(),
            namespace: "fleet".into(),
            message: "connection refused".into(),
        };
        assert_eq!(e.fault(), Fault::Permanent);
    }
}
