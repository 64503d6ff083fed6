//! The wasm module and the native library are the same rules: for every scenario, the line
//! policy-host prints for the annotated module equals the line built from the native engine's
//! verdict on the very payload the host sends to the guest. Context-aware scenarios replay
//! their session on both sides: natively through the same `HostLookups` the module uses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capi_bootstrap_rollout_policy::engine::validate_payload_with;
use capi_bootstrap_rollout_policy::host_lookups::HostLookups;
use capi_bootstrap_rollout_policy::validate_settings_payload;
use e2e_tests::annotated_policy;
use policy_host::admission::{from_validation_response, ValidateRequest, ValidationResponse};
use policy_host::callbacks::{Cluster, HostContext, Session};
use policy_host::engine::EngineOptions;
use policy_host::metadata::Metadata;
use policy_host::run::{run, RunOptions, RunReport};
use scenario_model::{discover, Scenario};
use serde_json::{json, Value};

fn module() -> PathBuf {
    annotated_policy()
}

/// What the host would answer the guest: the scenario's replay session, limited to the
/// module's contextAwareResources, or no cluster at all.
fn cluster(module: &Path, scenario: &Scenario) -> Arc<HostContext> {
    let Some(session) = scenario
        .session_path()
        .filter(|_| scenario.spec.context_aware)
    else {
        return HostContext::offline();
    };
    let metadata = Metadata::from_module(&std::fs::read(module).unwrap())
        .unwrap()
        .unwrap();
    let allowed = metadata
        .context_aware_resources
        .iter()
        .map(|r| (r.api_version.clone(), r.kind.clone()))
        .collect();
    HostContext::new(
        allowed,
        Cluster::Replay(Session::from_file(&session).unwrap()),
    )
}

fn native_line(request: &Value, settings: &Value, cluster: Arc<HostContext>) -> String {
    let validate = ValidateRequest::build(request, false).unwrap();
    let ValidateRequest::AdmissionRequest(admission) = &validate else {
        panic!("not an AdmissionRequest")
    };
    let payload = json!({"request": admission, "settings": settings});
    let callback = cluster.into_callback();
    // In the guest, waPC's host_call error reads "Host error: <what the host said>".
    let lookups = HostLookups(|b: &str, n: &str, o: &str, p: &[u8]| {
        callback(b, n, o, p).map_err(|e| format!("Host error: {e}"))
    });
    let response =
        validate_payload_with(&serde_json::to_vec(&payload).unwrap(), &lookups).into_response();
    let response: ValidationResponse =
        serde_json::from_value(serde_json::to_value(response).unwrap()).unwrap();
    from_validation_response(validate.uid(), admission.object.as_ref(), &response)
        .unwrap()
        .to_line()
}

#[test]
fn wasm_and_native_give_the_same_line_for_every_scenario() {
    let module = module();
    let root = e2e_tests::scenarios();
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for dir in discover(&root).unwrap() {
        let scenario = Scenario::load(&dir).unwrap();
        let settings = scenario.spec.settings.clone().unwrap_or_else(|| json!({}));
        let options = RunOptions {
            module: module.clone(),
            request_path: scenario.request_path().to_string_lossy().into_owned(),
            settings_path: None,
            settings_json: Some(settings.to_string()),
            allow_context_aware: scenario.spec.context_aware,
            replay_session: scenario.session_path(),
            raw: false,
            engine: EngineOptions::default(),
        };
        let wasm = run(&options, &mut RunReport::default());
        let native_settings = validate_settings_payload(settings.to_string().as_bytes());
        match wasm {
            Err(error) => {
                // Only invalid settings end a run; natively they are invalid too.
                assert!(!native_settings.valid, "{}: {error:#}", scenario.name);
                assert!(format!("{error:#}").contains(&native_settings.message.unwrap()));
            }
            Ok(response) => {
                assert!(native_settings.valid, "{}", scenario.name);
                let request: Value = serde_json::from_str(
                    &std::fs::read_to_string(scenario.request_path()).unwrap(),
                )
                .unwrap();
                let native = native_line(&request, &settings, cluster(&module, &scenario));
                if native != response.to_line() {
                    mismatches.push(format!(
                        "{}:\n  wasm   {}\n  native {native}",
                        scenario.name,
                        response.to_line()
                    ));
                }
            }
        }
        compared += 1;
    }
    assert!(compared >= 40, "only {compared} scenarios");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
