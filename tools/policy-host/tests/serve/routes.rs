//! The audit and raw routes, unknown policies and bodies that are no AdmissionReview, mTLS and
//! the always-accepted namespace.

use e2e_tests::annotated_policy;
use policy_host::admission::AdmissionResponse;
use serde_json::json;

use crate::common::{module_url, run_answer, scenarios, HttpResponse, Start, CUSTOM_MESSAGE};

/// /audit answers what the policy said (no mode, no custom message), /validate_raw takes
/// `{"request": ...}` and applies them; the raw routes' body errors are axum's plain text.
#[test]
fn audit_and_raw_routes() {
    let module = annotated_policy();
    let url = module_url(&module);
    let all = scenarios();
    let scenario = all
        .iter()
        .find(|s| {
            !s.spec.context_aware
                && s.spec.settings.is_none()
                && s.spec.expect.allowed == Some(false)
                && s.spec.expect.warnings.unwrap_or(0) == 0
        })
        .expect("a rejected scenario with default settings");
    let expected = run_answer(scenario, &module, false);
    assert!(!expected.allowed, "{}", expected.to_line());
    let expected_raw = run_answer(scenario, &module, true);
    let server = Start::new(json!({
        "monitored": {"module": url, "policyMode": "monitor", "message": CUSTOM_MESSAGE},
        "protected": {"module": url},
    }))
    .arg("--ignore-kubernetes-connection-failure")
    .run();
    let request = scenario.request().unwrap();

    assert_eq!(server.review("audit", "monitored", &request), expected);

    let raw = server.post_json("/validate_raw/protected", &json!({ "request": request }));
    assert_eq!(raw.status, 200, "{}", raw.text());
    let body = raw.json();
    assert!(
        body.get("kind").is_none() && body.get("apiVersion").is_none(),
        "{body}"
    );
    let answer: AdmissionResponse = serde_json::from_value(body["response"].clone()).unwrap();
    assert_eq!(answer, expected_raw);

    let raw = server.post_json("/validate_raw/monitored", &json!({ "request": request }));
    let answer: AdmissionResponse = serde_json::from_value(raw.json()["response"].clone()).unwrap();
    assert!(
        answer.allowed && answer.status.is_none(),
        "{}",
        answer.to_line()
    );

    let bad = server.request("POST", "/audit/monitored", Some("application/json"), b"{");
    assert_eq!(bad.status, 400);
    assert!(
        bad.text()
            .starts_with("Failed to parse the request body as JSON"),
        "{}",
        bad.text()
    );
    assert!(bad
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/plain"));
}

/// Unknown policies, ids policy-server cannot parse, wrong methods and bodies that are no
/// AdmissionReview get policy-server's statuses and JSON errors, and the server keeps serving.
#[test]
fn unknown_policies_and_malformed_bodies() {
    let module = annotated_policy();
    let mut server = Start::new(json!({"p": {"module": module_url(&module)}}))
        .arg("--ignore-kubernetes-connection-failure")
        .run();
    let scenario = scenarios()
        .into_iter()
        .find(|s| !s.spec.context_aware && s.spec.settings.is_none())
        .unwrap();
    let request = scenario.request().unwrap();
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});

    let error = |response: HttpResponse, status: u16| -> String {
        assert_eq!(response.status, status, "{}", response.text());
        let body = response.json();
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
        body["message"].as_str().unwrap().to_string()
    };

    assert_eq!(
        error(server.post_json("/validate/nope", &review), 404),
        "unknown policy: nope"
    );
    assert_eq!(
        error(server.post_json("/validate/a%2Fb", &review), 404),
        "unknown policy: a/b"
    );
    assert_eq!(
        error(server.post_json("/validate/a%2Fb%2Fc", &review), 500),
        "Something went wrong"
    );
    let message = error(
        server.request(
            "POST",
            "/validate/p",
            Some("application/json"),
            b"{\"request\":",
        ),
        400,
    );
    assert!(
        message.starts_with("Failed to parse the request body as JSON"),
        "{message}"
    );
    let message = error(
        server.post_json("/validate/p", &json!({"request": {}})),
        422,
    );
    assert!(
        message.starts_with("Failed to deserialize the JSON body into the target type")
            && message.contains("missing field `uid`"),
        "{message}"
    );
    let message = error(server.post_json("/validate/p", &json!([1, 2])), 422);
    assert!(message.starts_with("Failed to deserialize"), "{message}");
    let message = error(
        server.request("POST", "/validate/p", None, review.to_string().as_bytes()),
        415,
    );
    assert_eq!(
        message,
        "Expected request with `Content-Type: application/json`"
    );
    // A malformed body for an unknown policy: the body is read first, as in policy-server.
    error(
        server.request("POST", "/validate/nope", Some("application/json"), b"nope"),
        400,
    );
    let wrong_method = server.request("GET", "/validate/p", None, b"");
    assert_eq!(wrong_method.status, 405);
    let no_route = server.post_json("/mutate/p", &review);
    assert_eq!(no_route.status, 404);
    assert!(no_route.body.is_empty());

    assert!(server.alive(), "the server died:\n{}", server.stderr());
    let answer = server.review("validate", "p", &request);
    assert_eq!(answer, run_answer(&scenario, &module, false));
    let log = server.stderr();
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        log.contains("validation policy_id=nope") && log.contains("error=\"unknown policy: nope\""),
        "{log}"
    );
}
/// `--client-ca-file`: a client without a certificate the CA signed gets no answer, one with
/// it does. `--always-accept-admission-reviews-on-namespace`: requests in that namespace are
/// allowed unevaluated, but an unknown policy is still 404.
#[test]
fn mtls_and_the_always_accepted_namespace() {
    let module = annotated_policy();
    let scenario = scenarios()
        .into_iter()
        .find(|s| {
            !s.spec.context_aware
                && s.spec.settings.is_none()
                && s.spec.expect.allowed == Some(false)
        })
        .expect("a rejected scenario with default settings");
    let mut request = scenario.request().unwrap();
    let server = Start::new(json!({"p": {"module": module_url(&module)}}))
        .arg("--ignore-kubernetes-connection-failure")
        .arg("--always-accept-admission-reviews-on-namespace")
        .arg("kubewarden")
        .mtls()
        .run();

    assert!(!server.review("validate", "p", &request).allowed);
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let anonymous = server.request_as(
        server.anonymous_client.clone(),
        "POST",
        "/validate/p",
        Some("application/json"),
        review.to_string().as_bytes(),
    );
    assert!(
        anonymous.is_err(),
        "answered without a client certificate: {anonymous:?}"
    );

    request["namespace"] = json!("kubewarden");
    let accepted = server.review("validate", "p", &request);
    assert_eq!(
        accepted.to_line(),
        format!(
            r#"{{"uid":"{}","allowed":true,"auditAnnotations":null,"warnings":null}}"#,
            request["uid"].as_str().unwrap()
        )
    );
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    assert_eq!(server.post_json("/validate/nope", &review).status, 404);
}
