//! Every msgpack value stored in the fixture stores (checkpoint blobs and write values,
//! written by the real LangGraph) decodes and re-encodes byte-identically.

use crate::common::*;
use dfck_core::codec::{decode, encode};
use rusqlite::{Connection, OpenFlags};

#[test]
fn every_fixture_blob_round_trips_byte_identically() {
    let mut total = 0;
    let mut skipped = 0;
    for stem in fixture_stems() {
        let path = sqlite_fixture(&stem);
        let uri = format!("file:{}?mode=ro&immutable=1", path.display());
        let conn = Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
        )
        .expect("open fixture");
        let mut n = 0;
        for sql in [
            "SELECT type, checkpoint FROM checkpoints",
            "SELECT type, value FROM writes",
        ] {
            let mut st = conn.prepare(sql).expect("prepare");
            let mut rows = st.query([]).expect("query");
            while let Some(r) = rows.next().expect("row") {
                let tag: Option<String> = r.get(0).expect("type");
                let bytes = r
                    .get_ref(1)
                    .expect("value")
                    .as_bytes_or_null()
                    .expect("bytes");
                if tag.as_deref() != Some("msgpack") {
                    skipped += 1;
                    continue;
                }
                let bytes = bytes.unwrap_or_default();
                let v = decode(bytes).unwrap_or_else(|e| panic!("{stem}: {e}"));
                assert_eq!(encode(&v), bytes, "{stem}: re-encoding differs");
                n += 1;
            }
        }
        println!("{stem}: {n} msgpack values round-trip byte-identically");
        // Only the encrypted store has no plain msgpack row (its rows are `msgpack+xor`).
        if stem != "encrypted" {
            assert!(n > 0, "{stem}: no msgpack value checked");
        }
        total += n;
    }
    println!(
        "{total} msgpack values round-trip byte-identically ({skipped} non-msgpack rows skipped)"
    );
    assert!(total > 1000, "too few blobs: {total}");
    // The encrypted and pickle stores hold rows of other types: the filter saw them.
    assert!(skipped > 0, "no non-msgpack row seen");
}
