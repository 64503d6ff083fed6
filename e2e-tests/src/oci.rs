//! `policy-host push` and `pull`: a policy module as an OCI artifact, laid out as `kwctl push`
//! lays it out (kwctl `src/push.rs`, policy-fetcher `src/registry/mod.rs`) and on the same
//! crate, `oci-client`:
//!
//! - an image manifest (`application/vnd.oci.image.manifest.v1+json`, schemaVersion 2, no
//!   `mediaType` field in the body, serialized by oci-client as canonical JSON);
//! - a config blob of exactly the bytes `{}`, media type `application/vnd.wasm.config.v1+json`;
//! - one layer, the annotated module, media type `application/vnd.wasm.content.layer.v1+wasm`;
//! - manifest annotations: the module's metadata annotations that fit on one line (trimmed),
//!   plus `org.opencontainers.image.source` copied from `io.kubewarden.policy.source`.
//!
//! Transport follows kwctl's sources file (`--sources-path`): TLS with the system's roots plus
//! the file's `source_authorities`; a host listed in `insecure_sources` is tried with TLS, then
//! TLS without verification, then plain HTTP. Unlike kwctl, an insecure source must be on
//! loopback (127.0.0.0/8, ::1, localhost): anything else is refused, so plain HTTP never leaves
//! the machine. Credentials come from Docker's config.json, as kwctl's do.
//!
//! oci-client is async; each call builds a current-thread tokio runtime and blocks on it, so
//! the rest of the host stays synchronous.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use oci_client::client::{
    Certificate, CertificateEncoding, Client, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::manifest::{OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::metadata::{Metadata, METADATA_SECTION};

pub const MANIFEST_MEDIA_TYPE: &str = oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
pub const WASM_LAYER_MEDIA_TYPE: &str = oci_client::manifest::WASM_LAYER_MEDIA_TYPE;
pub const WASM_CONFIG_MEDIA_TYPE: &str = oci_client::manifest::WASM_CONFIG_MEDIA_TYPE;
/// The config blob kwctl pushes.
pub const WASM_CONFIG: &[u8] = b"{}";
pub const POLICY_SOURCE_ANNOTATION: &str = "io.kubewarden.policy.source";
pub const OCI_SOURCE_ANNOTATION: &str = oci_client::annotations::ORG_OPENCONTAINERS_IMAGE_SOURCE;

const WASM_MAGIC: &[u8] = b"\0asm";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Sources: kwctl's sources.yaml.

/// kwctl's sources file: `insecure_sources` (list of `host[:port]`) and `source_authorities`
/// (`host[:port]` -> list of `{type: Path, path: ...}` or `{type: Data, data: PEM}`).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub insecure_sources: BTreeSet<String>,
    pub source_authorities: BTreeMap<String, Vec<Certificate>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawSources {
    insecure_sources: BTreeSet<String>,
    source_authorities: BTreeMap<String, Vec<RawAuthority>>,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum RawAuthority {
    Path { path: PathBuf },
    Data { data: String },
}

impl Sources {
    pub fn from_file(path: &Path) -> Result<Sources> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read sources file {}", path.display()))?;
        Sources::from_yaml(&text)
            .with_context(|| format!("invalid sources file {}", path.display()))
    }

    pub fn from_yaml(text: &str) -> Result<Sources> {
        let raw: RawSources = if text.trim().is_empty() {
            RawSources::default()
        } else {
            yaml_serde::from_str(text)?
        };
        let mut source_authorities = BTreeMap::new();
        for (host, authorities) in raw.source_authorities {
            let mut certificates = Vec::new();
            for authority in authorities {
                let data = match authority {
                    RawAuthority::Path { path } => std::fs::read(&path).with_context(|| {
                        format!("cannot read certificate {} for {host}", path.display())
                    })?,
                    RawAuthority::Data { data } => data.into_bytes(),
                };
                certificates.push(certificate(data));
            }
            source_authorities.insert(host, certificates);
        }
        Ok(Sources {
            insecure_sources: raw.insecure_sources,
            source_authorities,
        })
    }
}

fn certificate(data: Vec<u8>) -> Certificate {
    let pem = data
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .is_some_and(|start| data[start..].starts_with(b"-----BEGIN"));
    Certificate {
        encoding: if pem {
            CertificateEncoding::Pem
        } else {
            CertificateEncoding::Der
        },
        data,
    }
}

/// Where a registry is reached and with which credentials.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    pub sources: Sources,
    /// A folder holding Docker's `config.json` (kwctl's `--docker-config-json-path`); without
    /// it, `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`.
    pub docker_config_dir: Option<PathBuf>,
}

