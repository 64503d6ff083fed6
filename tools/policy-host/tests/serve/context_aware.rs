//! Context-aware lookups, answered by a fake API server through a kubeconfig.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use e2e_tests::annotated_policy;
use policy_host::admission::AdmissionResponse;
use policy_host::callbacks::{CallbackRequestType, Exchange, Response as SessionResponse};
use policy_host::metadata::Metadata;
use scenario_model::Scenario;
use serde_json::{json, Value};

use crate::common::{answered_scenarios, module_url, run_answer, Server, Start, TempDir};

/// What the fake API server answers and what it was asked.
#[derive(Default)]
struct FakeCluster {
    /// The session of the scenario being served, in order.
    exchanges: VecDeque<(CallbackRequestType, SessionResponse)>,
    /// (apiVersion, kind) -> plural, from the module's contextAwareResources.
    plurals: BTreeMap<(String, String), String>,
    /// Requests that matched no exchange, or came after the last.
    unexpected: Vec<String>,
    /// Every request line, in order.
    requests: Vec<String>,
}

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_ascii_lowercase())
}

/// A plain-HTTP API server on 127.0.0.1: discovery and namespaced lists, answered from the
/// current session.
fn fake_api_server(cluster: Arc<Mutex<FakeCluster>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let cluster = cluster.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head.split(' ').nth(1).unwrap_or_default().to_string();
                let (status, body) = answer(&cluster, &target);
                let response = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    addr
}

fn answer(cluster: &Mutex<FakeCluster>, target: &str) -> (u16, String) {
    let mut cluster = cluster.lock().unwrap();
    cluster.requests.push(target.to_string());
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query: BTreeMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["apis", group, version] => {
            let api_version = format!("{group}/{version}");
            let resources: Vec<Value> = cluster
                .plurals
                .iter()
                .filter(|((v, _), _)| *v == api_version)
                .map(|((_, kind), plural)| {
                    json!({"name": plural, "singularName": kind.to_ascii_lowercase(), "namespaced": true,
                           "kind": kind, "verbs": ["get", "list", "watch"]})
                })
                .collect();
            (
                200,
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version,
                       "resources": resources})
                .to_string(),
            )
        }
        ["apis", group, version, "namespaces", namespace, plural] => {
            let api_version = format!("{group}/{version}");
            let kind = cluster
                .plurals
                .iter()
                .find(|((v, _), p)| *v == api_version && p == plural)
                .map(|((_, kind), _)| kind.clone())
                .unwrap_or_default();
            let asked = (
                api_version,
                kind,
                namespace.to_string(),
                query.get("labelSelector").cloned(),
                query.get("fieldSelector").cloned(),
            );
            let next = cluster.exchanges.pop_front();
            let matched = match &next {
                Some((
                    CallbackRequestType::KubernetesListResourceNamespace {
                        api_version,
                        kind,
                        namespace,
                        label_selector,
                        field_selector,
                        ..
                    },
                    response,
                )) if (
                    api_version.clone(),
                    kind.clone(),
                    namespace.clone(),
                    label_selector.clone(),
                    field_selector.clone(),
                ) == asked =>
                {
                    Some(response.clone())
                }
                _ => None,
            };
            match matched {
                Some(SessionResponse::Success { payload }) => (200, payload),
                Some(SessionResponse::Error { message }) => (
                    403,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": "Forbidden", "code": 403})
                    .to_string(),
                ),
                None => {
                    cluster
                        .unexpected
                        .push(format!("{target} (expected {next:?})"));
                    (500, json!({"kind": "Status", "code": 500}).to_string())
                }
            }
        }
        _ => {
            cluster.unexpected.push(target.to_string());
            (404, json!({"kind": "Status", "code": 404}).to_string())
        }
    }
}

fn session(scenario: &Scenario) -> VecDeque<(CallbackRequestType, SessionResponse)> {
    let Some(path) = scenario.session_path() else {
        return VecDeque::new();
    };
    let exchanges: Vec<Exchange> =
        yaml_serde::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    exchanges
        .into_iter()
        .map(|e| (yaml_serde::from_str(&e.request).unwrap(), e.response))
        .collect()
}

