//! The msgpack codec: decode arbitrary bytes; whatever decodes re-encodes to bytes that
//! decode to the same value, renders as JSON, and the raw `messages` scanner agrees not
//! to panic on the same input. The shallow checkpoint decoder (structural loads) fails
//! exactly where full decoding fails, with the same error.
#![no_main]

use dfck_core::codec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = codec::checkpoint_messages_slice(data);
    let shared = bytes::Bytes::copy_from_slice(data);
    let full = codec::decode_shared(&shared).map(|_| ()).map_err(|e| e.to_string());
    let lean = codec::decode_checkpoint(&shared, codec::Depth::Shallow { keep: &["a"] });
    assert_eq!(full, lean.map(|_| ()).map_err(|e| e.to_string()), "shallow decoding agrees");
    let value = codec::decode_value_shallow(&shared).map(|_| ()).map_err(|e| e.to_string());
    assert_eq!(full, value, "shallow value decoding agrees");
    let _ = codec::decode_typed(Some("json"), data.to_vec());
    if let Ok(v) = codec::decode(data) {
        let enc = codec::encode(&v);
        let again = codec::decode(&enc).expect("re-encoded value decodes");
        assert_eq!(codec::encode(&again), enc, "encoding is stable");
        let _ = serde_json::to_string(&codec::to_json(&v));
        let _ = codec::from_json(&codec::to_json(&v));
    }
});
