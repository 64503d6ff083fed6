//! `policy-host push` and `pull` against a real registry: Debian's docker-registry (the CNCF
//! distribution registry, 2.8) on 127.0.0.1, one per test, each with its own config and storage
//! in a temporary folder, stopped when the test ends. What was pushed is read back with skopeo,
//! a client we did not write; the module pulled back is evaluated on a scenario.
//!
//! ANNOTATED_POLICY: the annotated module (default: <workspace>/annotated-policy.wasm).
//! The tests fail, never skip, when docker-registry or skopeo is missing: `.ci/run` installs
//! both (`apt-get install docker-registry skopeo`). The TLS test makes its certificates with the
//! openssl CLI (Debian's ca-certificates depends on it).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use policy_host::metadata::Metadata;
use policy_host::oci::sha256_digest;
use scenario_model::runner::{run_scenario, Evaluator};
use serde_json::Value;

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const WASM_CONFIG: &str = "application/vnd.wasm.config.v1+json";
const WASM_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";
const SCENARIO: &str = "kubeadmconfig-v1beta2-edit-in-use";

// ---------------------------------------------------------------------------------------------
// Fixtures.

fn package_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn annotated_policy() -> PathBuf {
    let module = std::env::var_os("ANNOTATED_POLICY")
        .map(PathBuf::from)
        .unwrap_or_else(|| package_dir().join("../annotated-policy.wasm"));
    assert!(
        module.is_file(),
        "{} not found: build it with `make annotated-policy.wasm` or point ANNOTATED_POLICY at an annotated module",
        module.display()
    );
    module
}

/// A program from PATH (or /usr/bin); a missing one fails the test.
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} not found: the registry tests need docker-registry, skopeo and openssl; \
                 install them (Debian: `apt-get install docker-registry skopeo openssl`; .ci/run \
                 installs docker-registry and skopeo, and openssl comes with ca-certificates)"
            )
        })
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!(
            "policy-host-{label}-{}-{n}-{nanos}",
            std::process::id()
        ));
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("cannot find a free port on 127.0.0.1")
}

/// A docker-registry serving plain HTTP on 127.0.0.1, killed on drop.
struct Registry {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Registry {
    fn start() -> Registry {
        Registry::start_with(None)
    }

    /// `tls`: the certificate chain and key to serve HTTPS with instead of plain HTTP.
    fn start_with(tls: Option<(&Path, &Path)>) -> Registry {
        let program = tool("docker-registry");
        let mut last_log = String::new();
        // The free port can be taken between the probe and the registry's bind: try again.
        for _ in 0..5 {
            let dir = TempDir::new("registry");
            let port = free_port();
            let storage = dir.path().join("storage");
            std::fs::create_dir_all(&storage).unwrap();
            let config = dir.path().join("config.yml");
            let mut yaml = format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.display()
            );
            if let Some((certificate, key)) = tls {
                yaml.push_str(&format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    certificate.display(),
                    key.display()
                ));
            }
            std::fs::write(&config, yaml).unwrap();
            let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
            let child = Command::new(&program)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
            let mut registry = Registry { child, port, dir };
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = registry.child.try_wait() {
                    break;
                }
                let ready = match tls {
                    // It accepts connections once it serves.
                    Some(_) => TcpStream::connect(("127.0.0.1", port)).is_ok(),
                    None => matches!(registry.get("/v2/", None), Some((200, _, _))),
                };
                if ready {
                    return registry;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            last_log = registry.log();
        }
        panic!("docker-registry did not answer on /v2/; its log:\n{last_log}");
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// A kwctl sources file marking this registry insecure (plain HTTP allowed).
    fn sources_file(&self, dir: &Path) -> PathBuf {
        let path = dir.join("sources.yaml");
        std::fs::write(&path, format!("insecure_sources:\n- \"{}\"\n", self.host())).unwrap();
        path
    }