// ---------------------------------------------------------------------------------------------
// References.

/// A `registry://HOST[:PORT]/REPOSITORY[:TAG]` URI (the scheme may be left out, as kwctl
/// allows) as an OCI reference; no tag means `latest`.
pub fn parse_uri(uri: &str) -> Result<Reference> {
    let image = match uri.split_once("://") {
        Some(("registry", rest)) => rest,
        Some((scheme, _)) => bail!(
            "invalid policy URI {uri:?}: scheme {scheme}:// is not supported, use registry://HOST[:PORT]/REPOSITORY[:TAG]"
        ),
        None => uri,
    };
    let reference = Reference::from_str(image).map_err(|e| {
        anyhow!("invalid policy URI {uri:?}: {e}; expected registry://HOST[:PORT]/REPOSITORY[:TAG]")
    })?;
    Ok(reference)
}

/// `true` for a registry `host[:port]` on loopback: localhost, 127.0.0.0/8 or [::1].
pub fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        match rest.split_once(']') {
            Some((host, _)) => host,
            None => return false,
        }
    } else {
        registry.rsplit_once(':').map_or(registry, |(host, _)| host)
    };
    host.eq_ignore_ascii_case("localhost")
        || Ipv4Addr::from_str(host).is_ok_and(|ip| ip.is_loopback())
        || Ipv6Addr::from_str(host).is_ok_and(|ip| ip.is_loopback())
}

/// The immutable reference kwctl prints: `REGISTRY/REPOSITORY@DIGEST`, the digest taken from
/// the manifest URL the registry answered the push with.
fn immutable_ref(reference: &Reference, manifest_url: &str) -> Result<String> {
    let digest = manifest_url
        .rsplit_once('/')
        .map(|(_, digest)| digest)
        .ok_or_else(|| {
            anyhow!("cannot find the manifest digest in the registry's answer {manifest_url:?}")
        })?;
    check_digest(digest)
        .with_context(|| format!("the registry answered the push with {manifest_url:?}"))?;
    Ok(format!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    ))
}

fn check_digest(digest: &str) -> Result<()> {
    let (algorithm, hex) = digest
        .split_once(':')
        .ok_or_else(|| anyhow!("invalid digest {digest:?}"))?;
    let length = match algorithm {
        "sha256" => 64,
        "sha512" => 128,
        other => bail!("unknown digest algorithm {other:?} in {digest:?}"),
    };
    if hex.len() != length || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("invalid {algorithm} digest {digest:?}");
    }
    Ok(())
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    let mut out = String::from("sha256:");
    for byte in Sha256::digest(bytes) {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Annotations.

/// The manifest annotations kwctl derives from a module's metadata annotations
/// (`build_oci_annotations`): multi-line values are dropped (the OCI spec has no room for
/// them), the others trimmed, and `io.kubewarden.policy.source` copied to
/// `org.opencontainers.image.source` unless that is already set. Returns the annotations and
/// the names of those dropped.
pub fn oci_annotations(
    annotations: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut kept = BTreeMap::new();
    let mut dropped = Vec::new();
    for (key, value) in annotations {
        if value.lines().count() <= 1 {
            kept.insert(key.clone(), value.trim().to_string());
        } else {
            dropped.push(key.clone());
        }
    }
    if let Some(source) = kept.get(POLICY_SOURCE_ANNOTATION).cloned() {
        kept.entry(OCI_SOURCE_ANNOTATION.to_string())
            .or_insert(source);
    }
    (kept, dropped)
}

// ---------------------------------------------------------------------------------------------
// Transport.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Tls,
    TlsUnverified,
    Http,
}

impl Transport {
    fn describe(self) -> &'static str {
        match self {
            Transport::Tls => "over HTTPS",
            Transport::TlsUnverified => "over HTTPS without certificate verification",
            Transport::Http => "over plain HTTP",
        }
    }
}

/// The transports tried, in order, for a registry `host[:port]`.
fn transports(registry: &str, sources: &Sources) -> Result<Vec<Transport>> {
    if !sources.insecure_sources.contains(registry) {
        return Ok(vec![Transport::Tls]);
    }
    if !is_loopback(registry) {
        bail!(
            "{registry} is listed in insecure_sources, but policy-host allows plain HTTP and unverified TLS only for registries on loopback (localhost, 127.0.0.1, [::1]); remove it from insecure_sources to use TLS"
        );
    }
    Ok(vec![
        Transport::Tls,
        Transport::TlsUnverified,
        Transport::Http,
    ])
}

