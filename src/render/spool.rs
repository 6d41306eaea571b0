//! Rows of a streamed report waiting for the header they follow: a report whose first lines
//! need every row (totals, column widths) keeps its rendered rows here, in memory up to a
//! budget and past it in an anonymous temporary file, so that its memory does not grow with
//! the number of rows. Records come back in the order they were pushed.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use tempfile::SpooledTempFile;

/// The rendered rows a report keeps in memory before the rest go to a temporary file.
pub(crate) const IN_MEMORY: usize = 4 << 20;

/// An append-only log of records (each a length and its bytes).
pub(crate) struct Spool {
    file: std::io::BufWriter<SpooledTempFile>,
    records: u64,
    /// The record whose write fails (the `spool-fail` failpoint in tests).
    fail_at: Option<u64>,
    /// The first failed write, reported when the records are read back.
    error: Option<std::io::Error>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("records", &self.records)
            .finish()
    }
}

impl Spool {
    /// An empty spool keeping `in_memory` bytes before it moves to a temporary file.
    pub fn new(in_memory: usize) -> Self {
        Spool {
            file: std::io::BufWriter::with_capacity(1 << 16, tempfile::spooled_tempfile(in_memory)),
            records: 0,
            fail_at: None,
            error: None,
        }
    }

    /// An empty spool with the budget of this run (`spool-bytes` failpoint in tests).
    pub fn for_report() -> Self {
        let failpoints = dfck_core::failpoint::Failpoints::from_env("report");
        let mut spool = Spool::new(failpoints.spool_bytes(IN_MEMORY));
        spool.fail_at = failpoints.spool_fail();
        spool
    }

    /// Appends one record; a failed write is reported by [`Spool::each`].
    pub fn push(&mut self, record: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if self.fail_at == Some(self.records + 1) {
            self.error = Some(std::io::Error::from(std::io::ErrorKind::StorageFull));
            return;
        }
        let r = u32::try_from(record.len())
            .map_err(|_| std::io::Error::other("a report row over 4 GiB"))
            .and_then(|len| self.file.write_all(&len.to_le_bytes()))
            .and_then(|()| self.file.write_all(record));
        match r {
            Ok(()) => self.records += 1,
            Err(e) => self.error = Some(e),
        }
    }

    /// The first failed write so far, saying where the rows were kept: a stream stops at
    /// the row that could not be kept, not after the command's last write.
    pub fn check(&self) -> std::io::Result<()> {
        match &self.error {
            Some(e) => Err(in_temp_dir(std::io::Error::new(e.kind(), e.to_string()))),
            None => Ok(()),
        }
    }

    /// The records from the first, each to `f`.
    pub fn each(&mut self, f: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(in_temp_dir(e));
        }
        self.file.flush().map_err(in_temp_dir)?;
        let file = self.file.get_mut();
        file.seek(SeekFrom::Start(0)).map_err(in_temp_dir)?;
        let mut r = BufReader::with_capacity(1 << 16, file);
        let mut buf = Vec::new();
        for _ in 0..self.records {
            let mut len = [0u8; 4];
            r.read_exact(&mut len).map_err(in_temp_dir)?;
            buf.resize(u32::from_le_bytes(len) as usize, 0);
            r.read_exact(&mut buf).map_err(in_temp_dir)?;
            f(&buf)?;
        }
        debug_assert!(r.fill_buf().map(|b| b.is_empty()).unwrap_or(true));
        Ok(())
    }
}

/// Fails, saying why, when a spool could not move its rows to a temporary file: one is made
/// and dropped at once.
pub(crate) fn probe() -> std::io::Result<()> {
    tempfile::tempfile().map(drop).map_err(in_temp_dir)
}

/// A spool's I/O error, saying where the rows were kept.
fn in_temp_dir(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!(
            "keeping the report's rows in a temporary file in {}: {e}",
            std::env::temp_dir().display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::Spool;

    #[test]
    fn records_come_back_in_order_from_memory_and_from_the_file() {
        for budget in [0, 10, 1 << 20] {
            let mut s = Spool::new(budget);
            let rows: Vec<Vec<u8>> = (0..500u32)
                .map(|i| format!("row {i}").repeat(i as usize % 7).into_bytes())
                .collect();
            for r in &rows {
                s.push(r);
            }
            for _ in 0..2 {
                let mut back = Vec::new();
                s.each(&mut |r| {
                    back.push(r.to_vec());
                    Ok(())
                })
                .unwrap();
                assert_eq!(back, rows, "budget {budget}");
            }
        }
    }
}
