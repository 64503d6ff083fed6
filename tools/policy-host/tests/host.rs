//! Tests of the host itself, with tiny waPC guests written in WAT: the output line format,
//! failure handling (trap, timeout, garbage, guest error), settings, inputs, annotate/inspect,
//! host capabilities and the scenario runner.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use scenario_model::runner::{render_table, run_all, Evaluator, Verdict};
use serde_json::{json, Value};

const HOST: &str = env!("CARGO_BIN_EXE_policy-host");

// ---------------------------------------------------------------------------------------------
// A waPC guest generator. The guest reads the call with __guest_request, then runs the steps
// of the called function, told apart by the length of its name (validate: 8,
// protocol_version: 16, validate_settings: 17).

#[derive(Clone)]
enum Step {
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
struct Guest {
    init: Vec<Step>,
    validate: Vec<Step>,
    validate_settings: Vec<Step>,
    protocol_version: Vec<Step>,
    /// Exports an `opa_`-prefixed function (kwctl's Rego heuristic).
    rego: bool,
}

const ACCEPT: &str = r#"{"accepted":true}"#;
const SETTINGS_VALID: &str = r#"{"valid":true}"#;
const OP_BUFFER: u32 = 0x1_0000;
const PAYLOAD_BUFFER: u32 = 0x1_0100;
const HOST_BUFFER: u32 = 0x8_0000;

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
    fn validate(steps: Vec<Step>) -> Guest {
        Guest {
            validate: steps,
            ..Guest::default()
        }
    }

