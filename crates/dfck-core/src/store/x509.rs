//! The few X.509 certificate fields the PostgreSQL host-name check needs (validity, subject
//! common names, subject alternative names), read with the `x509-cert` crate, and libpq's
//! rule for matching them to a host. Chains and signatures are webpki's job
//! (src/store/tls.rs).

use x509_cert::Certificate;
use x509_cert::der::Decode;
use x509_cert::der::oid::db::{rfc4519, rfc5280};
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;

/// What a certificate says about whom it names and when it is valid.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CertNames {
    /// Subject common names.
    pub common_names: Vec<String>,
    /// `dNSName` subject alternative names.
    pub dns_names: Vec<String>,
    /// `iPAddress` subject alternative names (4 or 16 bytes).
    pub ip_addresses: Vec<Vec<u8>>,
    /// `notBefore`, seconds since the Unix epoch.
    pub not_before: i64,
    /// `notAfter`, seconds since the Unix epoch.
    pub not_after: i64,
}

/// Reads a DER certificate; `None` when it does not parse.
pub fn parse(der: &[u8]) -> Option<CertNames> {
    let cert = Certificate::from_der(der).ok()?;
    let tbs = &cert.tbs_certificate;
    let secs = |t: x509_cert::time::Time| i64::try_from(t.to_unix_duration().as_secs()).ok();
    let mut names = CertNames {
        not_before: secs(tbs.validity.not_before)?,
        not_after: secs(tbs.validity.not_after)?,
        ..CertNames::default()
    };
    for rdn in tbs.subject.0.iter() {
        for atv in rdn.0.iter() {
            if atv.oid == rfc4519::CN {
                // Whatever string type the name is in, as libpq compares it: its bytes.
                names
                    .common_names
                    .push(String::from_utf8_lossy(atv.value.value()).into_owned());
            }
        }
    }
    for ext in tbs.extensions.iter().flatten() {
        if ext.extn_id != rfc5280::ID_CE_SUBJECT_ALT_NAME {
            continue;
        }
        let san = SubjectAltName::from_der(ext.extn_value.as_bytes()).ok()?;
        for name in san.0 {
            match name {
                GeneralName::DnsName(d) => names.dns_names.push(d.to_string()),
                GeneralName::IpAddress(ip) => names.ip_addresses.push(ip.as_bytes().to_vec()),
                _ => {}
            }
        }
    }
    Some(names)
}

/// Whether the certificate names `host` the way libpq checks it: the subject alternative
/// names when there are any (DNS names with a leftmost `*` label, IP addresses byte for
/// byte), else the common name.
pub fn matches_host(names: &CertNames, host: &str) -> bool {
    let ip: Option<std::net::IpAddr> = host.parse().ok();
    let ip_bytes = ip.map(|ip| match ip {
        std::net::IpAddr::V4(v) => v.octets().to_vec(),
        std::net::IpAddr::V6(v) => v.octets().to_vec(),
    });
    if !names.dns_names.is_empty() || !names.ip_addresses.is_empty() {
        if let Some(b) = &ip_bytes {
            if names.ip_addresses.contains(b) {
                return true;
            }
        }
        return names.dns_names.iter().any(|n| name_matches(n, host));
    }
    names.common_names.iter().any(|n| name_matches(n, host))
}

fn name_matches(pattern: &str, host: &str) -> bool {
    let (p, h) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match p.strip_prefix("*.") {
        Some(suffix) => h
            .split_once('.')
            .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix),
        None => p == h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_as_libpq_matches_them() {
        let cn_only = CertNames {
            common_names: vec!["127.0.0.1".into()],
            ..Default::default()
        };
        assert!(matches_host(&cn_only, "127.0.0.1"));
        assert!(!matches_host(&cn_only, "localhost"));
        let san = CertNames {
            common_names: vec!["ignored".into()],
            dns_names: vec!["*.Example.com".into()],
            ip_addresses: vec![vec![10, 0, 0, 1]],
            ..Default::default()
        };
        assert!(matches_host(&san, "db.example.COM"));
        assert!(!matches_host(&san, "a.b.example.com"));
        assert!(matches_host(&san, "10.0.0.1"));
        assert!(!matches_host(&san, "ignored"), "CN is not used beside SANs");
        assert!(parse(b"\x30\x03\x02\x01").is_none());
    }

    #[test]
    fn the_test_certificate_parses() {
        let pem = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/tls/wrong-root.crt"
        ))
        .unwrap();
        let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        use base64::Engine as _;
        let der = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let names = parse(&der).unwrap();
        assert!(names.not_before < names.not_after, "{names:?}");
        assert!(
            !names.common_names.is_empty() || !names.dns_names.is_empty(),
            "{names:?}"
        );
    }
}