    /// A plain HTTP/1.0 GET: status, headers (lowercase names), body.
    fn get(
        &self,
        path: &str,
        accept: Option<&str>,
    ) -> Option<(u16, BTreeMap<String, String>, Vec<u8>)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let accept = accept
            .map(|a| format!("Accept: {a}\r\n"))
            .unwrap_or_default();
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: {}\r\n{accept}\r\n",
            self.host()
        )
        .ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).ok()?;
        let split = response.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&response[..split]).to_string();
        let mut lines = head.lines();
        let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Some((status, headers, response[split + 4..].to_vec()))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn policy_host(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_policy-host"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("cannot run policy-host")
}

fn skopeo(args: &[&str]) -> Output {
    Command::new(tool("skopeo"))
        .args(args)
        .output()
        .expect("cannot run skopeo")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// Checks a failed run: non-zero exit, `Error: ` and every fragment on stderr.
fn assert_fails(output: &Output, fragments: &[&str]) -> String {
    let stderr = text(&output.stderr);
    assert!(
        !output.status.success(),
        "expected a failure; stdout: {}\nstderr: {stderr}",
        text(&output.stdout)
    );
    assert!(stderr.starts_with("Error: "), "{stderr}");
    for fragment in fragments {
        assert!(stderr.contains(fragment), "{fragment:?} not in: {stderr}");
    }
    stderr
}

/// The manifest annotations kwctl pushes, written out independently of policy-host's code:
/// every metadata annotation on a single line, trimmed, plus the source as the OCI source.
fn expected_annotations(module: &[u8]) -> BTreeMap<String, String> {
    let metadata = Metadata::from_module(module)
        .unwrap()
        .expect("the module is annotated");
    let mut expected: BTreeMap<String, String> = metadata
        .annotations
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, v)| !v.trim_end_matches(['\n', '\r']).contains('\n'))
        .map(|(k, v)| (k, v.trim().to_string()))
        .collect();
    let source = expected["io.kubewarden.policy.source"].clone();
    expected.insert("org.opencontainers.image.source".to_string(), source);
    expected
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn push_inspect_pull_and_evaluate() {
    let registry = Registry::start();
    let work = TempDir::new("push");
    let sources = registry.sources_file(work.path());
    let sources = sources.to_str().unwrap();
    // An empty Docker config: anonymous, whatever the user running the test has logged into.
    let docker_config = work.path().to_str().unwrap();
    let module_path = annotated_policy();
    let module = std::fs::read(&module_path).unwrap();
    let repository = "policies/capi-bootstrap-rollout-policy";
    let reference = format!("{}/{repository}:v0.0.0-test", registry.host());
    let uri = format!("registry://{reference}");

    let started = Instant::now();
    let pushed = policy_host(&[
        "push",
        "--sources-path",
        sources,
        "--docker-config-json-path",
        docker_config,
        module_path.to_str().unwrap(),
        &uri,
    ]);
    let push_time = started.elapsed();
    let stdout = text(&pushed.stdout);
    let stderr = text(&pushed.stderr);
    assert!(
        pushed.status.success(),
        "push failed: {stderr}\nregistry log:\n{}",
        registry.log()
    );
    assert!(
        stderr.contains("annotation io.kubewarden.policy.usage is a multi-line string"),
        "{stderr}"
    );
    let immutable_ref = stdout
        .trim_end()
        .strip_prefix("Policy successfully pushed: ")
        .unwrap_or_else(|| panic!("kwctl's line expected: {stdout:?}"));
    let (name, digest) = immutable_ref.split_once('@').unwrap();
    assert_eq!(name, format!("{}/{repository}", registry.host()));
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );

    // The manifest, as skopeo reads it.
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{reference}"),
    ]);
    assert!(raw.status.success(), "skopeo: {}", text(&raw.stderr));
    let manifest_bytes = raw.stdout;
    assert_eq!(
        sha256_digest(&manifest_bytes),
        digest,
        "the printed digest is not the manifest's"
    );
    let manifest: Value = serde_json::from_slice(&manifest_bytes).unwrap();
    assert_eq!(manifest["schemaVersion"], 2);
    // Like kwctl's (oci-client's), the body carries no mediaType: the registry takes the type
    // from the upload's Content-Type (checked below).
    assert_eq!(manifest.get("mediaType"), None, "{manifest}");
    assert_eq!(manifest["config"]["mediaType"], WASM_CONFIG);
    assert_eq!(manifest["config"]["size"], 2);
    assert_eq!(manifest["config"]["digest"], sha256_digest(b"{}"));
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], WASM_LAYER);
    assert_eq!(layers[0]["digest"], sha256_digest(&module));
    assert_eq!(layers[0]["size"], module.len());
    let annotations: BTreeMap<String, String> =
        serde_json::from_value(manifest["annotations"].clone()).unwrap();
    assert_eq!(annotations, expected_annotations(&module));
    assert!(!annotations.contains_key("io.kubewarden.policy.usage"));
    assert_eq!(
        annotations["org.opencontainers.image.source"],
        "https://github.com/capi-bootstrap-rollout-policy/capi-bootstrap-rollout-policy"
    );
    let keys = ["schemaVersion", "config", "layers", "annotations"];
    assert_eq!(
        manifest.as_object().unwrap().len(),
        keys.len(),
        "{manifest}"
    );

    // What the registry serves it as.
    let (status, headers, body) = registry
        .get(
            &format!("/v2/{repository}/manifests/v0.0.0-test"),
            Some(MANIFEST),
        )
        .expect("the registry answers");
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], MANIFEST);
    assert_eq!(headers["docker-content-digest"], digest);
    assert_eq!(body, manifest_bytes);

    // The config blob, as skopeo reads it: exactly `{}`.
    let config = skopeo(&[
        "inspect",
        "--config",
        "--raw",
        "--tls-verify=false",
        &format!("docker://{reference}"),
    ]);
    assert!(config.status.success(), "skopeo: {}", text(&config.stderr));
    assert_eq!(text(&config.stdout), "{}");

    // The same module pushed again, with kwctl's JSON output, gives the same manifest.
    let again = policy_host(&[
        "push",
        "-o",
        "json",
        "--sources-path",
        sources,
        "--docker-config-json-path",
        docker_config,
        module_path.to_str().unwrap(),
        &format!("registry://{}/{repository}:again", registry.host()),
    ]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let json: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(json, serde_json::json!({ "immutable_ref": immutable_ref }));

    // Pull it back by tag and by digest.
    let pulled_path = work.path().join("pulled.wasm");
    let started = Instant::now();
    let pulled = policy_host(&[
        "pull",
        "--sources-path",
        sources,
        "--docker-config-json-path",
        docker_config,
        &uri,
        "-o",
        pulled_path.to_str().unwrap(),
    ]);
    let pull_time = started.elapsed();
    assert!(
        pulled.status.success(),
        "pull failed: {}",
        text(&pulled.stderr)
    );
    assert!(
        text(&pulled.stderr).contains(&format!("Successfully pulled policy from {uri}")),
        "{}",
        text(&pulled.stderr)
    );
    let pulled_module = std::fs::read(&pulled_path).unwrap();
    assert_eq!(sha256_digest(&pulled_module), sha256_digest(&module));
    let by_digest_path = work.path().join("by-digest.wasm");
    let by_digest = policy_host(&[
        "pull",
        "--sources-path",
        sources,
        &format!("registry://{immutable_ref}"),
        "-o",
        by_digest_path.to_str().unwrap(),
    ]);
    assert!(by_digest.status.success(), "{}", text(&by_digest.stderr));
    assert_eq!(std::fs::read(&by_digest_path).unwrap(), module);

    // The pulled module judges a scenario as the local one does.
    let result = run_scenario(
        &Evaluator::policy_host(env!("CARGO_BIN_EXE_policy-host")),
        &package_dir().join("scenarios").join(SCENARIO),
        &pulled_path,
    );
    assert!(
        result.passed(),
        "{SCENARIO} with the pulled module: {result:?}"
    );

    println!(
        "pushed {} bytes as {immutable_ref} in {} ms; pulled back in {} ms",
        module.len(),
        push_time.as_millis(),
        pull_time.as_millis()
    );
}