    fn wasm(&self) -> Vec<u8> {
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

struct DataSegments {
    segments: Vec<(u32, Vec<u8>)>,
    next: u32,
}

impl DataSegments {
    fn add(&mut self, bytes: &[u8]) -> (u32, u32) {
        let offset = self.next;
        self.segments.push((offset, bytes.to_vec()));
        self.next += bytes.len() as u32 + 8;
        assert!(self.next < OP_BUFFER, "test data too large");
        (offset, bytes.len() as u32)
    }

    fn steps(&mut self, steps: &[Step]) -> String {
        steps
            .iter()
            .map(|s| self.step(s))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn step(&mut self, step: &Step) -> String {
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

fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// Files and runs.

struct Workdir(PathBuf);

impl Workdir {
    fn new(test: &str) -> Workdir {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("host-tests")
            .join(test);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Workdir(dir)
    }

    fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn guest(&self, name: &str, guest: &Guest) -> PathBuf {
        self.write(name, guest.wasm())
    }
}

fn request() -> Value {
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

struct Run {
    status: i32,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

fn host(args: &[&str]) -> Run {
    host_with_stdin(args, None)
}

fn host_with_stdin(args: &[&str], stdin: Option<&str>) -> Run {
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
fn run_guest(dir: &Workdir, guest: &Guest, flags: &[&str]) -> Run {
    let module = dir.guest("policy.wasm", guest);
    let request = dir.write("request.json", request().to_string());
    let mut args = vec!["run", "--request-path", request.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.push(module.to_str().unwrap());
    host(&args)
}

/// The single stdout line of a successful run.
fn line(run: &Run) -> &str {
    assert_eq!(run.status, 0, "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout: {}", run.stdout);
    assert!(run.stdout.ends_with('\n'));
    lines[0]
}

fn console_logs(run: &Run) -> Vec<String> {
    run.stderr
        .lines()
        .filter_map(|l| {
            l.split_once("policy console_log: ")
                .map(|(_, m)| m.to_string())
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The output line.

#[test]
fn accepted_request_line() {
    let dir = Workdir::new("accepted_request_line");
    let run = run_guest(&dir, &Guest::default(), &[]);
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":true,"auditAnnotations":null,"warnings":null}"#
    );
}

#[test]
fn rejected_request_line() {
    let dir = Workdir::new("rejected_request_line");
    let guest = Guest::validate(vec![Step::Respond(
        r#"{"accepted":false,"message":"no way","code":403,"mutated_object":null,"audit_annotations":{"k":"v"},"warnings":["w1","w2"]}"#,
    )]);
    let run = run_guest(&dir, &guest, &[]);
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":false,"status":{"message":"no way","code":403},"auditAnnotations":{"k":"v"},"warnings":["w1","w2"]}"#
    );
    // A message without a code, and warnings on an accepted request.
    let guest = Guest::validate(vec![Step::Respond(
        r#"{"accepted":false,"message":"no code"}"#,
    )]);
    let run = run_guest(&dir, &guest, &[]);
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":false,"status":{"message":"no code"},"auditAnnotations":null,"warnings":null}"#
    );
    let guest = Guest::validate(vec![Step::Respond(
        r#"{"accepted":true,"warnings":["careful"]}"#,
    )]);
    let run = run_guest(&dir, &guest, &[]);
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":true,"auditAnnotations":null,"warnings":["careful"]}"#
    );
}

#[test]
fn mutation_becomes_a_json_patch() {
    let dir = Workdir::new("mutation_becomes_a_json_patch");
    let guest = Guest::validate(vec![Step::Respond(
        r#"{"accepted":true,"mutated_object":{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool","metadata":{"name":"mp-0"},"spec":{"replicas":3}}}"#,
    )]);
    let run = run_guest(&dir, &guest, &[]);
    // base64 of [{"op":"replace","path":"/spec/replicas","value":3}]
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":true,"patchType":"JSONPatch","patch":"W3sib3AiOiJyZXBsYWNlIiwicGF0aCI6Ii9zcGVjL3JlcGxpY2FzIiwidmFsdWUiOjN9XQ==","auditAnnotations":null,"warnings":null}"#
    );
}

// ---------------------------------------------------------------------------------------------
// Guest failures: allowed false, code 500, exit 0.

const TRAP_PREFIX: &str = r#"{"uid":"req-1","allowed":false,"status":{"message":"internal server error: Guest call failure: "#;
const ERROR_SUFFIX: &str = r#"","code":500},"auditAnnotations":null,"warnings":null}"#;

#[test]
fn trap_is_a_500_and_the_policy_log_is_shown() {
    let dir = Workdir::new("trap_is_a_500");
    let guest = Guest::validate(vec![
        Step::Log("policy panicked at src/engine.rs:10:5: index out of bounds"),
        Step::Trap,
    ]);
    let run = run_guest(&dir, &guest, &[]);
    let line = line(&run);
    assert!(line.starts_with(TRAP_PREFIX), "{line}");
    assert!(line.ends_with(ERROR_SUFFIX), "{line}");
    // wasmtime-provider keeps the top of the error only: the backtrace, not the trap kind
    // (as with kwctl). The policy's console_log says why.
    assert!(
        line.contains("error while executing at wasm backtrace:"),
        "{line}"
    );
    assert_eq!(
        console_logs(&run),
        vec!["policy panicked at src/engine.rs:10:5: index out of bounds".to_string()]
    );
}

#[test]
fn guest_error_is_a_500() {
    let dir = Workdir::new("guest_error_is_a_500");
    let run = run_guest(&dir, &Guest::validate(vec![Step::Error("boom")]), &[]);
    assert_eq!(line(&run), format!("{TRAP_PREFIX}boom{ERROR_SUFFIX}"));
}

#[test]
fn garbage_response_is_a_500() {
    let dir = Workdir::new("garbage_response_is_a_500");
    let run = run_guest(&dir, &Guest::validate(vec![Step::Respond("not json")]), &[]);
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":false,"status":{"message":"internal server error: invalid response from policy: expected ident at line 1 column 2","code":500},"auditAnnotations":null,"warnings":null}"#
    );
    let run = run_guest(
        &dir,
        &Guest::validate(vec![Step::Respond(r#"{"allowed":true}"#)]),
        &[],
    );
    assert_eq!(
        line(&run),
        r#"{"uid":"req-1","allowed":false,"status":{"message":"internal server error: invalid response from policy: missing field `accepted` at line 1 column 16","code":500},"auditAnnotations":null,"warnings":null}"#
    );
}

const TIMEOUT_LINE: &str = r#"{"uid":"req-1","allowed":false,"status":{"message":"Policy execution interrupted because it exceeded the allowed execution time","code":500},"auditAnnotations":null,"warnings":null}"#;

#[test]
fn endless_loop_times_out() {
    let dir = Workdir::new("endless_loop_times_out");
    let run = run_guest(
        &dir,
        &Guest::validate(vec![Step::Loop]),
        &["--timeout-ms", "300"],
    );
    assert_eq!(line(&run), TIMEOUT_LINE);
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
}

#[test]
fn default_deadline_is_two_seconds() {
    let dir = Workdir::new("default_deadline_is_two_seconds");
    let run = run_guest(&dir, &Guest::validate(vec![Step::Loop]), &[]);
    assert_eq!(line(&run), TIMEOUT_LINE);
    assert!(
        run.elapsed >= Duration::from_millis(1900),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed < Duration::from_secs(15), "{:?}", run.elapsed);
}

#[test]
fn endless_init_is_stopped() {
    let dir = Workdir::new("endless_init_is_stopped");
    let guest = Guest {
        init: vec![Step::Loop],
        ..Guest::default()
    };
    let run = run_guest(&dir, &guest, &["--timeout-ms", "300"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("init interrupted, execution deadline exceeded"),
        "{}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Settings.

#[test]
fn rejected_settings_end_the_run() {
    let dir = Workdir::new("rejected_settings_end_the_run");
    let guest = Guest {
        validate_settings: vec![Step::Respond(
            r#"{"valid":false,"message":"inPlaceEdits: must be one of reject, warn, allow"}"#,
        )],
        ..Guest::default()
    };
    let run = run_guest(
        &dir,
        &guest,
        &["--settings-json", r#"{"inPlaceEdits":"explode"}"#],
    );
    assert_eq!(run.status, 1);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("Error: Provided settings are not valid: inPlaceEdits: must be one of reject, warn, allow"),
        "{}",
        run.stderr
    );
    // A settings call that traps is an invalid-settings error too.
    let guest = Guest {
        validate_settings: vec![Step::Trap],
        ..Guest::default()
    };
    let run = run_guest(&dir, &guest, &[]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("Error invoking settings validation callback"),
        "{}",
        run.stderr
    );
}

#[test]
fn settings_reach_both_calls() {
    let dir = Workdir::new("settings_reach_both_calls");
    let guest = Guest {
        validate: vec![Step::LogPayload, Step::Respond(ACCEPT)],
        validate_settings: vec![Step::LogPayload, Step::Respond(SETTINGS_VALID)],
        ..Guest::default()
    };
    let settings = json!({"exemptUsers": ["bob"], "inPlaceEdits": "warn"});
    let run = run_guest(&dir, &guest, &["--settings-json", &settings.to_string()]);
    line(&run);
    let logs = console_logs(&run);
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(serde_json::from_str::<Value>(&logs[0]).unwrap(), settings);
    let payload: Value = serde_json::from_str(&logs[1]).unwrap();
    assert_eq!(payload.as_object().unwrap().len(), 2);
    assert_eq!(payload["settings"], settings);
    // Re-serialized like policy-evaluator's AdmissionRequest: every known field kept.
    assert_eq!(payload["request"], request());

    // No settings: `{}` for both; --settings-path (YAML) works too.
    let run = run_guest(&dir, &guest, &[]);
    let logs = console_logs(&run);
    assert_eq!(logs[0], "{}");
    assert_eq!(
        serde_json::from_str::<Value>(&logs[1]).unwrap()["settings"],
        json!({})
    );
    let path = dir.write("settings.yaml", "inPlaceEdits: warn\nexemptUsers: [bob]\n");
    let run = run_guest(&dir, &guest, &["--settings-path", path.to_str().unwrap()]);
    assert_eq!(
        serde_json::from_str::<Value>(&console_logs(&run)[0]).unwrap(),
        settings
    );

    // Settings must be an object.
    let run = run_guest(&dir, &guest, &["--settings-json", "[1]"]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("Invalid settings in CRD, not an object"),
        "{}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Input.

#[test]
fn admission_review_and_raw_request_give_the_same_answer() {
    let dir = Workdir::new("admission_review_and_raw_request");
    let guest = Guest::validate(vec![
        Step::LogPayload,
        Step::Respond(r#"{"accepted":false,"message":"m","code":400}"#),
    ]);
    let module = dir.guest("policy.wasm", &guest);
    let raw = dir.write("raw.json", request().to_string());
    let review = dir.write(
        "review.json",
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request()}).to_string(),
    );
    let from_raw = host(&["run", "-r", raw.to_str().unwrap(), module.to_str().unwrap()]);
    let from_review = host(&[
        "run",
        "--request-path",
        review.to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    assert_eq!(line(&from_raw), line(&from_review));
    assert_eq!(console_logs(&from_raw), console_logs(&from_review));
    let from_stdin = host_with_stdin(
        &["run", "--request-path", "-", module.to_str().unwrap()],
        Some(&request().to_string()),
    );
    assert_eq!(line(&from_raw), line(&from_stdin));
}

#[test]
fn missing_required_fields_are_clear_errors() {
    let dir = Workdir::new("missing_required_fields");
    let module = dir.guest("policy.wasm", &Guest::default());
    for field in ["uid", "kind", "resource", "operation", "userInfo"] {
        let mut input = request();
        input.as_object_mut().unwrap().remove(field);
        let path = dir.write("request.json", input.to_string());
        let run = host(&[
            "run",
            "--request-path",
            path.to_str().unwrap(),
            module.to_str().unwrap(),
        ]);
        assert_eq!(run.status, 1, "{field}");
        assert_eq!(run.stdout, "");
        assert!(
            run.stderr.contains(&format!(
                "Error: cannot build AdmissionRequest object from given input: missing field `{field}`"
            )),
            "{}",
            run.stderr
        );
    }
    let path = dir.write("review.json", r#"{"kind":"AdmissionReview"}"#);
    let run = host(&[
        "run",
        "--request-path",
        path.to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    assert!(
        run.stderr.contains("invalid AdmissionReview object"),
        "{}",
        run.stderr
    );
    let run = host(&[
        "run",
        "--request-path",
        "/nonexistent.json",
        module.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("Error opening request file /nonexistent.json"),
        "{}",
        run.stderr
    );
    let path = dir.write("broken.json", "{");
    let run = host(&[
        "run",
        "--request-path",
        path.to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 1);
    assert!(run.stderr.contains("EOF while parsing"), "{}", run.stderr);
    let not_wasm = dir.write("not.wasm", "hello");
    let request = dir.write("request.json", request().to_string());
    let run = host(&[
        "run",
        "--request-path",
        request.to_str().unwrap(),
        not_wasm.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 1);
    assert!(run.stderr.starts_with("Error: "), "{}", run.stderr);
}

// ---------------------------------------------------------------------------------------------
// annotate / inspect.

const METADATA: &str = r#"
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

fn annotate(dir: &Workdir, guest: &Guest, metadata: &str, output: &str) -> Run {
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

#[test]
fn annotate_writes_metadata_that_inspect_reads_back() {
    let dir = Workdir::new("annotate_writes_metadata");
    let run = annotate(&dir, &Guest::default(), METADATA, "annotated.wasm");
    assert_eq!(run.status, 0, "{}", run.stderr);
    let annotated = dir.0.join("annotated.wasm");
    let inspected = host(&["inspect", annotated.to_str().unwrap()]);
    assert_eq!(
        inspected.stdout,
        concat!(
            r#"{"protocolVersion":"v1","rules":[{"apiGroups":["cluster.x-k8s.io"],"apiVersions":["v1beta2"],"resources":["machinepools"],"operations":["CREATE","UPDATE"]}],"#,
            r#""annotations":{"io.kubewarden.kwctl":"policy-host "#,
            env!("CARGO_PKG_VERSION"),
            r##"","io.kubewarden.policy.title":"test-policy","io.kubewarden.policy.usage":"# Usage\n\nRotate \"configRef\".\n","io.kubewarden.policy.version":"0.1.0"},"##,
            r#""mutating":false,"backgroundAudit":true,"executionMode":"kubewarden-wapc","policyType":"kubernetes","#,
            r#""contextAwareResources":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool"}]}"#,
            "\n"
        )
    );
    // The annotated module still runs, and annotating it again replaces the section.
    let bytes = std::fs::read(&annotated).unwrap();
    wasmparser::Validator::new().validate_all(&bytes).unwrap();
    let module = dir.write("policy.wasm", &bytes);
    let metadata = dir.write("metadata.yml", METADATA.replace("test-policy", "renamed"));
    let again = dir.0.join("again.wasm");
    let run = host(&[
        "annotate",
        "--metadata-path",
        metadata.to_str().unwrap(),
        "--output-path",
        again.to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let again_bytes = std::fs::read(&again).unwrap();
    let sections = wasmparser::Parser::new(0)
        .parse_all(&again_bytes)
        .filter(|p| matches!(p, Ok(wasmparser::Payload::CustomSection(r)) if r.name() == "io.kubewarden.metadata"))
        .count();
    assert_eq!(sections, 1);
    let inspected = host(&["inspect", again.to_str().unwrap()]);
    assert!(inspected
        .stdout
        .contains(r#""io.kubewarden.policy.title":"renamed""#));
    assert!(
        !inspected.stdout.contains("io.kubewarden.policy.usage"),
        "no -u this time"
    );

    let plain = dir.guest("plain.wasm", &Guest::default());
    let run = host(&["inspect", plain.to_str().unwrap()]);
    assert_eq!(run.status, 1);
    assert!(run.stderr.contains("not annotated"), "{}", run.stderr);
}

#[test]
fn annotate_refuses_invalid_rules() {
    let dir = Workdir::new("annotate_refuses_invalid_rules");
    let cases = [
        (r#"operations: ["CREATE", "UPDATE"]"#, "operations: []", "Metadata is invalid: rules[0].operations: must have at least one element"),
        (r#"operations: ["CREATE", "UPDATE"]"#, r#"operations: ["CREATE", "PATCH"]"#, "unknown variant `PATCH`, expected one of `CREATE`, `UPDATE`, `DELETE`, `CONNECT`, `*`"),
        (r#"operations: ["CREATE", "UPDATE"]"#, r#"operations: ["*", "CREATE"]"#, "Metadata is invalid: rules[0].operations: No other elements can be defined when '*' is used"),
        (r#"apiGroups: ["cluster.x-k8s.io"]"#, "apiGroups: []", "Metadata is invalid: rules[0].apiGroups: must have at least one element"),
        (r#"apiVersions: ["v1beta2"]"#, r#"apiVersions: ["*", "v1"]"#, "Metadata is invalid: rules[0].apiVersions: No other elements can be defined when '*' is used"),
        (r#"resources: ["machinepools"]"#, r#"resources: ["*/*", "pods"]"#, "Metadata is invalid: rules[0].resources: if '*/*' is present, must not specify other resources"),
        ("mutating: false\n", "\n", "missing field `mutating`"),
        ("executionMode: kubewarden-wapc", "executionMode: opa", "The policy has not been created using Rego"),
    ];
    for (from, to, error) in cases {
        let metadata = METADATA.replace(from, to);
        assert_ne!(metadata, METADATA, "{from}");
        let run = annotate(&dir, &Guest::default(), &metadata, "annotated.wasm");
        assert_eq!(run.status, 1, "{to}");
        assert!(run.stderr.contains(error), "{to}: {}", run.stderr);
        assert!(!dir.0.join("annotated.wasm").exists(), "{to}");
    }
    let unknown = Guest {
        protocol_version: vec![Step::Respond(r#""Unknown""#)],
        ..Guest::default()
    };
    let run = annotate(&dir, &unknown, METADATA, "annotated.wasm");
    assert!(
        run.stderr
            .contains("Metadata is invalid: Must specify a valid protocol version"),
        "{}",
        run.stderr
    );
    let broken = Guest {
        protocol_version: vec![Step::Trap],
        ..Guest::default()
    };
    let run = annotate(&dir, &broken, METADATA, "annotated.wasm");
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("Error while detecting Kubewarden protocol version"),
        "{}",
        run.stderr
    );
    let rego = Guest {
        rego: true,
        ..Guest::default()
    };
    let run = annotate(&dir, &rego, METADATA, "annotated.wasm");
    assert!(
        run.stderr
            .contains("This policy has been created using Rego"),
        "{}",
        run.stderr
    );
}

/// METADATA with `lines` added at the top level.
fn metadata_with(lines: &str) -> String {
    format!("{METADATA}{lines}")
}

const WARN_USED: &str = " WARN policy-host: host capabilities used by the policy but not declared in metadata capabilities=";
const WARN_UNUSED: &str = " WARN policy-host: host capabilities declared in metadata but not detected in the policy capabilities=";

/// kwctl 1.35's annotate compares the host calls it finds in the module with metadata's
/// hostCapabilities and warns, in its words, about each side of a difference; the module is
/// written all the same.
#[test]
fn annotate_warns_as_kwctl_when_host_capabilities_differ() {
    let dir = Workdir::new("annotate_warns_on_host_capabilities");
    let declared = "hostCapabilities:\n- kubernetes/list_resources_by_namespace\n";

    // The guest calls list_resources_by_namespace; metadata declares nothing.
    let run = annotate(&dir, &lookup_guest(), METADATA, "annotated.wasm");
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!("{WARN_USED}{{\"kubernetes/list_resources_by_namespace\"}}\n")
    );
    assert!(dir.0.join("annotated.wasm").exists());

    // Declared as called: silence, and the declaration is stored.
    let run = annotate(
        &dir,
        &lookup_guest(),
        &metadata_with(declared),
        "declared.wasm",
    );
    assert_eq!((run.status, run.stderr.as_str()), (0, ""));
    let inspected = host(&["inspect", dir.0.join("declared.wasm").to_str().unwrap()]);
    assert!(
        inspected.stdout.ends_with(
            r#""contextAwareResources":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachinePool"}],"hostCapabilities":["kubernetes/list_resources_by_namespace"]}
"#
        ),
        "{}",
        inspected.stdout
    );

    // Declared, but the guest calls nothing.
    let run = annotate(
        &dir,
        &Guest::default(),
        &metadata_with(declared),
        "unused.wasm",
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!("{WARN_UNUSED}{{\"kubernetes/list_resources_by_namespace\"}}\n")
    );

    // A pattern is compared as a string: both warnings, used first. Neither for a guest that
    // calls nothing and declares nothing (an empty list included).
    let run = annotate(
        &dir,
        &lookup_guest(),
        &metadata_with("hostCapabilities: [\"kubernetes/*\", oci/v1/verify]\n"),
        "pattern.wasm",
    );
    assert_eq!(
        run.stderr,
        format!(
            "{WARN_USED}{{\"kubernetes/list_resources_by_namespace\"}}\n{WARN_UNUSED}{{\"kubernetes/*\", \"oci/v1/verify\"}}\n"
        )
    );
    for metadata in [
        METADATA.to_string(),
        metadata_with("hostCapabilities: []\n"),
    ] {
        let run = annotate(&dir, &Guest::default(), &metadata, "plain.wasm");
        assert_eq!((run.status, run.stderr.as_str()), (0, ""));
    }

    // Metadata that fails validation is refused before any comparison, as in kwctl.
    let run = annotate(
        &dir,
        &lookup_guest(),
        &METADATA.replace("operations: [\"CREATE\", \"UPDATE\"]", "operations: []"),
        "invalid.wasm",
    );
    assert_eq!(run.status, 1);
    assert!(!run.stderr.contains("host capabilities"), "{}", run.stderr);
}

/// kwctl's annotate stamps every module with `io.kubewarden.kwctl`, overriding metadata.yml;
/// policy-host writes its own name and version there.
#[test]
fn annotate_names_the_annotating_tool_in_io_kubewarden_kwctl() {
    let dir = Workdir::new("annotate_names_the_annotating_tool");
    let stamp = concat!("policy-host ", env!("CARGO_PKG_VERSION"));
    let own = METADATA.replace(
        "annotations:\n",
        "annotations:\n  io.kubewarden.kwctl: 9.8.7\n",
    );
    let bare = METADATA[..METADATA.find("annotations:").unwrap()].to_string();
    for metadata in [own, bare] {
        let module = dir.guest("policy.wasm", &Guest::default());
        let metadata = dir.write("metadata.yml", &metadata);
        let output = dir.0.join("annotated.wasm");
        let run = host(&[
            "annotate",
            "-m",
            metadata.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
            module.to_str().unwrap(),
        ]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        let inspected = host(&["inspect", output.to_str().unwrap()]);
        let stored: Value = serde_json::from_str(&inspected.stdout).unwrap();
        assert_eq!(
            stored["annotations"]["io.kubewarden.kwctl"], stamp,
            "{stored}"
        );
        assert!(!inspected.stdout.contains("9.8.7"), "{}", inspected.stdout);
    }
}

/// `kwctl run` refuses a module whose minimumKubewardenVersion is newer than itself (its
/// major.minor; the patch is ignored); policy-host answers as kwctl 1.35.0.
#[test]
fn run_refuses_a_module_that_needs_a_newer_kubewarden() {
    let dir = Workdir::new("run_refuses_a_newer_minimum");
    let request = dir.write("request.json", request().to_string());
    let cases = [
        ("1.36.0", Some("Error: Policy required Kubewarden version 1.36.0 or greater. But it's running on 1.35.0")),
        ("2.1.4", Some("Error: Policy required Kubewarden version 2.1.0 or greater. But it's running on 1.35.0")),
        ("1.35.9", None),
        ("1.33.0", None),
    ];
    for (minimum, refusal) in cases {
        let metadata = metadata_with(&format!("minimumKubewardenVersion: {minimum}\n"));
        let run = annotate(&dir, &Guest::default(), &metadata, "annotated.wasm");
        assert_eq!(run.status, 0, "{}", run.stderr);
        let module = dir.0.join("annotated.wasm");
        let inspected = host(&["inspect", module.to_str().unwrap()]);
        assert!(
            inspected
                .stdout
                .contains(&format!(r#""minimumKubewardenVersion":"{minimum}""#)),
            "{}",
            inspected.stdout
        );
        let run = host(&[
            "run",
            "--request-path",
            request.to_str().unwrap(),
            module.to_str().unwrap(),
        ]);
        match refusal {
            Some(error) => {
                // The first line: with RUST_BACKTRACE set, anyhow adds a backtrace.
                let first = run.stderr.lines().next().unwrap_or_default();
                assert_eq!((run.status, first), (1, error), "{minimum}");
                assert_eq!(run.stdout, "");
            }
            None => assert_eq!(
                line(&run),
                r#"{"uid":"req-1","allowed":true,"auditAnnotations":null,"warnings":null}"#,
                "{minimum}"
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Host capabilities.

const LIST_MACHINE_POOLS: &str = r#"{"api_version":"cluster.x-k8s.io/v1beta2","kind":"MachinePool","namespace":"default","label_selector":null,"field_selector":null,"field_masks":["metadata.name"]}"#;

const SESSION: &str = r#"
- type: Exchange
  request: |
    !KubernetesListResourceNamespace
    api_version: cluster.x-k8s.io/v1beta2
    kind: MachinePool
    namespace: default
    label_selector: null
    field_selector: null
    field_masks:
    - metadata.name
  response:
    type: Success
    payload: '{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"mp-1"}}]}'
"#;

fn lookup_guest() -> Guest {
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

fn host_call_logs(dir: &Workdir, metadata: &str, flags: &[&str]) -> Vec<String> {
    let run = annotate(dir, &lookup_guest(), metadata, "annotated.wasm");
    assert_eq!(run.status, 0, "{}", run.stderr);
    let module = dir.0.join("annotated.wasm");
    let request = dir.write("request.json", request().to_string());
    let mut args = vec!["run", "--request-path", request.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.push(module.to_str().unwrap());
    let run = host(&args);
    line(&run);
    console_logs(&run)
}

#[test]
fn replayed_session_answers_the_guest() {
    let dir = Workdir::new("replayed_session_answers_the_guest");
    let session = dir.write("session.yml", SESSION);
    let logs = host_call_logs(
        &dir,
        METADATA,
        &[
            "--allow-context-aware",
            "--replay-host-capabilities-interactions",
            session.to_str().unwrap(),
        ],
    );
    assert_eq!(
        logs,
        vec![
            "host-ok".to_string(),
            r#"{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"mp-1"}}]}"#
                .to_string()
        ]
    );
    let error_session = dir.write(
        "error-session.yml",
        SESSION.replace(
            "type: Success\n    payload: '{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"metadata\":{\"name\":\"mp-1\"}}]}'",
            "type: Error\n    message: the server is on fire",
        ),
    );
    let logs = host_call_logs(
        &dir,
        METADATA,
        &[
            "--allow-context-aware",
            "--replay-host-capabilities-interactions",
            error_session.to_str().unwrap(),
        ],
    );
    assert_eq!(
        logs,
        vec![
            "host-error",
            "Callback evaluation failure: the server is on fire"
        ]
    );
}

#[test]
fn replay_mismatch_is_an_error_for_the_guest() {
    let dir = Workdir::new("replay_mismatch");
    let session = dir.write(
        "session.yml",
        SESSION.replace("namespace: default", "namespace: other"),
    );
    let logs = host_call_logs(
        &dir,
        METADATA,
        &[
            "--allow-context-aware",
            "--replay-host-capabilities-interactions",
            session.to_str().unwrap(),
        ],
    );
    assert_eq!(logs[0], "host-error");
    assert!(
        logs[1].starts_with(
            "Callback evaluation failure: Replay error: unexpected request. Was expecting KubernetesListResourceNamespace { api_version: \"cluster.x-k8s.io/v1beta2\", kind: \"MachinePool\", namespace: \"other\""
        ),
        "{}",
        logs[1]
    );
    let empty = dir.write("empty.yml", "[]\n");
    let logs = host_call_logs(
        &dir,
        METADATA,
        &[
            "--allow-context-aware",
            "--replay-host-capabilities-interactions",
            empty.to_str().unwrap(),
        ],
    );
    assert_eq!(
        logs,
        vec![
            "host-error",
            "Callback evaluation failure: the list of recorded responses is empty"
        ]
    );
}

#[test]
fn context_aware_calls_need_the_flag_and_the_metadata() {
    let dir = Workdir::new("context_aware_calls_need_the_flag");
    let session = dir.write("session.yml", SESSION);
    let denied = "Policy has not been granted access to Kubernetes cluster.x-k8s.io/v1beta2/MachinePool resources. The violation has been reported.";
    // Without --allow-context-aware: refused, session or not.
    let logs = host_call_logs(
        &dir,
        METADATA,
        &[
            "--replay-host-capabilities-interactions",
            session.to_str().unwrap(),
        ],
    );
    assert_eq!(logs, vec!["host-error", denied]);
    // Allowed, but the resource is not declared in contextAwareResources.
    let undeclared = METADATA.replace("kind: MachinePool", "kind: MachineDeployment");
    let logs = host_call_logs(
        &dir,
        &undeclared,
        &[
            "--allow-context-aware",
            "--replay-host-capabilities-interactions",
            session.to_str().unwrap(),
        ],
    );
    assert_eq!(logs, vec!["host-error", denied]);
    // Allowed and declared, but no session: no cluster here.
    let logs = host_call_logs(&dir, METADATA, &["--allow-context-aware"]);
    assert_eq!(logs[0], "host-error");
    assert!(
        logs[1]
            .starts_with("Callback evaluation failure: kube::Client was not initialized properly"),
        "{}",
        logs[1]
    );
    // A session that cannot be replayed is reported before the policy runs.
    let bad = dir.write("bad.yml", "- type: Exchange\n  request: '!DNSLookupHost {host: x}'\n  response: {type: Success, payload: ''}\n");
    let module = dir.0.join("annotated.wasm");
    let request = dir.0.join("request.json");
    let run = host(&[
        "run",
        "--allow-context-aware",
        "--replay-host-capabilities-interactions",
        bad.to_str().unwrap(),
        "--request-path",
        request.to_str().unwrap(),
        module.to_str().unwrap(),
    ]);
    assert_eq!(run.status, 1);
    assert!(run.stderr.contains("exchange #0"), "{}", run.stderr);
}

// ---------------------------------------------------------------------------------------------
// The scenario runner, on a WAT guest.

#[test]
fn scenario_runner_reports_each_scenario() {
    let dir = Workdir::new("scenario_runner");
    // Rejects every request; settings other than `{}` are refused.
    let guest = Guest {
        validate: vec![Step::Respond(
            r#"{"accepted":false,"message":"in-place edit of the bootstrap config","code":403,"warnings":["rotate configRef instead"]}"#,
        )],
        validate_settings: vec![
            Step::WhenPayloadLen(2, vec![Step::Respond(SETTINGS_VALID)]),
            Step::Respond(r#"{"valid":false,"message":"unknown key noSuchKey"}"#),
        ],
        ..Guest::default()
    };
    let module = dir.guest("policy.wasm", &guest);
    let scenario = |name: &str, spec: &str| {
        dir.write(&format!("scenarios/{name}/scenario.yaml"), spec);
        dir.write(
            &format!("scenarios/{name}/request.json"),
            request().to_string(),
        );
    };
    scenario(
        "a-rejected",
        "description: in-place edits are rejected\nexpect:\n  allowed: false\n  code: 403\n  messageContains: [in-place]\n  warningsContain: [rotate]\n  warnings: 1\n",
    );
    scenario(
        "b-wrong",
        "description: expects the wrong thing\nexpect:\n  allowed: true\n",
    );
    scenario(
        "c-settings",
        "description: bad settings\nsettings: {noSuchKey: 1}\nexpect:\n  settingsError: noSuchKey\n",
    );
    scenario(
        "d-typo",
        "description: typo\nexpect:\n  allowed: false\n  mesageContains: [x]\n",
    );
    let results = run_all(
        &Evaluator::policy_host(HOST),
        &dir.0.join("scenarios"),
        &module,
        2,
    )
    .unwrap();
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a-rejected", "b-wrong", "c-settings", "d-typo"]);
    let passed: Vec<bool> = results.iter().map(|r| r.passed()).collect();
    assert_eq!(passed, [true, false, true, false]);
    assert_eq!(results[0].verdict, Verdict::Reject);
    assert_eq!(results[0].summary, "in-place edit of the bootstrap config");
    assert_eq!(
        results[1].failures,
        vec![
            r#"expected allowed: true, got allowed: false (message: "in-place edit of the bootstrap config")"#
        ]
    );
    assert_eq!(results[2].verdict, Verdict::Error);
    assert_eq!(
        results[2].summary,
        "Provided settings are not valid: unknown key noSuchKey"
    );
    assert!(
        results[3].failures[0].contains("unknown field `mesageContains`"),
        "{:?}",
        results[3].failures
    );
    let table = render_table(&results, 120);
    assert!(
        table.contains("✓ a-rejected  REJECT  in-place edit of the bootstrap config\n"),
        "{table}"
    );
    assert!(table.contains("✗ b-wrong     REJECT"), "{table}");
    assert!(table.contains("    rerun: "), "{table}");
    assert!(table.ends_with("\n2 passed, 2 failed\n"), "{table}");
}
