//! `policy-host serve`, the binary of this package, started as policy-server is (the same
//! flags, a policies.yml, a TLS certificate made here) and asked over HTTPS what `policy-host
//! run` answers: every scenario of e2e-tests/scenarios, in protect mode, in monitor mode and
//! with a custom rejection message; the audit and raw routes; unknown policies and bodies that
//! are no AdmissionReview; guests that trap or loop; context-aware lookups answered by a fake
//! API server through a kubeconfig; settings and modules refused at start.
//!
//! Every server listens on 127.0.0.1 and is killed when its test ends.

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e_tests::annotated_policy;
use policy_host::admission::AdmissionResponse;
use policy_host::callbacks::{CallbackRequestType, Exchange, Response as SessionResponse};
use policy_host::engine::EngineOptions;
use policy_host::metadata::{set_custom_section, Metadata, METADATA_SECTION};
use policy_host::run::{run, RunOptions, RunReport};
use rustls::pki_types::{CertificateDer, ServerName};
use scenario_model::{discover, Scenario};
use serde_json::{json, Value};

const HOST: &str = env!("CARGO_BIN_EXE_policy-host");
/// How long a server may take to compile its policies and answer /readiness.
const START_TIMEOUT: Duration = Duration::from_secs(180);
const CUSTOM_MESSAGE: &str = "rejected by the cluster's rollout policy";

// ---------------------------------------------------------------------------------------------
// Temporary directories, certificates, servers.

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "policy-host-serve-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA, and a server certificate for 127.0.0.1 it signed.
struct Pki {
    ca: CertificateDer<'static>,
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
    /// A client certificate the CA signed, for mTLS.
    client_cert: CertificateDer<'static>,
    client_key: Vec<u8>,
}

fn pki() -> Pki {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "policy-host serve test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
    let client_key = rcgen::KeyPair::generate().unwrap();
    let client_cert = rcgen::CertificateParams::new(vec!["kube-apiserver".to_string()])
        .unwrap()
        .signed_by(&client_key, &ca)
        .unwrap();
    Pki {
        ca: ca.der().clone(),
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        client_cert: client_cert.der().clone(),
        client_key: client_key.serialize_der(),
    }
}

/// A client that trusts the test CA, with the CA's client certificate or without one.
fn client_config(pki: &Pki, with_certificate: bool) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = if with_certificate {
        let key = rustls::pki_types::PrivatePkcs8KeyDer::from(pki.client_key.clone());
        builder
            .with_client_auth_cert(vec![pki.client_cert.clone()], key.into())
            .unwrap()
    } else {
        builder.with_no_client_auth()
    };
    Arc::new(config)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `policy-host serve` child, killed on drop.
struct Server {
    child: Child,
    port: u16,
    stderr: PathBuf,
    client: Arc<rustls::ClientConfig>,
    /// The same without a client certificate.
    anonymous_client: Arc<rustls::ClientConfig>,
    _dir: TempDir,
}

/// How a start ended when the server never became ready.
#[derive(Debug)]
struct Refused {
    status: Option<ExitStatus>,
    stderr: String,
}

struct Start<'a> {
    policies: Value,
    args: Vec<String>,
    /// KUBECONFIG; none: a path that does not exist (no cluster).
    kubeconfig: Option<&'a Path>,
    /// `--client-ca-file` with the test CA: clients must show a certificate it signed.
    mtls: bool,
}

