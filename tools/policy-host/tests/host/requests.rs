//! The output line, and the input: an AdmissionReview or a raw request, missing fields.

use serde_json::json;

use crate::common::{
    console_logs, host, host_with_stdin, line, request, run_guest, Guest, Step, Workdir,
};

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
