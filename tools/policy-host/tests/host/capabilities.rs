//! Host capabilities: a replayed session answers the guest, context-aware calls need the
//! flag and the metadata.

use crate::common::{annotate, console_logs, host, line, lookup_guest, request, Workdir, METADATA};

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