fn client(transport: Transport, registry: &str, sources: &Sources) -> Result<Client> {
    let config = ClientConfig {
        protocol: match transport {
            Transport::Http => ClientProtocol::Http,
            Transport::Tls | Transport::TlsUnverified => ClientProtocol::Https,
        },
        accept_invalid_certificates: transport == Transport::TlsUnverified,
        extra_root_certificates: sources
            .source_authorities
            .get(registry)
            .cloned()
            .unwrap_or_default(),
        connect_timeout: Some(CONNECT_TIMEOUT),
        // An index is not a policy: refuse it rather than pick a platform.
        platform_resolver: None,
        ..ClientConfig::default()
    };
    // Client::new would fall back to a default client on a bad certificate; say so instead.
    Client::try_from(config)
        .map_err(|e| anyhow!(e).context(format!("cannot set up a registry client for {registry}")))
}

/// kwctl's credentials: Docker's config.json (and its credential helpers), anonymous when it
/// has nothing for this registry.
fn auth(registry: &str, options: &RegistryOptions) -> RegistryAuth {
    let credential = match &options.docker_config_dir {
        Some(dir) => std::fs::File::open(dir.join("config.json"))
            .map_err(|_| ())
            .and_then(|file| {
                docker_credential::get_credential_from_reader(file, registry).map_err(|_| ())
            }),
        None => docker_credential::get_credential(registry).map_err(|_| ()),
    };
    match credential {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            RegistryAuth::Basic(user, password)
        }
        Ok(docker_credential::DockerCredential::IdentityToken(_)) | Err(()) => {
            RegistryAuth::Anonymous
        }
    }
}

/// Why one attempt failed: the transport (try the next one) or the content (stop).
enum Failure {
    Transport(anyhow::Error),
    Content(anyhow::Error),
}

