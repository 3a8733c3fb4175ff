//! A test CA and HTTPS servers on 127.0.0.1 for the TLS tests, made at test time with rcgen.
//! Shared by the client's and the CLI's tests (`#[path]`), so each crate links it once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA that exists only for one test, and a certificate it issued for 127.0.0.1 and localhost.
pub(crate) struct TestPki {
    /// The CA certificate, PEM.
    pub(crate) ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

impl TestPki {
    pub(crate) fn new() -> TestPki {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "Toolwire test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);

        let mut leaf =
            CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();

        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf_cert.der().clone()], key)
            .unwrap();
        TestPki {
            ca_pem,
            server: Arc::new(server),
        }
    }

    /// Writes the CA certificate to a file of its own; removed when the returned guard drops.
    pub(crate) fn ca_file(&self, name: &str) -> TempFile {
        TempFile::new(name, self.ca_pem.as_bytes())
    }

    /// Serves `app` over HTTPS on 127.0.0.1; returns the base URL (`https://127.0.0.1:PORT`).
    pub(crate) async fn serve(&self, app: axum::Router) -> String {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", tcp.local_addr().unwrap());
        let listener = TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(self.server.clone()),
        };
        tokio::spawn(async move { axum::serve(listener, app).await });
        base
    }

    /// A Toolwire server with an `echo` tool, over HTTPS; returns its endpoint URL.
    pub(crate) async fn toolwire(&self) -> String {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        struct Echo {
            message: String,
        }
        let server = toolwire_server::Server::builder("tls-test", "1")
            .tool(toolwire_server::Tool::new(
                "echo",
                |a: Echo, _: toolwire_server::RequestContext| async move { a.message },
            ))
            .build()
            .unwrap();
        let app = toolwire_server::http::router(server, Default::default());
        format!("{}/mcp", self.serve(app).await)
    }
}

/// A file in the temporary directory, removed on drop.
pub(crate) struct TempFile(pub(crate) PathBuf);

impl TempFile {
    pub(crate) fn new(name: &str, contents: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!(
            "toolwire-{}-{}-{name}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// TCP connections that completed a TLS handshake. A client that refuses the certificate ends
/// its handshake here and is skipped.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}