#[test]
fn bad_input_is_refused() {
    let registry = Registry::start();
    let work = TempDir::new("bad-input");
    let sources = registry.sources_file(work.path());
    let sources = sources.to_str().unwrap();
    let module = annotated_policy();
    let module = module.to_str().unwrap();
    let host = registry.host();

    // Nothing listens on the port: every transport allowed is tried, each refused.
    let closed = free_port();
    let closed_sources = work.path().join("closed.yaml");
    std::fs::write(
        &closed_sources,
        format!("insecure_sources: [\"127.0.0.1:{closed}\"]\n"),
    )
    .unwrap();
    let output = policy_host(&[
        "push",
        "--sources-path",
        closed_sources.to_str().unwrap(),
        module,
        &format!("registry://127.0.0.1:{closed}/p/x:v1"),
    ]);
    assert_fails(
        &output,
        &[
            &format!("cannot push to registry://127.0.0.1:{closed}/p/x:v1"),
            "over plain HTTP",
            "Connection refused",
        ],
    );

    // Malformed references.
    for uri in [
        format!("registry://{host}/Upper/x:v1"),
        format!("registry://{host}/a b:v1"),
        format!("registry://{host}/x:bad tag"),
        "registry://".to_string(),
        format!("https://{host}/x:v1"),
    ] {
        let output = policy_host(&["push", "--sources-path", sources, module, &uri]);
        assert_fails(&output, &["invalid policy URI"]);
    }

    // An unannotated module (the bare build, or any module without metadata) and a file that
    // is no module at all.
    let bare = work.path().join("bare.wasm");
    std::fs::write(
        &bare,
        wat::parse_str(
            r#"(module (func (export "validate") (param i32) (result i32) i32.const 0))"#,
        )
        .unwrap(),
    )
    .unwrap();
    let uri = format!("registry://{host}/p/bare:v1");
    let output = policy_host(&[
        "push",
        "--sources-path",
        sources,
        bare.to_str().unwrap(),
        &uri,
    ]);
    assert_fails(
        &output,
        &["Cannot push a policy that is not annotated", "bare.wasm"],
    );
    let readme = package_dir().join("README.md");
    let output = policy_host(&[
        "push",
        "--sources-path",
        sources,
        readme.to_str().unwrap(),
        &uri,
    ]);
    assert_fails(&output, &["not a WebAssembly module"]);
    let missing = work.path().join("missing.wasm");
    let output = policy_host(&[
        "push",
        "--sources-path",
        sources,
        missing.to_str().unwrap(),
        &uri,
    ]);
    assert_fails(&output, &["cannot read policy module"]);

    // Plain HTTP only behind the sources file: without it, TLS to the plain HTTP registry fails
    // and the error says how to allow it.
    let output = policy_host(&["push", module, &format!("registry://{host}/p/x:v1")]);
    assert_fails(&output, &["over HTTPS", "insecure_sources", &host]);
    // ... and never for a host off loopback (refused before any connection).
    let remote = work.path().join("remote.yaml");
    std::fs::write(
        &remote,
        "insecure_sources: [\"registry.example.com:5000\"]\n",
    )
    .unwrap();
    let output = policy_host(&[
        "push",
        "--sources-path",
        remote.to_str().unwrap(),
        module,
        "registry://registry.example.com:5000/p/x:v1",
    ]);
    assert_fails(&output, &["only for registries on loopback"]);

    // None of it reached the registry.
    let catalog = registry
        .get("/v2/_catalog", None)
        .expect("the registry answers");
    assert_eq!(catalog.0, 200);
    let catalog: Value = serde_json::from_slice(&catalog.2).unwrap();
    assert_eq!(catalog["repositories"], serde_json::json!([]), "{catalog}");
}

