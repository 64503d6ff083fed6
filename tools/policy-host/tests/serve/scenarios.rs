//! Every scenario that needs no cluster, served in protect mode, in monitor mode and with a
//! custom rejection message.

use e2e_tests::annotated_policy;
use policy_host::admission::AdmissionResponse;
use scenario_model::Scenario;
use serde_json::{json, Value};

use crate::common::{
    answered_scenarios, module_url, run_answer, status_message, Start, CUSTOM_MESSAGE,
};

/// Protect, monitor and protect with a custom message, for each settings group.
fn policies(url: &str, settings: &[Value]) -> Value {
    let mut policies = serde_json::Map::new();
    for (index, settings) in settings.iter().enumerate() {
        policies.insert(
            format!("protect-{index}"),
            json!({"module": url, "settings": settings}),
        );
        policies.insert(
            format!("monitor-{index}"),
            json!({"module": url, "policyMode": "monitor", "settings": settings}),
        );
        policies.insert(
            format!("message-{index}"),
            json!({"module": url, "policyMode": "protect", "settings": settings, "message": CUSTOM_MESSAGE}),
        );
    }
    Value::Object(policies)
}

/// In monitor mode: allowed, no status, no patch, the same warnings and audit annotations.
fn monitored(expected: &AdmissionResponse) -> AdmissionResponse {
    AdmissionResponse {
        allowed: true,
        patch_type: None,
        patch: None,
        status: None,
        ..expected.clone()
    }
}

/// With a custom message, a rejection carries it and the policy's message moves to
/// status.details.causes; the rest of the answer is `run`'s.
fn carries_the_custom_message(message: &AdmissionResponse, expected: &AdmissionResponse) -> bool {
    let status = message.status.clone().unwrap_or_default();
    let causes = status
        .details
        .as_ref()
        .and_then(|d| d.get("causes"))
        .cloned()
        .unwrap_or(Value::Null);
    let cause = json!([{
        "reason": null,
        "message": status_message(expected).unwrap_or_default(),
        "field": null
    }]);
    let same_rest = message.allowed == expected.allowed
        && message.warnings == expected.warnings
        && message.audit_annotations == expected.audit_annotations
        && message.uid == expected.uid
        && status.code == expected.code();
    status.message.as_deref() == Some(CUSTOM_MESSAGE) && causes == cause && same_rest
}

/// One log line per request, with what the Go test needs to read the server's log.
fn assert_one_log_line_per_request(log: &str, served: &[Scenario]) {
    let first = &served[0];
    let uid = first.request().unwrap()["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let line = log
        .lines()
        .find(|l| l.contains("validation policy_id=protect-") && l.contains(&uid))
        .unwrap_or_else(|| panic!("no log line for {uid}:\n{log}"));
    for field in [" kind=", " operation=", " user=", " allowed=", " code="] {
        assert!(line.contains(field), "{field} missing from {line}");
    }
    let lines = log
        .lines()
        .filter(|l| l.contains(" INFO policy-host serve: validation policy_id="))
        .count();
    assert_eq!(lines, served.len() * 3, "one line per request:\n{log}");
}

/// Every scenario that needs no cluster, through three policies with its settings: protect
/// (the answer is `run`'s, field for field), monitor (allowed, no status, no patch, the same
/// warnings and audit annotations) and protect with a custom `message` (a rejection carries
/// it, the policy's message moves to status.details.causes).
#[test]
fn scenarios_are_served_as_run_answers_them_in_every_mode() {
    let module = annotated_policy();
    let url = module_url(&module);
    let (served, groups, indexes) = answered_scenarios(false);
    assert!(
        served.len() > 10,
        "only {} scenarios to serve",
        served.len()
    );
    let server = Start::new(policies(&url, &groups.settings))
        .arg("--ignore-kubernetes-connection-failure")
        .run();

    let mut failures = Vec::new();
    let mut rejections = 0;
    for (scenario, index) in served.iter().zip(indexes) {
        let expected = run_answer(scenario, &module, false);
        let request = scenario.request().unwrap();
        let name = &scenario.name;

        let protect = server.review("validate", &format!("protect-{index}"), &request);
        if protect != expected {
            failures.push(format!(
                "{name} (protect): served {}\n  run gives {}",
                protect.to_line(),
                expected.to_line()
            ));
        }

        let monitor = server.review("validate", &format!("monitor-{index}"), &request);
        let monitored = monitored(&expected);
        if monitor != monitored {
            failures.push(format!(
                "{name} (monitor): served {}\n  expected {}",
                monitor.to_line(),
                monitored.to_line()
            ));
        }

        let message = server.review("validate", &format!("message-{index}"), &request);
        if expected.allowed {
            if message != expected {
                failures.push(format!(
                    "{name} (message, allowed): served {}\n  run gives {}",
                    message.to_line(),
                    expected.to_line()
                ));
            }
        } else {
            rejections += 1;
            if !carries_the_custom_message(&message, &expected) {
                failures.push(format!(
                    "{name} (message, rejected): served {}\n  run gives {}",
                    message.to_line(),
                    expected.to_line()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} answers differ:\n{}",
        failures.len(),
        served.len() * 3,
        failures.join("\n")
    );
    assert!(
        rejections > 5,
        "only {rejections} rejections among the scenarios"
    );
    assert_one_log_line_per_request(&server.stderr(), &served);
}
