//! What every test of this binary uses: the waPC guest generator (WAT), a work directory,
//! `policy-host` runs and their output, the metadata `annotate` is given, a guest that lists
//! MachinePools.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const HOST: &str = env!("CARGO_BIN_EXE_policy-host");

// ---------------------------------------------------------------------------------------------
// A waPC guest generator. The guest reads the call with __guest_request, then runs the steps
// of the called function, told apart by the length of its name (validate: 8,
// protocol_version: 16, validate_settings: 17).

#[derive(Clone)]
pub enum Step {
    /// __guest_response with this text, return 1.
    Respond(&'static str),
    /// __guest_error with this text, return 0.
    Error(&'static str),
    Trap,
    Loop,
    /// __console_log with this text.
    Log(&'static str),
    /// __console_log of the call's payload.
    LogPayload,
    /// __host_call; logs "host-ok" and the response, or "host-error" and the error.
    HostCall {
        binding: &'static str,
        namespace: &'static str,
        operation: &'static str,
        payload: String,
    },
    /// The steps run only when the payload has this length.
    WhenPayloadLen(u32, Vec<Step>),
}

#[derive(Clone)]
pub struct Guest {
    pub init: Vec<Step>,
    pub validate: Vec<Step>,
    pub validate_settings: Vec<Step>,
    pub protocol_version: Vec<Step>,
    /// Exports an `opa_`-prefixed function (kwctl's Rego heuristic).
    pub rego: bool,
}

pub const ACCEPT: &str = r#"{"accepted":true}"#;
pub const SETTINGS_VALID: &str = r#"{"valid":true}"#;
pub const OP_BUFFER: u32 = 0x1_0000;
pub const PAYLOAD_BUFFER: u32 = 0x1_0100;
pub const HOST_BUFFER: u32 = 0x8_0000;

impl Default for Guest {
    fn default() -> Self {
        Guest {
            init: vec![],
            validate: vec![Step::Respond(ACCEPT)],
            validate_settings: vec![Step::Respond(SETTINGS_VALID)],
            protocol_version: vec![Step::Respond(r#""v1""#)],
            rego: false,
        }
    }
}

impl Guest {
    pub fn validate(steps: Vec<Step>) -> Guest {
        Guest {
            validate: steps,
            ..Guest::default()
        }
    }

    pub fn wasm(&self) -> Vec<u8> {
        let mut data = DataSegments {
            segments: vec![],
            next: 1024,
        };
        let init = data.steps(&self.init);
        let validate = data.steps(&self.validate);
        let settings = data.steps(&self.validate_settings);
        let protocol = data.steps(&self.protocol_version);
        let segments: String = data
            .segments
            .iter()
            .map(|(offset, bytes)| format!("  (data (i32.const {offset}) \"{}\")\n", escape(bytes)))
            .collect();
        let rego = if self.rego {
            r#"(func (export "opa_eval"))"#
        } else {
            ""
        };
        let wat = format!(
            r#"(module
  (import "wapc" "__guest_request" (func $guest_request (param i32 i32)))
  (import "wapc" "__guest_response" (func $guest_response (param i32 i32)))
  (import "wapc" "__guest_error" (func $guest_error (param i32 i32)))
  (import "wapc" "__console_log" (func $console_log (param i32 i32)))
  (import "wapc" "__host_call" (func $host_call (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wapc" "__host_response_len" (func $host_response_len (result i32)))
  (import "wapc" "__host_response" (func $host_response (param i32)))
  (import "wapc" "__host_error_len" (func $host_error_len (result i32)))
  (import "wapc" "__host_error" (func $host_error (param i32)))
  (memory (export "memory") 16)
{segments}
  {rego}
  (func (export "wapc_init") (local $len i32) {init})
  (func (export "__guest_call") (param $op_len i32) (param $len i32) (result i32)
    (call $guest_request (i32.const {OP_BUFFER}) (i32.const {PAYLOAD_BUFFER}))
    (if (i32.eq (local.get $op_len) (i32.const 8)) (then {validate} (return (i32.const 0))))
    (if (i32.eq (local.get $op_len) (i32.const 17)) (then {settings} (return (i32.const 0))))
    (if (i32.eq (local.get $op_len) (i32.const 16)) (then {protocol} (return (i32.const 0))))
    (i32.const 0))
)"#
        );
        wat::parse_str(&wat).unwrap_or_else(|e| panic!("{e}\n{wat}"))
    }
}

pub struct DataSegments {
    pub segments: Vec<(u32, Vec<u8>)>,
    pub next: u32,
}

impl DataSegments {
    pub fn add(&mut self, bytes: &[u8]) -> (u32, u32) {
        let offset = self.next;
        self.segments.push((offset, bytes.to_vec()));
        self.next += bytes.len() as u32 + 8;
        assert!(self.next < OP_BUFFER, "test data too large");
        (offset, bytes.len() as u32)
    }

    pub fn steps(&mut self, steps: &[Step]) -> String {
        steps
            .iter()
            .map(|s| self.step(s))
            .collect::<Vec<_>>()
            .join(" ")
    }

    pub fn step(&mut self, step: &Step) -> String {
        match step {
            Step::Respond(text) => {
                let (o, l) = self.add(text.as_bytes());
                format!(
                    "(call $guest_response (i32.const {o}) (i32.const {l})) (return (i32.const 1))"
                )
            }
            Step::Error(text) => {
                let (o, l) = self.add(text.as_bytes());
                format!(
                    "(call $guest_error (i32.const {o}) (i32.const {l})) (return (i32.const 0))"
                )
            }
            Step::Trap => "unreachable".to_string(),
            Step::Loop => "(loop $spin (br $spin))".to_string(),
            Step::Log(text) => {
                let (o, l) = self.add(text.as_bytes());
                format!("(call $console_log (i32.const {o}) (i32.const {l}))")
            }
            Step::LogPayload => {
                format!("(call $console_log (i32.const {PAYLOAD_BUFFER}) (local.get $len))")
            }
            Step::HostCall {
                binding,
                namespace,
                operation,
                payload,
            } => {
                let (bo, bl) = self.add(binding.as_bytes());
                let (no, nl) = self.add(namespace.as_bytes());
                let (oo, ol) = self.add(operation.as_bytes());
                let (po, pl) = self.add(payload.as_bytes());
                let (ok_o, ok_l) = self.add(b"host-ok");
                let (err_o, err_l) = self.add(b"host-error");
                format!(
                    "(if (call $host_call (i32.const {bo}) (i32.const {bl}) (i32.const {no}) (i32.const {nl}) \
                     (i32.const {oo}) (i32.const {ol}) (i32.const {po}) (i32.const {pl})) \
                     (then (call $console_log (i32.const {ok_o}) (i32.const {ok_l})) \
                       (call $host_response (i32.const {HOST_BUFFER})) \
                       (call $console_log (i32.const {HOST_BUFFER}) (call $host_response_len))) \
                     (else (call $console_log (i32.const {err_o}) (i32.const {err_l})) \
                       (call $host_error (i32.const {HOST_BUFFER})) \
                       (call $console_log (i32.const {HOST_BUFFER}) (call $host_error_len))))"
                )
            }
            Step::WhenPayloadLen(len, steps) => {
                format!(
                    "(if (i32.eq (local.get $len) (i32.const {len})) (then {}))",
                    self.steps(steps)
                )
            }
        }
    }
}

pub fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// Files and runs.

pub struct Workdir(pub PathBuf);

impl Workdir {
    pub fn new(test: &str) -> Workdir {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("host-tests")
            .join(test);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Workdir(dir)
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        path
    }

    pub fn guest(&self, name: &str, guest: &Guest) -> PathBuf {
        self.write(name, guest.wasm())
    }
}

pub fn request() -> Value {
    json!({
        "uid": "req-1",
        "kind": {"group": "cluster.x-k8s.io", "version": "v1beta2", "kind": "MachinePool"},
        "resource": {"group": "cluster.x-k8s.io", "version": "v1beta2", "resource": "machinepools"},
        "name": "mp-0",
        "namespace": "default",
        "operation": "UPDATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "metadata": {"name": "mp-0"}, "spec": {"replicas": 1}},
        "oldObject": {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "metadata": {"name": "mp-0"}, "spec": {"replicas": 2}},
        "dryRun": false
    })
}

pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

pub fn host(args: &[&str]) -> Run {
    host_with_stdin(args, None)
}

pub fn host_with_stdin(args: &[&str], stdin: Option<&str>) -> Run {
    let started = Instant::now();
    let mut child = Command::new(HOST)
        .args(args)
        .env_remove("POLICY_HOST_TIMEOUT_MS")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    Run {
        status: status.code().unwrap_or(-1),
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
        elapsed: started.elapsed(),
    }
}

/// `policy-host run` of `guest` on the standard request; extra flags before the module.
pub fn run_guest(dir: &Workdir, guest: &Guest, flags: &[&str]) -> Run {
    let module = dir.guest("policy.wasm", guest);
    let request = dir.write("request.json", request().to_string());
    let mut args = vec!["run", "--request-path", request.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.push(module.to_str().unwrap());
    host(&args)
}

/// The single stdout line of a successful run.
pub fn line(run: &Run) -> &str {
    assert_eq!(run.status, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout: {}", run.stdout);
    assert!(run.stdout.ends_with('\n'));
    lines[0]
}

pub fn console_logs(run: &Run) -> Vec<String> {
    run.stderr
        .lines()
        .filter_map(|l| {
            l.split_once("policy console_log: ")
                .map(|(_, m)| m.to_string())
        })
        .collect()
}

pub const METADATA: &str = r#"
rules:
- apiGroups: ["cluster.x-k8s.io"]
  apiVersions: ["v1beta2"]
  resources: ["machinepools"]
  operations: ["CREATE", "UPDATE"]
mutating: false
contextAwareResources:
- apiVersion: cluster.x-k8s.io/v1beta2
  kind: MachinePool
executionMode: kubewarden-wapc
backgroundAudit: true
annotations:
  io.kubewarden.policy.title: test-policy
  io.kubewarden.policy.version: 0.1.0
"#;

pub fn annotate(dir: &Workdir, guest: &Guest, metadata: &str, output: &str) -> Run {
    let module = dir.guest("policy.wasm", guest);
    let metadata = dir.write("metadata.yml", metadata);
    let usage = dir.write("README.md", "# Usage\n\nRotate \"configRef\".\n");
    let output = dir.0.join(output);
    host(&[
        "annotate",
        "-m",
        metadata.to_str().unwrap(),
        "-u",
        usage.to_str().unwrap(),
        "-o",
        output.to_str().unwrap(),
        module.to_str().unwrap(),
    ])
}

pub const LIST_MACHINE_POOLS: &str = r#"{"api_version":"cluster.x-k8s.io/v1beta2","kind":"MachinePool","namespace":"default","label_selector":null,"field_selector":null,"field_masks":["metadata.name"]}"#;

pub fn lookup_guest() -> Guest {
    Guest::validate(vec![
        Step::HostCall {
            binding: "kubewarden",
            namespace: "kubernetes",
            operation: "list_resources_by_namespace",
            payload: LIST_MACHINE_POOLS.to_string(),
        },
        Step::Respond(ACCEPT),
    ])
}
