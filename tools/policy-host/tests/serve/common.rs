//! What every test of this binary uses: temporary directories, the test PKI, a `policy-host
//! serve` child and its HTTPS client, the scenarios and the answers `policy-host run` gives.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use policy_host::admission::AdmissionResponse;
use policy_host::run::{run, RunOptions, RunReport};
use rustls::pki_types::{CertificateDer, ServerName};
use scenario_model::{discover, Scenario};
use serde_json::{json, Value};

pub const HOST: &str = env!("CARGO_BIN_EXE_policy-host");
/// How long a server may take to compile its policies and answer /readiness.
pub const START_TIMEOUT: Duration = Duration::from_secs(180);
pub const CUSTOM_MESSAGE: &str = "rejected by the cluster's rollout policy";

// ---------------------------------------------------------------------------------------------
// Temporary directories, certificates, servers.

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
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

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA, and a server certificate for 127.0.0.1 it signed.
pub struct Pki {
    pub ca: CertificateDer<'static>,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// A client certificate the CA signed, for mTLS.
    pub client_cert: CertificateDer<'static>,
    pub client_key: Vec<u8>,
}

pub fn pki() -> Pki {
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
pub fn client_config(pki: &Pki, with_certificate: bool) -> Arc<rustls::ClientConfig> {
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

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `policy-host serve` child, killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub stderr: PathBuf,
    pub client: Arc<rustls::ClientConfig>,
    /// The same without a client certificate.
    pub anonymous_client: Arc<rustls::ClientConfig>,
    pub _dir: TempDir,
}

/// How a start ended when the server never became ready.
#[derive(Debug)]
pub struct Refused {
    pub status: Option<ExitStatus>,
    pub stderr: String,
}

pub struct Start<'a> {
    pub policies: Value,
    pub args: Vec<String>,
    /// KUBECONFIG; none: a path that does not exist (no cluster).
    pub kubeconfig: Option<&'a Path>,
    /// `--client-ca-file` with the test CA: clients must show a certificate it signed.
    pub mtls: bool,
}

impl<'a> Start<'a> {
    pub fn new(policies: Value) -> Start<'a> {
        Start {
            policies,
            args: Vec::new(),
            kubeconfig: None,
            mtls: false,
        }
    }

    pub fn mtls(mut self) -> Start<'a> {
        self.mtls = true;
        self
    }

    pub fn arg(mut self, arg: &str) -> Start<'a> {
        self.args.push(arg.to_string());
        self
    }

    pub fn kubeconfig(mut self, path: &'a Path) -> Start<'a> {
        self.kubeconfig = Some(path);
        self
    }

    pub fn run(self) -> Server {
        self.try_run()
            .unwrap_or_else(|refused| panic!("the server did not start: {refused:?}"))
    }

    pub fn try_run(self) -> Result<Server, Refused> {
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
pub fn readiness_status(port: u16) -> Option<u16> {
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
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn parse(bytes: &[u8]) -> Option<HttpResponse> {
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

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
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
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// One HTTPS request on a connection of its own.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> HttpResponse {
        self.request_as(self.client.clone(), method, path, content_type, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn request_as(
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

    pub fn post_json(&self, path: &str, body: &Value) -> HttpResponse {
        self.request(
            "POST",
            path,
            Some("application/json"),
            body.to_string().as_bytes(),
        )
    }

    /// POST /validate/{id} with an AdmissionReview of `request`: the AdmissionResponse.
    pub fn review(&self, route: &str, policy_id: &str, request: &Value) -> AdmissionResponse {
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

pub fn scenarios() -> Vec<Scenario> {
    let root = e2e_tests::scenarios();
    let scenarios: Vec<Scenario> = discover(&root)
        .unwrap()
        .iter()
        .map(|dir| Scenario::load(dir).unwrap())
        .collect();
    assert!(!scenarios.is_empty(), "no scenario in {}", root.display());
    scenarios
}

pub fn settings_of(scenario: &Scenario) -> Value {
    scenario.spec.settings.clone().unwrap_or_else(|| json!({}))
}

pub fn module_url(module: &Path) -> String {
    format!("file://{}", module.canonicalize().unwrap().display())
}

/// What `policy-host run` answers (the same code, in this process).
pub fn run_answer(scenario: &Scenario, module: &Path, raw: bool) -> AdmissionResponse {
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
pub struct SettingsGroups {
    pub settings: Vec<Value>,
}

impl SettingsGroups {
    pub fn new() -> SettingsGroups {
        SettingsGroups {
            settings: Vec::new(),
        }
    }

    pub fn index(&mut self, settings: &Value) -> usize {
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
pub fn answered_scenarios(context_aware: bool) -> (Vec<Scenario>, SettingsGroups, Vec<usize>) {
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

pub fn status_message(response: &AdmissionResponse) -> Option<&str> {
    response.message()
}
