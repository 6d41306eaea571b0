//! The few X.509 certificate fields the PostgreSQL host-name check needs (validity, subject
//! common names, subject alternative names), read from DER. Chains and signatures are
//! webpki's job (src/store/tls.rs).

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

/// One DER element: tag, contents, and what follows it.
fn element(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = data.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, b| (a << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The elements of a constructed value's contents.
fn children(mut data: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let (tag, body, rest) = element(data)?;
        out.push((tag, body));
        data = rest;
    }
    Some(out)
}

const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];

/// Reads a DER certificate; `None` when it does not parse.
pub fn parse(der: &[u8]) -> Option<CertNames> {
    let (_, cert, _) = element(der)?;
    let (_, tbs, _) = element(cert)?;
    let fields = children(tbs)?;
    // An explicit version ([0]) shifts the fields by one.
    let base = usize::from(fields.first()?.0 == 0xa0);
    let validity = children(fields.get(base + 3)?.1)?;
    let mut names = CertNames {
        not_before: time(validity.first()?)?,
        not_after: time(validity.get(1)?)?,
        ..CertNames::default()
    };
    for rdn in children(fields.get(base + 4)?.1)? {
        for (_, atv) in children(rdn.1)? {
            let parts = children(atv)?;
            if parts.first().map(|p| p.1) == Some(OID_CN) {
                let value = parts.get(1)?.1;
                names
                    .common_names
                    .push(String::from_utf8_lossy(value).into_owned());
            }
        }
    }
    for (tag, body) in fields.get(base + 6..).unwrap_or_default() {
        if *tag != 0xa3 {
            continue;
        }
        let (_, exts, _) = element(body)?;
        for (_, ext) in children(exts)? {
            let parts = children(ext)?;
            if parts.first().map(|p| p.1) != Some(OID_SAN) {
                continue;
            }
            let (_, octets) = parts.last()?;
            let (_, general_names, _) = element(octets)?;
            for (tag, value) in children(general_names)? {
                match tag {
                    0x82 => names
                        .dns_names
                        .push(String::from_utf8_lossy(value).into_owned()),
                    0x87 => names.ip_addresses.push(value.to_vec()),
                    _ => {}
                }
            }
        }
    }
    Some(names)
}

/// A UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) in Unix seconds.
fn time((tag, body): &(u8, &[u8])) -> Option<i64> {
    let s = std::str::from_utf8(body).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 => {
            let yy: i64 = s.get(..2)?.parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, s.get(2..)?)
        }
        0x18 => (s.get(..4)?.parse().ok()?, s.get(4..)?),
        _ => return None,
    };
    let num = |r: std::ops::Range<usize>| rest.get(r)?.parse::<i64>().ok();
    let (month, day) = (num(0..2)?, num(2..4)?);
    let (h, m, sec) = (num(4..6)?, num(6..8)?, num(8..10)?);
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    fn dates_and_names() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(time(&(0x17, b"700102000000Z")), Some(86_400));
        assert_eq!(time(&(0x18, b"20000301000001Z")), Some(11_017 * 86_400 + 1));
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
}