impl<'a> Start<'a> {
    fn new(policies: Value) -> Start<'a> {
        Start {
            policies,
            args: Vec::new(),
            kubeconfig: None,
            mtls: false,
        }
    }

    fn mtls(mut self) -> Start<'a> {
        self.mtls = true;
        self
    }

    fn arg(mut self, arg: &str) -> Start<'a> {
        self.args.push(arg.to_string());
        self
    }

    fn kubeconfig(mut self, path: &'a Path) -> Start<'a> {
        self.kubeconfig = Some(path);
        self
    }

    fn run(self) -> Server {
        self.try_run()
            .unwrap_or_else(|refused| panic!("the server did not start: {refused:?}"))
    }

    fn try_run(self) -> Result<Server, Refused> {
        let dir = TempDir::new("server");
        let pki = pki();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::write(&cert, &pki.cert_pem).unwrap();
        std::fs::write(&key, &pki.key_pem).unwrap();
        // JSON is YAML: policies.yml as the controller would write it, in flow style.
        let policies = dir.path().join("policies.yml");
        std::fs::write(
            &policies,
            serde_json::to_string_pretty(&self.policies).unwrap(),
        )
        .unwrap();
        let stderr = dir.path().join("stderr.log");
        let port = free_port();
        let readiness = free_port();
        let kubeconfig = self
            .kubeconfig
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.path().join("no-kubeconfig"));
        let mut command = Command::new(HOST);
        command
            .arg("serve")
            .arg("--policies")
            .arg(&policies)
            .args(["--addr", "127.0.0.1", "--port", &port.to_string()])
            .args(["--readiness-probe-port", &readiness.to_string()])
            .arg("--cert-file")
            .arg(&cert)
            .arg("--key-file")
            .arg(&key)
            .arg("--policies-download-dir")
            .arg(dir.path())
            .args(&self.args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        for (name, _) in std::env::vars() {
            if name.starts_with("KUBEWARDEN_") {
                command.env_remove(name);
            }
        }
        if self.mtls {
            let ca = dir.path().join("client-ca.crt");
            std::fs::write(&ca, &pki.ca_pem).unwrap();
            command.arg("--client-ca-file").arg(&ca);
        }
        let child = command.spawn().expect("cannot start policy-host serve");
        let mut server = Server {
            child,
            port,
            stderr,
            client: client_config(&pki, self.mtls),
            anonymous_client: client_config(&pki, false),
            _dir: dir,
        };
        let started = Instant::now();
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                return Err(Refused {
                    status: Some(status),
                    stderr: server.stderr(),
                });
            }
            if readiness_status(readiness) == Some(200) {
                return Ok(server);
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(Refused {
                    status: None,
                    stderr: server.stderr(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// GET /readiness over plain HTTP: its status, or none while nothing listens.
fn readiness_status(port: u16) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /readiness HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).ok()?;
    HttpResponse::parse(&bytes).map(|r| r.status)
}

#[derive(Debug)]
struct HttpResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpResponse {
    fn parse(bytes: &[u8]) -> Option<HttpResponse> {
        let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = std::str::from_utf8(&bytes[..end]).ok()?;
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut body = bytes[end + 4..].to_vec();
        if headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
        {
            body = dechunk(&body)?;
        }
        Some(HttpResponse {
            status,
            headers,
            body,
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..line_end]).ok()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

impl Server {
    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// One HTTPS request on a connection of its own.
    fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> HttpResponse {
        self.request_as(self.client.clone(), method, path, content_type, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn request_as(
        &self,
        client: Arc<rustls::ClientConfig>,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> std::io::Result<HttpResponse> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let name = ServerName::IpAddress("127.0.0.1".parse::<std::net::IpAddr>().unwrap().into());
        let connection = rustls::ClientConnection::new(client, name).unwrap();
        let mut tls = rustls::StreamOwned::new(connection, tcp);
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.port,
            body.len()
        );
        if let Some(content_type) = content_type {
            head.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        head.push_str("\r\n");
        tls.write_all(head.as_bytes())?;
        tls.write_all(body)?;
        tls.flush()?;
        let mut bytes = Vec::new();
        match tls.read_to_end(&mut bytes) {
            Ok(_) => {}
            // A peer that closes without close_notify: the response is complete anyway.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !bytes.is_empty() => {}
            Err(e) => return Err(e),
        }
        HttpResponse::parse(&bytes).ok_or_else(|| {
            std::io::Error::other(format!(
                "not an HTTP response: {}",
                String::from_utf8_lossy(&bytes)
            ))
        })
    }

    fn post_json(&self, path: &str, body: &Value) -> HttpResponse {
        self.request(
            "POST",
            path,
            Some("application/json"),
            body.to_string().as_bytes(),
        )
    }

    /// POST /validate/{id} with an AdmissionReview of `request`: the AdmissionResponse.
    fn review(&self, route: &str, policy_id: &str, request: &Value) -> AdmissionResponse {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        });
        let response = self.post_json(&format!("/{route}/{policy_id}"), &review);
        assert_eq!(
            response.status,
            200,
            "/{route}/{policy_id}: {}\n{}",
            response.text(),
            self.stderr()
        );
        let body = response.json();
        assert_eq!(body["apiVersion"], "admission.k8s.io/v1", "{body}");
        assert_eq!(body["kind"], "AdmissionReview", "{body}");
        serde_json::from_value(body["response"].clone()).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Our own child, by its handle; a kill that races with its exit is harmless.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios and the answers `run` gives.

fn scenarios() -> Vec<Scenario> {
    let root = e2e_tests::scenarios();
    let scenarios: Vec<Scenario> = discover(&root)
        .unwrap()
        .iter()
        .map(|dir| Scenario::load(dir).unwrap())
        .collect();
    assert!(!scenarios.is_empty(), "no scenario in {}", root.display());
    scenarios
}

fn settings_of(scenario: &Scenario) -> Value {
    scenario.spec.settings.clone().unwrap_or_else(|| json!({}))
}

fn module_url(module: &Path) -> String {
    format!("file://{}", module.canonicalize().unwrap().display())
}

/// What `policy-host run` answers (the same code, in this process).
fn run_answer(scenario: &Scenario, module: &Path, raw: bool) -> AdmissionResponse {
    let options = RunOptions {
        module: module.to_path_buf(),
        request_path: scenario.request_path().display().to_string(),
        settings_json: Some(settings_of(scenario).to_string()),
        allow_context_aware: scenario.spec.context_aware,
        replay_session: scenario.session_path(),
        raw,
        ..RunOptions::default()
    };
    run(&options, &mut RunReport::default())
        .unwrap_or_else(|e| panic!("{}: run failed: {e:#}", scenario.name))
}

/// The policy ids of a settings value: one entry per distinct settings.
struct SettingsGroups {
    settings: Vec<Value>,
}

impl SettingsGroups {
    fn new() -> SettingsGroups {
        SettingsGroups {
            settings: Vec::new(),
        }
    }

    fn index(&mut self, settings: &Value) -> usize {
        match self.settings.iter().position(|s| s == settings) {
            Some(index) => index,
            None => {
                self.settings.push(settings.clone());
                self.settings.len() - 1
            }
        }
    }
}

/// The scenarios that get an answer (no settings error), context-aware ones or the others,
/// with the index of each one's settings among the distinct settings (a policy id each).
fn answered_scenarios(context_aware: bool) -> (Vec<Scenario>, SettingsGroups, Vec<usize>) {
    let answered: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| s.spec.context_aware == context_aware && s.spec.expect.settings_error.is_none())
        .collect();
    let mut groups = SettingsGroups::new();
    let indexes = answered
        .iter()
        .map(|s| groups.index(&settings_of(s)))
        .collect();
    (answered, groups, indexes)
}

fn status_message(response: &AdmissionResponse) -> Option<&str> {
    response.message()
}

// ---------------------------------------------------------------------------------------------

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
    let mut policies = serde_json::Map::new();
    for (index, settings) in groups.settings.iter().enumerate() {
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
    let server = Start::new(Value::Object(policies))
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
        let monitored = AdmissionResponse {
            allowed: true,
            patch_type: None,
            patch: None,
            status: None,
            ..expected.clone()
        };
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
            let status = message.status.clone().unwrap_or_default();
            let causes = status
                .details
                .as_ref()
                .and_then(|d| d.get("causes"))
                .cloned()
                .unwrap_or(Value::Null);
            let cause = json!([{
                "reason": null,
                "message": status_message(&expected).unwrap_or_default(),
                "field": null
            }]);
            let same_rest = message.allowed == expected.allowed
                && message.warnings == expected.warnings
                && message.audit_annotations == expected.audit_annotations
                && message.uid == expected.uid
                && status.code == expected.code();
            if status.message.as_deref() != Some(CUSTOM_MESSAGE) || causes != cause || !same_rest {
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

    // One log line per request, with what the Go test needs to read the server's log.
    let log = server.stderr();
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

// ---------------------------------------------------------------------------------------------
// Guests that fail.

/// An annotated waPC guest whose settings are valid and whose `validate` runs `body`.
fn failing_guest(body: &str) -> Vec<u8> {
    let wat = format!(
        r#"(module
  (import "wapc" "__guest_response" (func $respond (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{{\"valid\":true}}")
  (func (export "wapc_init"))
  (func (export "__guest_call") (param $op_len i32) (param $len i32) (result i32)
    (if (i32.eq (local.get $op_len) (i32.const 17))
      (then (call $respond (i32.const 16) (i32.const 14)) (return (i32.const 1))))
    {body}
    (i32.const 0)))"#
    );
    let module = wat::parse_str(&wat).unwrap();
    let metadata = json!({"protocolVersion": "v1", "rules": [], "mutating": false});
    set_custom_section(&module, METADATA_SECTION, metadata.to_string().as_bytes()).unwrap()
}

/// A trap and a deadline hit are answers (allowed: false, code 500), the same as `run`'s; in
/// monitor mode they are allowed, as policy-server allows them.
#[test]
fn guest_failures_and_timeouts_are_500_answers() {
    let dir = TempDir::new("guests");
    let looping = dir.path().join("loop.wasm");
    let trapping = dir.path().join("trap.wasm");
    std::fs::write(&looping, failing_guest("(loop $forever (br $forever))")).unwrap();
    std::fs::write(&trapping, failing_guest("unreachable")).unwrap();
    let scenario = scenarios()
        .into_iter()
        .find(|s| !s.spec.context_aware)
        .unwrap();
    let request = scenario.request().unwrap();
    let expected = |module: &Path| {
        let options = RunOptions {
            module: module.to_path_buf(),
            request_path: scenario.request_path().display().to_string(),
            engine: EngineOptions {
                timeout: Some(Duration::from_secs(1)),
                cache: true,
            },
            ..RunOptions::default()
        };
        run(&options, &mut RunReport::default()).unwrap()
    };
    let server = Start::new(json!({
        "loop": {"module": module_url(&looping), "timeoutEvalSeconds": 1},
        "trap": {"module": module_url(&trapping)},
        "loop-monitored": {"module": module_url(&looping), "timeoutEvalSeconds": 1, "policyMode": "monitor"},
    }))
    .arg("--ignore-kubernetes-connection-failure")
    .arg("--policy-timeout")
    .arg("30")
    .run();

    let started = Instant::now();
    let timed_out = server.review("validate", "loop", &request);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "timeoutEvalSeconds: 1 ignored"
    );
    assert_eq!(timed_out, expected(&looping));
    assert_eq!(timed_out.code(), Some(500));
    assert_eq!(
        timed_out.message(),
        Some("Policy execution interrupted because it exceeded the allowed execution time")
    );
    let trapped = server.review("validate", "trap", &request);
    assert_eq!(trapped, expected(&trapping));
    assert_eq!(trapped.code(), Some(500));
    assert!(trapped
        .message()
        .unwrap()
        .starts_with("internal server error: "));
    let monitored = server.review("validate", "loop-monitored", &request);
    assert!(
        monitored.allowed && monitored.status.is_none(),
        "{}",
        monitored.to_line()
    );
}

// ---------------------------------------------------------------------------------------------
// Refusals at start.

fn refused(start: Start) -> Refused {
    match start.try_run() {
        Ok(server) => panic!("the server started:\n{}", server.stderr()),
        Err(refused) => refused,
    }
}

fn assert_refused(refused: &Refused, error: &str) {
    assert_eq!(
        refused.status.and_then(|s| s.code()),
        Some(1),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(&format!("Error: {error}")),
        "expected Error: {error}\nstderr:\n{}",
        refused.stderr
    );
}

/// Settings the policy refuses end the start with policy-server's message, as `run` refuses
/// them; so do modules policy-server would not load, and flags and files it refuses.
#[test]
fn refusals_at_start() {
    let module = annotated_policy();
    let url = module_url(&module);
    let refusing: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| s.spec.expect.settings_error.is_some())
        .collect();
    assert!(!refusing.is_empty(), "no scenario with settingsError");
    for scenario in &refusing {
        let fragment = scenario.spec.expect.settings_error.as_deref().unwrap();
        let outcome = refused(
            Start::new(json!({"p": {"module": url, "settings": settings_of(scenario)}}))
                .arg("--ignore-kubernetes-connection-failure"),
        );
        assert_refused(&outcome, "Policy settings are invalid: ");
        assert!(
            outcome.stderr.contains(fragment),
            "{}: {}",
            scenario.name,
            outcome.stderr
        );
    }

    let dir = TempDir::new("refusals");
    let unannotated = dir.path().join("unannotated.wasm");
    std::fs::write(&unannotated, wat::parse_str("(module)").unwrap()).unwrap();
    let ignore = "--ignore-kubernetes-connection-failure";
    assert_refused(
        &refused(Start::new(json!({"p": {"module": module_url(&unannotated)}})).arg(ignore)),
        "Policy is missing protocol version, which is required for KubewardenWapc execution mode",
    );
    assert_refused(
        &refused(
            Start::new(json!({"p": {"module": "registry://ghcr.io/example/policy:v1"}}))
                .arg(ignore),
        ),
        "policy-host serve loads local modules only",
    );
    assert_refused(
        &refused(Start::new(json!({"a/b": {"module": url}})).arg(ignore)),
        "policy name 'a/b' contains a '/' character",
    );
    assert_refused(
        &refused(Start::new(json!({"p": {"module": url, "policyMode": "enforce"}})).arg(ignore)),
        "error while loading policies from",
    );
    assert_refused(
        &refused(
            Start::new(json!({"p": {"module": url, "hostCapabilities": ["kubernetes"]}})).arg(ignore),
        ),
        "bootstrap failure: invalid hostCapabilities pattern for policy p: invalid pattern \"kubernetes\": not a complete capability path",
    );
    // Without --ignore-kubernetes-connection-failure, no cluster is an error, as in
    // policy-server, whatever the policies.
    let outcome = refused(Start::new(json!({"p": {"module": url}})));
    assert_refused(
        &outcome,
        "Cannot connect to Kubernetes, context aware policies would not work properly",
    );
    assert!(
        outcome
            .stderr
            .contains("Cannot connect to Kubernetes cluster: "),
        "{}",
        outcome.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Context-aware lookups, answered by a fake API server.

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
    let metadata = Metadata::from_module(&std::fs::read(&module).unwrap())
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

    let (context_aware, groups, indexes) = answered_scenarios(true);
    assert!(context_aware.len() > 5);
    let mut policies = serde_json::Map::new();
    for (index, settings) in groups.settings.iter().enumerate() {
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
    let server = Start::new(Value::Object(policies.clone()))
        .kubeconfig(&kubeconfig)
        .run();

    let mut failures = Vec::new();
    let mut lookups = 0;
    for (scenario, index) in context_aware.iter().zip(&indexes) {
        let name = &scenario.name;
        let expected = run_answer(scenario, &module, false);
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
    assert!(lookups > 5, "only {lookups} lookups in the sessions");
    let requests = cluster.lock().unwrap().requests.clone();
    assert!(
        requests
            .iter()
            .any(|r| r.starts_with("/apis/") && !r.contains("namespaces")),
        "no discovery request: {requests:?}"
    );

    // The gates: nothing reaches the cluster, the policy hears policy-server's refusal.
    let (scenario, index) = context_aware
        .iter()
        .zip(&indexes)
        .find(|(s, _)| !session(s).is_empty())
        .unwrap();
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
    // The policy cuts its warnings to about 120 characters ("..."): what shows of the error
    // must be the start of `text`, at least 30 characters of it.
    let said = |response: &AdmissionResponse, text: &str| {
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
    };
    said(
        &denied,
        "Policy has not been granted access to the 'kubernetes/list_resources_by_namespace' host capability. The violation has been reported.",
    );
    said(
        &undeclared,
        &format!("Policy has not been granted access to Kubernetes {api_version}/{kind} resources. The violation has been reported."),
    );
    drop(server);

    // No cluster (no kubeconfig, --ignore-kubernetes-connection-failure): policy-evaluator's
    // "not initialized" error reaches the policy.
    let server = Start::new(Value::Object(policies))
        .arg("--ignore-kubernetes-connection-failure")
        .run();
    let unreachable = server.review("validate", &format!("ca-{index}"), &request);
    said(
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