impl From<oci_client::errors::OciDistributionError> for Failure {
    fn from(error: oci_client::errors::OciDistributionError) -> Failure {
        Failure::Transport(anyhow::Error::new(error))
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Runs `operation` with each transport allowed for `reference`'s registry until one works.
fn with_transports<T, F, Fut>(
    action: &str,
    uri: &str,
    reference: &Reference,
    options: &RegistryOptions,
    operation: F,
) -> Result<T>
where
    F: Fn(Client, RegistryAuth) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, Failure>>,
{
    let registry = reference.registry();
    let transports = transports(registry, &options.sources)?;
    let runtime = runtime()?;
    let mut failures = Vec::new();
    for transport in transports {
        let client = client(transport, registry, &options.sources)?;
        match runtime.block_on(operation(client, auth(registry, options))) {
            Ok(value) => return Ok(value),
            Err(Failure::Content(error)) => return Err(error),
            Err(Failure::Transport(error)) => {
                failures.push(format!("{}: {error:#}", transport.describe()))
            }
        }
    }
    let mut message = format!("cannot {action} {uri}");
    if let [only] = failures.as_slice() {
        message.push_str(&format!(" {only}"));
    } else {
        for failure in &failures {
            message.push_str(&format!("\n  {failure}"));
        }
    }
    if !options.sources.insecure_sources.contains(registry) && is_loopback(registry) {
        message.push_str(&format!(
            "\n(a registry on loopback that speaks plain HTTP must be listed in the insecure_sources of a --sources-path file: `insecure_sources: [\"{registry}\"]`)"
        ));
    }
    Err(anyhow!(message))
}

// ---------------------------------------------------------------------------------------------
// Push.

#[derive(Clone, Debug)]
pub struct PushOptions {
    /// The annotated policy module.
    pub module: PathBuf,
    /// `registry://HOST[:PORT]/REPOSITORY[:TAG]`.
    pub uri: String,
    pub registry: RegistryOptions,
}

#[derive(Clone, Debug)]
pub struct Pushed {
    /// `HOST[:PORT]/REPOSITORY@sha256:...`, what kwctl prints.
    pub immutable_ref: String,
    pub manifest_digest: String,
    /// The manifest annotations pushed.
    pub annotations: BTreeMap<String, String>,
    /// Metadata annotations left out because they span several lines.
    pub dropped_annotations: Vec<String>,
}

/// `kwctl push MODULE URI`: refuses an unannotated module.
pub fn push(options: &PushOptions) -> Result<Pushed> {
    let uri = &options.uri;
    let reference = parse_uri(uri)?;
    if reference.digest().is_some() {
        bail!("invalid policy URI {uri:?}: push needs a tag, not a digest");
    }
    let module = std::fs::read(&options.module)
        .with_context(|| format!("cannot read policy module {}", options.module.display()))?;
    if !module.starts_with(WASM_MAGIC) {
        bail!(
            "{} is not a WebAssembly module (bad magic number)",
            options.module.display()
        );
    }
    let metadata = Metadata::from_module(&module)
        .with_context(|| format!("cannot read the metadata of {}", options.module.display()))?
        .ok_or_else(|| {
            anyhow!(
                "Cannot push a policy that is not annotated: {} has no `{METADATA_SECTION}` section. Annotate it first (`policy-host annotate` or `kwctl annotate`; `make annotated-policy.wasm` here)",
                options.module.display()
            )
        })?;
    let (annotations, dropped_annotations) = match &metadata.annotations {
        Some(annotations) => oci_annotations(annotations),
        None => (BTreeMap::new(), Vec::new()),
    };
    let layers = vec![ImageLayer::new(
        module,
        WASM_LAYER_MEDIA_TYPE.to_string(),
        None,
    )];
    let config = Config {
        data: WASM_CONFIG.to_vec(),
        media_type: WASM_CONFIG_MEDIA_TYPE.to_string(),
        annotations: None,
    };
    // kwctl passes `None` when the metadata has no annotations at all.
    let manifest = OciImageManifest::build(
        &layers,
        &config,
        metadata.annotations.as_ref().map(|_| annotations.clone()),
    );
    let manifest_url = with_transports(
        "push to",
        uri,
        &reference,
        &options.registry,
        |client, auth| {
            let (reference, layers, config, manifest) =
                (&reference, &layers, config.clone(), manifest.clone());
            async move {
                let response = client
                    .push(reference, layers, config, &auth, Some(manifest))
                    .await?;
                Ok::<_, Failure>(response.manifest_url)
            }
        },
    )?;
    let immutable_ref = immutable_ref(&reference, &manifest_url)?;
    let manifest_digest = immutable_ref
        .rsplit_once('@')
        .map(|(_, digest)| digest.to_string())
        .unwrap_or_default();
    Ok(Pushed {
        immutable_ref,
        manifest_digest,
        annotations,
        dropped_annotations,
    })
}

// ---------------------------------------------------------------------------------------------
// Pull.

#[derive(Clone, Debug)]
pub struct PullOptions {
    /// `registry://HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]`.
    pub uri: String,
    /// Where the module is written.
    pub output: PathBuf,
    pub registry: RegistryOptions,
}

#[derive(Clone, Debug)]
pub struct Pulled {
    /// `HOST[:PORT]/REPOSITORY@sha256:...` of the manifest pulled.
    pub immutable_ref: String,
    pub manifest_digest: String,
    pub layer_digest: String,
    pub size: usize,
}

/// `kwctl pull URI -o FILE`: refuses a manifest whose layers are not one wasm module.
pub fn pull(options: &PullOptions) -> Result<Pulled> {
    let uri = &options.uri;
    let reference = parse_uri(uri)?;
    if options.output.is_dir() {
        bail!(
            "{} is a directory: give the file to write the policy to",
            options.output.display()
        );
    }
    let (module, manifest_digest, layer_digest) = with_transports(
        "pull",
        uri,
        &reference,
        &options.registry,
        |client, auth| {
            let reference = &reference;
            async move { pull_module(&client, reference, &auth, uri).await }
        },
    )?;
    std::fs::write(&options.output, &module)
        .with_context(|| format!("cannot write {}", options.output.display()))?;
    Ok(Pulled {
        immutable_ref: format!(
            "{}/{}@{manifest_digest}",
            reference.registry(),
            reference.repository()
        ),
        manifest_digest,
        layer_digest,
        size: module.len(),
    })
}

async fn pull_module(
    client: &Client,
    reference: &Reference,
    auth: &RegistryAuth,
    uri: &str,
) -> std::result::Result<(Vec<u8>, String, String), Failure> {
    let (manifest, digest) = client.pull_manifest(reference, auth).await?;
    let not_a_policy = |why: String| {
        Failure::Content(anyhow!(
            "{uri} is not a Kubewarden policy: {why}; a policy has one layer of media type {WASM_LAYER_MEDIA_TYPE}"
        ))
    };
    let manifest = match manifest {
        OciManifest::Image(manifest) => manifest,
        OciManifest::ImageIndex(_) => {
            return Err(not_a_policy(format!(
                "its manifest ({digest}) is an image index"
            )))
        }
    };
    // kwctl (oci-client's `pull` with the wasm media type accepted) takes the first layer and
    // refuses a manifest with no layer or with a layer of any other type.
    let types: Vec<&str> = manifest
        .layers
        .iter()
        .map(|layer| layer.media_type.as_str())
        .collect();
    if types.is_empty() || types.iter().any(|t| *t != WASM_LAYER_MEDIA_TYPE) {
        return Err(not_a_policy(format!(
            "the layers of its manifest ({digest}) are [{}]",
            types.join(", ")
        )));
    }
    let layer = &manifest.layers[0];
    let mut module = Vec::new();
    // pull_blob checks the blob against the layer's digest.
    client.pull_blob(reference, layer, &mut module).await?;
    if !module.starts_with(WASM_MAGIC) {
        return Err(not_a_policy(format!(
            "its layer {} is not a WebAssembly module",
            layer.digest
        )));
    }
    Ok((module, digest, layer.digest.clone()))
}

// ---------------------------------------------------------------------------------------------
// The `push` and `pull` subcommands, with kwctl's flags.

/// Flags `push` and `pull` share with kwctl.
#[derive(clap::Args, Clone, Debug)]
pub struct RegistryArgs {
    /// YAML file holding source information (https, registry insecure hosts, custom CA's...):
    /// kwctl's sources.yaml. Plain HTTP is allowed only for `insecure_sources` on loopback.
    #[arg(long, value_name = "PATH")]
    pub sources_path: Option<PathBuf>,
    /// Path to a directory containing the Docker 'config.json' file. Can be used to indicate
    /// registry authentication details.
    #[arg(long, value_name = "DOCKER_CONFIG")]
    pub docker_config_json_path: Option<PathBuf>,
}

impl RegistryArgs {
    pub fn options(&self) -> Result<RegistryOptions> {
        Ok(RegistryOptions {
            sources: match &self.sources_path {
                Some(path) => Sources::from_file(path)?,
                None => Sources::default(),
            },
            docker_config_dir: self.docker_config_json_path.clone(),
        })
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

#[derive(clap::Args, Clone, Debug)]
#[command(
    after_long_help = "The annotations found inside of the policy's metadata are part of \
the OCI manifest. Multi-line annotations are skipped because they are not compatible with the OCI \
specification. 'io.kubewarden.policy.source' is propagated as 'org.opencontainers.image.source'."
)]
pub struct PushArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// The annotated policy module (.wasm).
    pub policy: PathBuf,
    /// Policy URI: registry://HOST[:PORT]/REPOSITORY[:TAG].
    pub uri: String,
}

#[derive(clap::Args, Clone, Debug)]
pub struct PullArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Output file.
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output_path: PathBuf,
    /// Policy URI: registry://HOST[:PORT]/REPOSITORY[:TAG|@DIGEST].
    pub uri: String,
}