/// An ordinary container image (OCI layout with a tar layer) copied into the registry by
/// skopeo: pull refuses it, and a missing tag, naming the problem.
#[test]
fn pull_refuses_what_is_not_a_policy() {
    let registry = Registry::start();
    let work = TempDir::new("pull");
    let sources = registry.sources_file(work.path());
    let sources = sources.to_str().unwrap();
    let host = registry.host();

    let layout = work.path().join("layout");
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let put = |bytes: &[u8]| -> String {
        let digest = sha256_digest(bytes);
        std::fs::write(blobs.join(&digest["sha256:".len()..]), bytes).unwrap();
        digest
    };
    let layer = vec![0u8; 1024]; // an empty tar archive
    let layer_digest = put(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "rootfs": { "type": "layers", "diff_ids": [layer_digest] },
    }))
    .unwrap();
    let config_digest = put(&config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer_digest,
            "size": layer.len(),
        }],
    }))
    .unwrap();
    let manifest_digest = put(&manifest);
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": MANIFEST,
                "digest": manifest_digest,
                "size": manifest.len(),
                "annotations": { "org.opencontainers.image.ref.name": "v1" },
            }],
        }))
        .unwrap(),
    )
    .unwrap();
    let copied = skopeo(&[
        "copy",
        "--insecure-policy",
        "--dest-tls-verify=false",
        &format!("oci:{}:v1", layout.display()),
        &format!("docker://{host}/images/not-a-policy:v1"),
    ]);
    assert!(
        copied.status.success(),
        "skopeo copy: {}",
        text(&copied.stderr)
    );

    let output_path = work.path().join("out.wasm");
    let output = policy_host(&[
        "pull",
        "--sources-path",
        sources,
        &format!("registry://{host}/images/not-a-policy:v1"),
        "-o",
        output_path.to_str().unwrap(),
    ]);
    assert_fails(
        &output,
        &[
            "is not a Kubewarden policy",
            "application/vnd.oci.image.layer.v1.tar",
            WASM_LAYER,
        ],
    );
    assert!(!output_path.exists(), "nothing is written on failure");

    let output = policy_host(&[
        "pull",
        "--sources-path",
        sources,
        &format!("registry://{host}/images/missing:v1"),
        "-o",
        output_path.to_str().unwrap(),
    ]);
    assert_fails(&output, &["cannot pull", "manifest unknown"]);
    assert!(!output_path.exists());
}

