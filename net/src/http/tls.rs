//! TLS for the HTTPS/WSS listener: an SNI certificate store shared by every shard
//! ([`CertStore`]), the bundles it holds ([`CertifiedKeyBundle`]: `tls.crt`, `tls.key`,
//! `ca.crt`), and the acceptor each shard wraps its connections with ([`TlsAcceptor`]).
//!
//! Rotation (REBIND RESOURCE) is [`CertStore::set`]: it swaps the `Arc` stored for each host
//! under a write lock. Only handshakes read the store (rustls calls the resolver once per
//! ClientHello), so the lock is never taken per request; a connection keeps the certificate
//! it negotiated, and every handshake after `set` returns sees the new one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::HttpError;

/// The bundle's file names (spec: ingestors, VHOST TLS).
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";
pub const CA_FILE: &str = "ca.crt";
/// ALPN protocol offered: this server speaks HTTP/1.1 only.
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// A certificate chain with its private key, ready to serve.
#[derive(Debug, Clone)]
pub struct CertifiedKeyBundle {
    key: Arc<CertifiedKey>,
}

impl CertifiedKeyBundle {
    /// Builds a bundle from PEM text: the server certificate (optionally followed by its
    /// intermediates), its private key, and the CA chain (appended to the served chain, minus
    /// certificates already present). Refuses a key that does not match the certificate.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8], ca_pem: &[u8]) -> Result<Self, HttpError> {
        let invalid = |what: &str, e: &dyn std::fmt::Display| {
            HttpError::BundleInvalid(format!("{what}: {e}"))
        };
        let mut chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(CERT_FILE, &e))?;
        if chain.is_empty() {
            return Err(HttpError::BundleInvalid(format!(
                "{CERT_FILE}: no certificate"
            )));
        }
        for ca in CertificateDer::pem_slice_iter(ca_pem) {
            let ca = ca.map_err(|e| invalid(CA_FILE, &e))?;
            if !chain.contains(&ca) {
                chain.push(ca);
            }
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| invalid(KEY_FILE, &e))?;
        let provider = rustls::crypto::aws_lc_rs::default_provider();
        let key = CertifiedKey::from_der(chain, key, &provider)
            .map_err(|e| invalid("certificate and key", &e))?;
        Ok(CertifiedKeyBundle { key: Arc::new(key) })
    }

    /// The DER of the end-entity certificate.
    pub fn end_entity(&self) -> &[u8] {
        self.key
            .cert
            .first()
            .map(|c| c.as_ref())
            .unwrap_or_default()
    }
}

/// Host name → certificate, consulted by SNI on every TLS handshake of every shard.
#[derive(Debug, Default)]
pub struct CertStore {
    by_host: RwLock<HashMap<String, Arc<CertifiedKey>>>,
}

impl CertStore {
    pub fn new() -> Arc<CertStore> {
        Arc::new(CertStore::default())
    }

    /// Reads `tls.crt`, `tls.key` and `ca.crt` from `dir`.
    pub fn load_bundle(dir: &Path) -> Result<CertifiedKeyBundle, HttpError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| HttpError::BundleRead { path, source })
        };
        CertifiedKeyBundle::from_pem(&read(CERT_FILE)?, &read(KEY_FILE)?, &read(CA_FILE)?)
    }

    /// Serves `bundle` for these hosts (exact names, or `*.domain` wildcards), replacing what
    /// they had. Open connections keep their certificate; new handshakes get this one.
    pub fn set(&self, hosts: &[String], bundle: &CertifiedKeyBundle) {
        let mut map = self.by_host.write().unwrap_or_else(|p| p.into_inner());
        for host in hosts {
            map.insert(host.to_ascii_lowercase(), Arc::clone(&bundle.key));
        }
    }

    /// Stops serving these hosts (handshakes naming them fail).
    pub fn remove(&self, hosts: &[String]) {
        let mut map = self.by_host.write().unwrap_or_else(|p| p.into_inner());
        for host in hosts {
            map.remove(&host.to_ascii_lowercase());
        }
    }

    /// The certificate for an SNI name: exact match, else the `*.` wildcard of its parent.
    fn lookup(&self, server_name: &str) -> Option<Arc<CertifiedKey>> {
        let name = server_name.to_ascii_lowercase();
        let map = self.by_host.read().unwrap_or_else(|p| p.into_inner());
        if let Some(key) = map.get(&name) {
            return Some(Arc::clone(key));
        }
        let parent = &name[name.find('.')?..];
        map.get(&format!("*{parent}")).cloned()
    }
}

/// The rustls resolver view of a store (a newtype so `CertStore` keeps a small API).
#[derive(Debug)]
struct SniResolver(Arc<CertStore>);

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // No SNI (an IP address, an old client): there is no VHOST to choose, so the
        // handshake fails rather than presenting an arbitrary host's certificate.
        self.0.lookup(client_hello.server_name()?)
    }
}

/// Accepts TLS connections for one listener; cheap to clone, `Send + Sync`, so one value can
/// serve every shard.
#[derive(Clone)]
pub struct TlsAcceptor {
    inner: futures_rustls::TlsAcceptor,
}

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsAcceptor")
    }
}

impl TlsAcceptor {
    /// An acceptor presenting, per SNI name, whatever `store` holds at handshake time.
    pub fn new(store: Arc<CertStore>) -> Result<TlsAcceptor, HttpError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| HttpError::TlsConfig(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(SniResolver(store)));
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        Ok(TlsAcceptor {
            inner: futures_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }

    pub(crate) fn acceptor(&self) -> &futures_rustls::TlsAcceptor {
        &self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(host: &str) -> (CertifiedKeyBundle, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![host.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let pem = cert.pem();
        let b = CertifiedKeyBundle::from_pem(
            pem.as_bytes(),
            key.serialize_pem().as_bytes(),
            pem.as_bytes(),
        )
        .unwrap();
        (b, pem)
    }

    #[test]
    fn looks_up_exact_then_wildcard_and_rotates() {
        let store = CertStore::new();
        let (a, _) = bundle("a.example.com");
        let (b, _) = bundle("b.example.com");
        store.set(&["A.example.com".to_owned()], &a);
        store.set(&["*.example.com".to_owned()], &b);
        let cert = |name: &str| store.lookup(name).map(|k| k.cert[0].to_vec());
        assert_eq!(cert("a.example.com").as_deref(), Some(a.end_entity()));
        assert_eq!(cert("x.example.com").as_deref(), Some(b.end_entity()));
        assert_eq!(cert("example.org"), None);
        store.set(&["a.example.com".to_owned()], &b);
        assert_eq!(cert("a.example.com").as_deref(), Some(b.end_entity()));
        store.remove(&["a.example.com".to_owned(), "*.example.com".to_owned()]);
        assert_eq!(cert("a.example.com"), None);
    }

    #[test]
    fn refuses_mismatched_key_and_empty_cert() {
        let (_, pem) = bundle("a.example.com");
        let other = rcgen::KeyPair::generate().unwrap();
        let err =
            CertifiedKeyBundle::from_pem(pem.as_bytes(), other.serialize_pem().as_bytes(), b"");
        assert!(matches!(err, Err(HttpError::BundleInvalid(_))));
        let err = CertifiedKeyBundle::from_pem(b"", other.serialize_pem().as_bytes(), b"");
        assert!(matches!(err, Err(HttpError::BundleInvalid(_))));
    }
}