/// `policy-host push`: kwctl's output, `Policy successfully pushed: REF` or
/// `{"immutable_ref":"REF"}`; dropped annotations are warned about on stderr.
pub fn push_command(args: &PushArgs) -> Result<()> {
    let pushed = push(&PushOptions {
        module: args.policy.clone(),
        uri: args.uri.clone(),
        registry: args.registry.options()?,
    })?;
    for name in &pushed.dropped_annotations {
        eprintln!(
            " WARN policy-host: annotation {name} is a multi-line string, it is not part of the OCI manifest"
        );
    }
    match args.output {
        OutputFormat::Text => println!("Policy successfully pushed: {}", pushed.immutable_ref),
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({ "immutable_ref": pushed.immutable_ref })
        ),
    }
    Ok(())
}

/// `policy-host pull`: writes the module, says where from on stderr.
pub fn pull_command(args: &PullArgs) -> Result<()> {
    let pulled = pull(&PullOptions {
        uri: args.uri.clone(),
        output: args.output_path.clone(),
        registry: args.registry.options()?,
    })?;
    eprintln!(
        "Successfully pulled policy from {} ({}, {} bytes) to {}",
        args.uri,
        pulled.immutable_ref,
        pulled.size,
        args.output_path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn annotations_follow_kwctl() {
        let (kept, dropped) = oci_annotations(&map(&[
            (POLICY_SOURCE_ANNOTATION, "https://example.com/src"),
            ("io.kubewarden.policy.usage", "# title\n\nbody"),
            ("io.kubewarden.policy.description", "one line\n"),
            ("io.kubewarden.policy.title", "  padded "),
            ("empty", ""),
        ]));
        assert_eq!(
            kept,
            map(&[
                (POLICY_SOURCE_ANNOTATION, "https://example.com/src"),
                (OCI_SOURCE_ANNOTATION, "https://example.com/src"),
                ("io.kubewarden.policy.description", "one line"),
                ("io.kubewarden.policy.title", "padded"),
                ("empty", ""),
            ])
        );
        assert_eq!(dropped, vec!["io.kubewarden.policy.usage".to_string()]);

        // An explicit org.opencontainers.image.source wins.
        let (kept, _) = oci_annotations(&map(&[
            (POLICY_SOURCE_ANNOTATION, "a"),
            (OCI_SOURCE_ANNOTATION, "b"),
        ]));
        assert_eq!(kept[OCI_SOURCE_ANNOTATION], "b");
        // No source, no OCI source.
        let (kept, _) = oci_annotations(&map(&[("x", "y")]));
        assert_eq!(kept, map(&[("x", "y")]));
    }

    #[test]
    fn uris() {
        let r = parse_uri("registry://127.0.0.1:5000/policies/capi:v0.1.0").unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("127.0.0.1:5000", "policies/capi", Some("v0.1.0"))
        );
        let r = parse_uri("ghcr.io/org/policy").unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("ghcr.io", "org/policy", Some("latest"))
        );
        for bad in [
            "registry://",
            "registry://127.0.0.1:5000/Upper:v1",
            "registry://127.0.0.1:5000/a b:v1",
            "registry://127.0.0.1:5000/x:bad tag",
            "https://127.0.0.1:5000/x:v1",
        ] {
            let error = parse_uri(bad).unwrap_err().to_string();
            assert!(error.starts_with("invalid policy URI"), "{bad}: {error}");
        }
    }

    #[test]
    fn loopback() {
        for host in [
            "localhost",
            "localhost:5000",
            "LOCALHOST:1",
            "127.0.0.1:5000",
            "127.1.2.3",
            "[::1]:5000",
            "[::1]",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "ghcr.io",
            "10.0.0.1:5000",
            "localhost.example.com:5000",
            "[::2]:5000",
            "[::1",
            "128.0.0.1",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn plain_http_only_for_listed_loopback_sources() {
        let sources = Sources::from_yaml(
            "insecure_sources: [\"127.0.0.1:5000\", \"registry.example.com:5000\"]\n",
        )
        .unwrap();
        assert_eq!(
            transports("127.0.0.1:5000", &sources).unwrap(),
            vec![Transport::Tls, Transport::TlsUnverified, Transport::Http]
        );
        assert_eq!(
            transports("127.0.0.1:5001", &sources).unwrap(),
            vec![Transport::Tls]
        );
        assert_eq!(
            transports("ghcr.io", &Sources::default()).unwrap(),
            vec![Transport::Tls]
        );
        let error = transports("registry.example.com:5000", &sources)
            .unwrap_err()
            .to_string();
        assert!(error.contains("only for registries on loopback"), "{error}");
    }

    #[test]
    fn sources_file() {
        let sources = Sources::from_yaml(
            "source_authorities:\n  \"r.example:5000\":\n  - type: Data\n    data: |\n      -----BEGIN CERTIFICATE-----\n      x\n",
        )
        .unwrap();
        let certs = &sources.source_authorities["r.example:5000"];
        assert!(matches!(certs[0].encoding, CertificateEncoding::Pem));
        assert!(Sources::from_yaml("").unwrap().insecure_sources.is_empty());
        assert!(Sources::from_yaml("insecure_sources: 3").is_err());
    }

    #[test]
    fn immutable_refs() {
        let reference = parse_uri("registry://127.0.0.1:5000/p/x:v1").unwrap();
        let digest = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            immutable_ref(
                &reference,
                &format!("http://127.0.0.1:5000/v2/p/x/manifests/{digest}")
            )
            .unwrap(),
            format!("127.0.0.1:5000/p/x@{digest}")
        );
        for bad in [
            "no-slash",
            "http://h/v2/p/manifests/sha256:abc",
            "http://h/v2/p/manifests/sha384:abc",
        ] {
            assert!(immutable_ref(&reference, bad).is_err(), "{bad}");
        }
        assert_eq!(
            sha256_digest(b"{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
