//! Helpers shared by the fuzz targets: carving one fuzzer input into several fields.

/// Splits `data` into fields: each field is a little-endian `u16` length followed by that
/// many bytes; a short last field takes what is left.
pub fn fields(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let n = u16::from_le_bytes([data[0], data[1]]) as usize;
        data = &data[2..];
        let n = n.min(data.len());
        out.push(&data[..n]);
        data = &data[n..];
    }
    out
}

/// Joins fields in the format [`fields`] reads (for seed corpora).
pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        let n = p.len().min(u16::MAX as usize);
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(&p[..n]);
    }
    out
}

/// The serializer tags a store may hold, picked by one byte.
pub fn tag(b: u8) -> Option<String> {
    match b % 8 {
        0..=3 => Some("msgpack".into()),
        4 => Some("json".into()),
        5 => Some("null".into()),
        6 => Some("bytes".into()),
        _ => None,
    }
}
