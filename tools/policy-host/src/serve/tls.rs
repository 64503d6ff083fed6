//! The API server's TLS, as policy-server sets it up (`certs.rs`): exactly one certificate and
//! one key in PEM files, optional client CAs for mTLS, no ALPN (so clients speak HTTP/1.1).
//! Certificates are read once: policy-server also reloads them when the files change.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client may take over the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_ca_files: Vec<PathBuf>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// policy-server's `build_tls_server_config` over `load_server_cert_and_key` and
/// `load_client_ca_certs`, with its messages.
pub fn server_config(files: &TlsFiles) -> Result<ServerConfig> {
    let (certs, key) = load_server_cert_and_key(&files.cert_file, &files.key_file)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("{e}"))?;
    let config = if files.client_ca_files.is_empty() {
        builder.with_no_client_auth().with_single_cert(certs, key)?
    } else {
        let mut store = RootCertStore::empty();
        for path in &files.client_ca_files {
            let certs = certificates(&std::fs::read(path)?);
            let (added, ignored) = store.add_parsable_certificates(certs);
            log!(
                "INFO",
                "Loaded client CA certificates client_ca_certs_added={added} client_ca_certs_ignored={ignored}"
            );
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider())
            .build()
            .map_err(|e| anyhow!("Cannot build client verifier: {e}"))?;
        builder
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)?
    };
    Ok(config)
}

fn load_server_cert_and_key(
    cert_file: &Path,
    key_file: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let certs = certificates(&std::fs::read(cert_file)?);
    let key_contents = std::fs::read(key_file)?;
    if certs.len() != 1 {
        return Err(anyhow!(
            "Expected exactly one certificate in certificate file, found {}",
            certs.len()
        ));
    }
    let mut keys: Vec<PrivateKeyDer<'static>> = PrivateKeyDer::pem_slice_iter(&key_contents)
        .filter_map(|key| {
            key.map_err(|e| log!("WARN", "Cannot parse private key: {e}"))
                .ok()
        })
        .collect();
    if keys.len() != 1 {
        return Err(anyhow!(
            "Expected exactly one key in key file, found {}",
            keys.len()
        ));
    }
    Ok((certs, keys.remove(0)))
}

/// The certificates of a PEM file; one that does not parse is logged and skipped.
fn certificates(contents: &[u8]) -> Vec<CertificateDer<'static>> {
    let certs = CertificateDer::pem_slice_iter(contents).filter_map(|cert| {
        // sic: policy-server's text, for the server's own certificate too.
        let cert = cert.map_err(|e| log!("WARN", "Cannot parse client CA certificate: {e}"));
        cert.ok()
    });
    certs.collect()
}

/// A TCP listener whose connections come out TLS-established: each handshake runs in a task
/// of its own, so a slow or silent client holds up nobody.
pub struct TlsListener {
    connections: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: ServerConfig) -> io::Result<TlsListener> {
        let local_addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (sender, connections) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // As axum's serve: out of file descriptors and the like pass.
                        log!("WARN", "accept error: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            log!("WARN", "TLS handshake with {peer} failed: {e}")
                        }
                        Err(_) => log!("WARN", "TLS handshake with {peer} timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            connections,
            local_addr,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            // The accepting task never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}