/// A test CA and a server certificate for 127.0.0.1 it signed, made with the openssl CLI:
/// (CA certificate, server certificate, server key).
fn test_pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = tool("openssl");
    let run = |args: &[&str]| {
        let output = Command::new(&openssl)
            .args(args)
            .current_dir(dir)
            .output()
            .expect("cannot run openssl");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            text(&output.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=policy-host test CA",
        ],
    ]
    .concat());
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    ]
    .concat());
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

/// The default transport, TLS, against a registry serving HTTPS with a private CA: refused
/// until the CA is given in the sources file's `source_authorities`, then push and pull work.
#[test]
fn tls_with_a_private_authority() {
    let work = TempDir::new("tls");
    let (ca, certificate, key) = test_pki(work.path());
    let registry = Registry::start_with(Some((&certificate, &key)));
    let module_path = annotated_policy();
    let module = module_path.to_str().unwrap();
    let uri = format!("registry://{}/policies/tls:v1", registry.host());

    let output = policy_host(&["push", module, &uri]);
    assert_fails(&output, &["over HTTPS", "invalid peer certificate"]);

    let sources = work.path().join("sources.yaml");
    std::fs::write(
        &sources,
        format!(
            "source_authorities:\n  \"{}\":\n  - type: Path\n    path: {}\n",
            registry.host(),
            ca.display()
        ),
    )
    .unwrap();
    let sources = sources.to_str().unwrap();
    let pushed = policy_host(&["push", "--sources-path", sources, module, &uri]);
    assert!(
        pushed.status.success(),
        "push over TLS failed: {}\nregistry log:\n{}",
        text(&pushed.stderr),
        registry.log()
    );
    assert!(text(&pushed.stdout).starts_with("Policy successfully pushed: "));
    let pulled = work.path().join("pulled.wasm");
    let output = policy_host(&[
        "pull",
        "--sources-path",
        sources,
        &uri,
        "-o",
        pulled.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        std::fs::read(&pulled).unwrap(),
        std::fs::read(&module_path).unwrap()
    );
}
