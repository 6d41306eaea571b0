//! The row decoders: `Checkpoint::from_row` and `Write::from_row` over fuzzed bodies,
//! metadata, tags and ids.
#![no_main]

use dfck_core::model::{Checkpoint, Write};
use dfck_core::store::{CheckpointBody, CheckpointRow, WriteRow};
use dfck_fuzz::{fields, tag};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let f = fields(data);
    let get = |i: usize| f.get(i).copied().unwrap_or_default();
    let sel = get(0).first().copied().unwrap_or(0);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let row = CheckpointRow {
        thread_id: "t".into(),
        checkpoint_ns: String::new(),
        checkpoint_id: text(get(3)),
        parent_checkpoint_id: (sel & 0x80 != 0).then(|| text(get(4))),
        body: CheckpointBody::Serialized {
            type_tag: tag(sel),
            bytes: get(1).to_vec(),
        },
        metadata: get(2).to_vec(),
        bytes: 0,
    };
    if let Ok(ck) = Checkpoint::from_row(row) {
        let _ = ck.messages_encoding();
        let _ = ck.mode();
        let _ = dfck_core::lineage::pending_tasks(&ck);
        for (_, v) in &ck.channel_values {
            let _ = serde_json::to_string(&dfck_core::codec::to_json(v));
        }
    }
    let w = WriteRow {
        checkpoint_id: text(get(3)),
        task_id: text(get(4)),
        task_path: String::new(),
        idx: i64::from(sel) - 4,
        channel: "messages".into(),
        type_tag: tag(sel >> 3),
        value: get(5).to_vec(),
    };
    let _ = Write::from_row(w, "t");
});