/// The fake API server, its state, and a kubeconfig that points at it.
struct FakeApi {
    cluster: Arc<Mutex<FakeCluster>>,
    kubeconfig: PathBuf,
    /// The module's contextAwareResources, as policies.yml lists them.
    resources: Vec<Value>,
    _dir: TempDir,
}

impl FakeApi {
    fn start(module: &Path) -> FakeApi {
        let metadata = Metadata::from_module(&std::fs::read(module).unwrap())
            .unwrap()
            .expect("an annotated module");
        let resources: Vec<Value> = metadata
            .context_aware_resources
            .iter()
            .map(|r| json!({"apiVersion": r.api_version, "kind": r.kind}))
            .collect();
        assert!(!resources.is_empty());
        let cluster = Arc::new(Mutex::new(FakeCluster {
            plurals: metadata
                .context_aware_resources
                .iter()
                .map(|r| ((r.api_version.clone(), r.kind.clone()), plural(&r.kind)))
                .collect(),
            ..FakeCluster::default()
        }));
        let api = fake_api_server(cluster.clone());
        let dir = TempDir::new("kubeconfig");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{api}\n\
                 users:\n- name: test\n  user:\n    token: test-token\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: test\n\
                 current-context: fake\n"
            ),
        )
        .unwrap();
        FakeApi {
            cluster,
            kubeconfig,
            resources,
            _dir: dir,
        }
    }
}

/// For each settings group: `ca-<i>` as a context-aware policy is deployed, `no-capabilities-<i>`
/// without `hostCapabilities`, `no-resources-<i>` without `contextAwareResources`.
fn policies(url: &str, resources: &[Value], settings: &[Value]) -> serde_json::Map<String, Value> {
    let mut policies = serde_json::Map::new();
    for (index, settings) in settings.iter().enumerate() {
        policies.insert(
            format!("ca-{index}"),
            json!({"module": url, "settings": settings, "contextAwareResources": resources,
                   "hostCapabilities": ["kubernetes/*"]}),
        );
        policies.insert(
            format!("no-capabilities-{index}"),
            json!({"module": url, "settings": settings, "contextAwareResources": resources}),
        );
        policies.insert(
            format!("no-resources-{index}"),
            json!({"module": url, "settings": settings, "hostCapabilities": ["*"]}),
        );
    }
    policies
}

