//! TLS for PostgreSQL connections (rustls with the ring provider).
//!
//! Like libpq, `prefer` and `require` encrypt the connection without verifying the server
//! certificate; `verify-ca` checks that the certificate chains to `sslrootcert`, and
//! `verify-full` also that it names the host (docs/postgres-connection.md). A certificate
//! listed in `sslrootcert` itself (the usual self-signed server certificate) is trusted as
//! it is, within its validity period, as OpenSSL does.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, OtherError, RootCertStore};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};
use std::path::Path;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Accepts any server certificate (libpq `sslmode=require` semantics) while still checking
/// the handshake signatures.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A tokio-postgres TLS connector that encrypts without verifying the certificate.
pub fn encrypt_only_connector() -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// How strictly the server certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// The chain to a root certificate (`sslmode=verify-ca`).
    Ca,
    /// The chain and the host name (`sslmode=verify-full`).
    Full,
}

/// Verifies the server certificate against `sslrootcert`'s roots, the way libpq does.
#[derive(Debug)]
struct RootVerifier {
    provider: Arc<CryptoProvider>,
    roots: Vec<CertificateDer<'static>>,
    webpki: Option<Arc<WebPkiServerVerifier>>,
    mode: Verify,
    /// The last rejection, worded for a person (the driver's error only says "handshake").
    rejected: Rejection,
}

/// Why the verifier rejected the server's certificate, once it has.
pub type Rejection = Arc<std::sync::Mutex<Option<String>>>;

/// A certificate problem, worded for a person.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Problem(String);

fn problem(msg: String) -> Error {
    Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(Problem(msg)))))
}

impl ServerCertVerifier for RootVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let verdict = self.check(end_entity, intermediates, server_name, ocsp_response, now);
        if let Err(e) = &verdict {
            if let Ok(mut slot) = self.rejected.lock() {
                *slot = Some(e.clone());
            }
        }
        verdict
            .map(|()| ServerCertVerified::assertion())
            .map_err(problem)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl RootVerifier {
    /// The libpq checks; the error is worded for a person.
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<(), String> {
        let names = super::x509::parse(end_entity)
            .ok_or_else(|| "the server certificate does not parse".to_owned())?;
        if self.roots.iter().any(|r| r.as_ref() == end_entity.as_ref()) {
            let now = now.as_secs() as i64;
            if now < names.not_before {
                return Err("the server certificate is not valid yet".into());
            }
            if now > names.not_after {
                return Err("the server certificate has expired".into());
            }
        } else {
            let Some(webpki) = &self.webpki else {
                return Err(
                    "the server certificate is not signed by a certificate in sslrootcert".into(),
                );
            };
            match webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Ok(_) => {}
                // The chain is good; the name is checked below, libpq's way.
                Err(Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => {}
                Err(Error::InvalidCertificate(
                    CertificateError::UnknownIssuer | CertificateError::BadSignature,
                )) => {
                    return Err(
                        "the server certificate is not signed by a certificate in sslrootcert"
                            .into(),
                    );
                }
                // webpki's way of saying a self-signed (CA) certificate is not a root here.
                Err(Error::InvalidCertificate(CertificateError::Other(o)))
                    if format!("{o:?}").contains("CaUsedAsEndEntity") =>
                {
                    return Err(
                        "the server certificate is not signed by a certificate in sslrootcert"
                            .into(),
                    );
                }
                Err(e) => return Err(format!("the server certificate is rejected: {e}")),
            }
        }
        if self.mode == Verify::Full {
            let host = match server_name {
                ServerName::DnsName(d) => d.as_ref().to_owned(),
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                _ => String::new(),
            };
            if !super::x509::matches_host(&names, &host) {
                let mut named: Vec<String> = names.dns_names.clone();
                named.extend(names.ip_addresses.iter().filter_map(|b| {
                    match b.len() {
                        4 => <[u8; 4]>::try_from(b.as_slice())
                            .ok()
                            .map(|a| std::net::IpAddr::from(a).to_string()),
                        16 => <[u8; 16]>::try_from(b.as_slice())
                            .ok()
                            .map(|a| std::net::IpAddr::from(a).to_string()),
                        _ => None,
                    }
                }));
                if named.is_empty() {
                    named = names.common_names.clone();
                }
                return Err(format!(
                    "the server certificate names {} and not the host \"{host}\"",
                    if named.is_empty() {
                        "no host".to_owned()
                    } else {
                        named.join(", ")
                    }
                ));
            }
        }
        Ok(())
    }
}

/// A connector that verifies the server certificate against the PEM roots in `root_file`.
/// The [`Rejection`] slot says why, after a failed handshake.
pub fn verifying_connector(
    mode: Verify,
    root_file: &Path,
) -> Result<(MakeRustlsConnect, Rejection), String> {
    let shown = root_file.display();
    let roots: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(root_file)
        .map_err(|e| format!("cannot read root certificate file {shown}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read root certificate file {shown}: {e}"))?;
    if roots.is_empty() {
        return Err(format!("no certificate in root certificate file {shown}"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let rejected = Rejection::default();
    let mut store = RootCertStore::empty();
    let (_added, _ignored) = store.add_parsable_certificates(roots.iter().cloned());
    let webpki = if store.is_empty() {
        None
    } else {
        Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
                .build()
                .map_err(|e| format!("cannot use root certificate file {shown}: {e}"))?,
        )
    };
    let verifier = RootVerifier {
        provider: provider.clone(),
        roots,
        webpki,
        mode,
        rejected: rejected.clone(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok((MakeRustlsConnect::new(config), rejected))
}
