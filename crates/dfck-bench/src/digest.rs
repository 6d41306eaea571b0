//! Correctness digests of the benchmarks: `content_sha256` (docs/bench-rows.md#digests, sorted-key
//! compact JSON of `{content,id,type}` per message, non-ASCII raw) and the production wire
//! digest (docs/bench-rows.md#production-reads-and-wire-digests, `[type,id,content]` triples, non-string content as Python
//! `json.dumps(sort_keys=True)` — whose default escapes non-ASCII as `\uXXXX`).

use dfck_core::codec::pyjson::{self, PyJsonFormatter};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// One message as the digests see it.
#[derive(Debug, Clone, PartialEq)]
pub struct DigestMessage<'a> {
    /// LangChain type string (`human`, `ai`, `system`, `tool`, …).
    pub kind: &'a str,
    /// The message id.
    pub id: &'a str,
    /// String content, or the JSON structure of list content.
    pub content: &'a Value,
}

/// Python `json.dumps(v, sort_keys=True, ensure_ascii=ascii, separators=…)` for JSON values.
fn py_dumps(v: &Value, out: &mut String, formatter: PyJsonFormatter) {
    // Serializing a JSON value cannot fail.
    out.push_str(&pyjson::dumps(&pyjson::sort_keys(v), formatter).unwrap_or_default());
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// `canonical_messages_digest` (docs/bench-rows.md#digests): lowercase hex SHA-256 of
/// `[{"content":…,"id":…,"type":…},…]` with sorted keys and compact separators.
pub fn content_sha256<'a>(messages: impl IntoIterator<Item = DigestMessage<'a>>) -> String {
    let mut s = String::from("[");
    for (i, m) in messages.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"content\":");
        py_dumps(m.content, &mut s, PyJsonFormatter::compact(false));
        s.push_str(",\"id\":");
        s.push_str(&Value::String(m.id.to_string()).to_string());
        s.push_str(",\"type\":");
        s.push_str(&Value::String(m.kind.to_string()).to_string());
        s.push('}');
    }
    s.push(']');
    sha256_hex(&s)
}

/// The production wire digest (docs/bench-rows.md#production-reads-and-wire-digests) of one message list.
pub fn wire_sha256<'a>(messages: impl IntoIterator<Item = DigestMessage<'a>>) -> String {
    let mut s = String::from("[");
    for (i, m) in messages.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push('[');
        s.push_str(&Value::String(m.kind.to_string()).to_string());
        s.push(',');
        s.push_str(&Value::String(m.id.to_string()).to_string());
        s.push(',');
        match m.content {
            Value::String(_) => s.push_str(&m.content.to_string()),
            other => {
                let mut c = String::new();
                py_dumps(other, &mut c, PyJsonFormatter::spaced(true));
                s.push_str(&Value::String(c).to_string());
            }
        }
        s.push(']');
    }
    s.push(']');
    sha256_hex(&s)
}

/// `history_wire_sha256`: SHA-256 of the concatenated per-limit hex digests (docs/bench-rows.md#production-reads-and-wire-digests).
pub fn combined_sha256<S: AsRef<str>>(digests: &[S]) -> String {
    let joined: String = digests.iter().map(AsRef::as_ref).collect();
    sha256_hex(&joined)
}

/// The channel workload's messages (docs/bench-rows.md#workloads): `bench-message-{i:08d}`, `x` × payload, human/ai.
pub fn channel_workload_sha256(update_count: u64, payload_bytes: u64) -> String {
    let content = Value::String("x".repeat(payload_bytes as usize));
    let ids: Vec<String> = (0..update_count)
        .map(|i| format!("bench-message-{i:08}"))
        .collect();
    content_sha256(ids.iter().enumerate().map(|(i, id)| DigestMessage {
        kind: if i % 2 == 0 { "human" } else { "ai" },
        id,
        content: &content,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn channel_vectors() {
        for (n, p, want) in [
            (
                1,
                128,
                "b37266043230ae9f97e9a188fd2e8b1299079e33f200d6a69b8644d9fc4bf456",
            ),
            (
                2,
                128,
                "f942fc3bbe43329b6522dfcd478ba9102c379f827c8e882774bbd8d922c1eaaf",
            ),
            (
                4,
                16,
                "6f2703ee86908e5841d830fd79c3661f3a53ba96ebb0933e0906c3f8bc7f460d",
            ),
            (
                4,
                64,
                "a24e7b6bc99e34c399b7a7f69bfab6fa4532e348d7926a9e5a215f3ec67ffbb0",
            ),
            (
                100,
                128,
                "31d4592c19f8b52bd8db102bac1244e86bcccee7777b0f13182310b7e35975f7",
            ),
            (
                500,
                128,
                "09f9a1eebe1a136f50623c393a59d629a6817e3c8464b862f48e6b5794b24ec5",
            ),
            (
                1000,
                128,
                "9ee84d6bdbffc1561877834545888e92fac8d392d5540a7c9d82f0746e695d28",
            ),
        ] {
            assert_eq!(channel_workload_sha256(n, p), want, "N={n} P={p}");
        }
    }

    #[test]
    fn non_ascii_content_follows_pythons_defaults() {
        // Python: json.dumps(content, sort_keys=True) escapes non-ASCII (ensure_ascii=True);
        // the outer compact dumps and the digest keep it raw (docs/bench-rows.md#digests).
        let c = json!([{"type": "text", "text": "a\u{2026} \u{1F600} \"q\"\n"}]);
        let m = [DigestMessage {
            kind: "ai",
            id: "x",
            content: &c,
        }];
        assert_eq!(
            wire_sha256(m.clone()),
            "77c0b418c8bcceeea54eb590d1ba2ff2126a913a35cf5679abab113d4da139f6"
        );
        assert_eq!(
            content_sha256(m),
            "6c499c44f6b1c097449fb47c715c3f44466bc9d59ae006348cc10e76c130a616"
        );
    }

    #[test]
    fn wire_vectors() {
        let empty = wire_sha256(std::iter::empty());
        assert_eq!(
            empty,
            "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
        );
        assert_eq!(
            combined_sha256(&[empty]),
            "a117288688ad59388f308b82aa30755bcd67d6461625521d70a42c11912dcc05"
        );
        let yy = json!("yy");
        let list = json!([{"type": "text", "text": "x"}]);
        let msgs = [
            DigestMessage {
                kind: "human",
                id: "bench-h-00000000__user",
                content: &yy,
            },
            DigestMessage {
                kind: "ai",
                id: "bench-ai-00000000",
                content: &list,
            },
        ];
        assert_eq!(
            wire_sha256(msgs),
            "efaf7f11a065631379e846fdeb498f560796edfb212cf9edbbc0b1ff48c7a353"
        );
    }
}