/// Each scenario served with its session as the fake cluster's answers: the lookups arrive as
/// recorded, the answer is `run`'s (failed lookups: the same verdict, code and number of
/// warnings, the text being the kube client's). Returns how many lookups the sessions held.
fn every_session_is_served_as_run_answers_it(
    server: &Server,
    cluster: &Mutex<FakeCluster>,
    module: &Path,
    scenarios: &[Scenario],
    indexes: &[usize],
) -> usize {
    let mut failures = Vec::new();
    let mut lookups = 0;
    for (scenario, index) in scenarios.iter().zip(indexes) {
        let name = &scenario.name;
        let expected = run_answer(scenario, module, false);
        let exchanges = session(scenario);
        let failed_lookups = exchanges
            .iter()
            .any(|(_, r)| matches!(r, SessionResponse::Error { .. }));
        lookups += exchanges.len();
        cluster.lock().unwrap().exchanges = exchanges;
        let served = server.review(
            "validate",
            &format!("ca-{index}"),
            &scenario.request().unwrap(),
        );
        let mut fake = cluster.lock().unwrap();
        if !fake.unexpected.is_empty() || !fake.exchanges.is_empty() {
            failures.push(format!(
                "{name}: unexpected requests {:?}, {} exchanges left",
                fake.unexpected,
                fake.exchanges.len()
            ));
        }
        fake.unexpected.clear();
        fake.exchanges.clear();
        drop(fake);
        let same = if failed_lookups {
            served.allowed == expected.allowed
                && served.code() == expected.code()
                && served.warnings.as_ref().map(Vec::len)
                    == expected.warnings.as_ref().map(Vec::len)
        } else {
            served == expected
        };
        if !same {
            failures.push(format!(
                "{name}: served {}\n  run gives {}",
                served.to_line(),
                expected.to_line()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    lookups
}

/// The policy cuts its warnings to about 120 characters ("..."): what shows of the error
/// must be the start of `text`, at least 30 characters of it.
fn assert_said(scenario: &Scenario, response: &AdmissionResponse, text: &str) {
    let mut texts = response.warnings.clone().unwrap_or_default();
    texts.extend(response.message().map(str::to_string));
    let shows = |shown: &str| {
        let shown = shown.strip_suffix("...").unwrap_or(shown);
        shown.find(&text[..20]).is_some_and(|at| {
            let rest = &shown[at..];
            rest.len() >= 30 && text.starts_with(rest)
        })
    };
    assert!(
        texts.iter().any(|t| shows(t)),
        "{}: no {text:?} in {}",
        scenario.name,
        response.to_line()
    );
}

/// The gates: without the host capability, or the resource undeclared, nothing reaches the
/// cluster and the policy hears policy-server's refusal.
fn gates_keep_lookups_from_the_cluster(
    server: &Server,
    cluster: &Mutex<FakeCluster>,
    scenario: &Scenario,
    index: usize,
) {
    let (first, _) = session(scenario).pop_front().unwrap();
    let CallbackRequestType::KubernetesListResourceNamespace {
        api_version, kind, ..
    } = first
    else {
        panic!("{first:?}");
    };
    let before = cluster.lock().unwrap().requests.len();
    let request = scenario.request().unwrap();
    let denied = server.review("validate", &format!("no-capabilities-{index}"), &request);
    let undeclared = server.review("validate", &format!("no-resources-{index}"), &request);
    assert_eq!(
        cluster.lock().unwrap().requests.len(),
        before,
        "the gates let a request through"
    );
    assert_said(
        scenario,
        &denied,
        "Policy has not been granted access to the 'kubernetes/list_resources_by_namespace' host capability. The violation has been reported.",
    );
    assert_said(
        scenario,
        &undeclared,
        &format!("Policy has not been granted access to Kubernetes {api_version}/{kind} resources. The violation has been reported."),
    );
}

/// No cluster (no kubeconfig, --ignore-kubernetes-connection-failure): policy-evaluator's
/// "not initialized" error reaches the policy.
fn no_cluster_is_not_initialized(
    policies: serde_json::Map<String, Value>,
    scenario: &Scenario,
    index: usize,
) {
    let server = Start::new(Value::Object(policies))
        .arg("--ignore-kubernetes-connection-failure")
        .run();
    let request = scenario.request().unwrap();
    let unreachable = server.review("validate", &format!("ca-{index}"), &request);
    assert_said(
        scenario,
        &unreachable,
        "Callback evaluation failure: kube::Client was not initialized properly",
    );
    assert!(
        server.stderr().contains(
            "Cannot connect to Kubernetes, context aware policies will not work properly"
        ),
        "{}",
        server.stderr()
    );
}

/// Every context-aware scenario, its session served by a fake API server the kube client
/// reaches through KUBECONFIG: the lookups arrive as the session recorded them (discovery
/// first, selectors as given) and the answer is `run`'s with the replayed session (but for
/// the text of failed lookups, which is the kube client's). A policy without
/// `hostCapabilities`, or without the resource in `contextAwareResources`, asks nothing and
/// hears policy-server's refusal; no cluster at all is policy-server's "not initialized".
#[test]
fn context_aware_lookups_reach_the_cluster() {
    let module = annotated_policy();
    let url = module_url(&module);
    let api = FakeApi::start(&module);
    let (context_aware, groups, indexes) = answered_scenarios(true);
    assert!(context_aware.len() > 5);
    let policies = policies(&url, &api.resources, &groups.settings);
    let server = Start::new(Value::Object(policies.clone()))
        .kubeconfig(&api.kubeconfig)
        .run();

    let lookups = every_session_is_served_as_run_answers_it(
        &server,
        &api.cluster,
        &module,
        &context_aware,
        &indexes,
    );
    assert!(lookups > 5, "only {lookups} lookups in the sessions");
    let requests = api.cluster.lock().unwrap().requests.clone();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("/apis/") && !r.contains("namespaces")),
        "no discovery request: {requests:?}"
    );

    let (scenario, index) = context_aware
        .iter()
        .zip(&indexes)
        .find(|(s, _)| !session(s).is_empty())
        .unwrap();
    gates_keep_lookups_from_the_cluster(&server, &api.cluster, scenario, *index);
    drop(server);
    no_cluster_is_not_initialized(policies, scenario, *index);
}
