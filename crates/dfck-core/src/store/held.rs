//! A batch of threads read ahead, held in memory as a store of its own ([`HeldStore`]), so
//! that a dry run can plan its threads on a second thread while the connection reads the
//! next batch (`crate::write::dry_run`). It answers what the connection's store answers
//! from a batch read ahead ([`super::Store::read_ahead`]): a thread's namespaces, each
//! namespace's checkpoints and writes, once. Any other read is *missed*: it fails, and the
//! store remembers it, so that the plan is thrown away and made again on the connection.
//! A plan made here is one the connection's store would make from the same rows.

use super::app::AppTables;
use super::app_copy::AppRows;
use super::batch::{ReadAhead, ThreadRows};
use super::maintenance::MaintenanceTable;
use super::space::{ChannelTotals, StoreSpace};
use super::{
    Backend, CheckpointMetaRow, CheckpointRow, CheckpointTime, CheckpointWriteTotals, Store,
    StoreInfo, StoredValue, WriteRow, WriteTotals,
};
use crate::error::StoreError;
use std::cell::{Cell, RefCell};

/// What a held store copies of the connection's store: the answers that need no read.
#[derive(Debug, Clone)]
pub struct StoreShape {
    info: StoreInfo,
    values_shared: bool,
    bytewise: bool,
}

impl StoreShape {
    /// The shape of `store`.
    pub fn of(store: &dyn Store) -> Self {
        StoreShape {
            info: store.info().clone(),
            values_shared: store.values_shared_by_version(),
            bytewise: store.scans_bytewise(),
        }
    }

    /// How a batch read with `values` is held, as the backend holds it: SQLite's rows
    /// always carry their values, so its scans and value scans are the same.
    pub fn ahead_values(&self, values: bool) -> bool {
        values && self.values_shared
    }
}

/// A batch of threads as a read-only store; see the module header.
pub struct HeldStore {
    shape: StoreShape,
    ahead: RefCell<ReadAhead>,
    missed: Cell<bool>,
}

impl HeldStore {
    /// Holds `read`, read with `values` from a store of `shape`.
    pub fn new(shape: StoreShape, read: Vec<ThreadRows>, values: bool) -> Self {
        let values = shape.ahead_values(values);
        HeldStore {
            shape,
            ahead: RefCell::new(ReadAhead::new(read, values, true)),
            missed: Cell::new(false),
        }
    }

    /// Whether a read was missed since the last call.
    pub fn take_missed(&self) -> bool {
        self.missed.replace(false)
    }

    fn miss(&self) -> StoreError {
        self.missed.set(true);
        StoreError::Query {
            what: "planning from a batch read ahead".into(),
            reason: "not held in memory".into(),
        }
    }

    fn pg(&self) -> bool {
        self.shape.info.backend == Backend::Postgres
    }

    fn take(
        &self,
        thread_id: &str,
        ns: &str,
        values: bool,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        crate::store::batch::serve_checkpoints(&self.ahead, thread_id, ns, values, f)
            .unwrap_or_else(|| Err(self.miss()))
    }
}

impl Store for HeldStore {
    fn info(&self) -> &StoreInfo {
        &self.shape.info
    }

    fn scans_bytewise(&self) -> bool {
        self.shape.bytewise
    }

    fn values_shared_by_version(&self) -> bool {
        self.shape.values_shared
    }

    fn namespaces(&self, thread_id: &str) -> Result<Vec<String>, StoreError> {
        let ahead = self.ahead.borrow();
        if let Some(ns) = ahead.namespaces(thread_id) {
            return Ok(ns);
        }
        // A batch-required test build fails here as the connection's store would.
        ahead.missed(thread_id)?;
        Err(self.miss())
    }

    fn scan_thread(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.take(thread_id, ns, false, f)
    }

    fn scan_thread_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.take(thread_id, ns, self.shape.values_shared, f)
    }

    fn thread_writes(&self, thread_id: &str, ns: &str) -> Result<Vec<WriteRow>, StoreError> {
        let rows = self.ahead.borrow_mut().take_writes(thread_id, ns);
        rows.ok_or_else(|| self.miss())
    }

    fn scan_stored_values(
        &self,
        thread_id: &str,
        ns: &str,
        f: &mut dyn FnMut(StoredValue) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // PostgreSQL reads its values by blob, not from a batch.
        if self.pg() {
            return Err(self.miss());
        }
        super::stored_values_of(self, thread_id, ns, f)
    }

    fn checkpoint_times(
        &self,
        _thread_id: &str,
    ) -> Result<Option<Vec<CheckpointTime>>, StoreError> {
        // PostgreSQL reads them on their own (SQLite has none without the values).
        match self.pg() {
            true => Err(self.miss()),
            false => Ok(None),
        }
    }

    fn begin_read_transaction(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn end_read_transaction(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn app(&self) -> Option<&dyn AppTables> {
        self.missed.set(true);
        None
    }

    fn maintenance(&self) -> Option<&dyn MaintenanceTable> {
        self.missed.set(true);
        None
    }

    fn app_rows(&self) -> Option<&dyn AppRows> {
        self.missed.set(true);
        None
    }

    fn active_run(&self, _thread_id: &str) -> Result<bool, StoreError> {
        Err(self.miss())
    }

    fn scan_checkpoints_whole(
        &self,
        _max_body: u64,
        _f: &mut dyn FnMut(CheckpointMetaRow, Option<super::FactsRow>) -> Result<(), StoreError>,
    ) -> Result<super::WholeScan, StoreError> {
        Err(self.miss())
    }

    fn scan_checkpoint_meta(
        &self,
        _f: &mut dyn FnMut(CheckpointMetaRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn write_totals(&self) -> Result<(u64, u64), StoreError> {
        Err(self.miss())
    }

    fn write_totals_of(
        &self,
        _threads: &[String],
        _f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn blob_totals_of(
        &self,
        _threads: &[String],
        _f: &mut dyn FnMut(WriteTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn blob_totals(&self) -> Result<(u64, u64), StoreError> {
        Err(self.miss())
    }

    fn space(&self) -> Result<StoreSpace, StoreError> {
        Err(self.miss())
    }

    fn scan_write_channels(
        &self,
        _f: &mut dyn FnMut(ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn scan_value_channels(
        &self,
        _f: &mut dyn FnMut(ChannelTotals) -> Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        Err(self.miss())
    }

    fn scan_thread_ids(
        &self,
        _f: &mut dyn FnMut(String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn thread_ids_after(&self, _after: Option<&str>, _n: usize) -> Result<Vec<String>, StoreError> {
        Err(self.miss())
    }

    fn checkpoint_ids_with_prefix(
        &self,
        _thread_id: &str,
        _ns: &str,
        _prefix: &str,
        _limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        Err(self.miss())
    }

    fn checkpoints_with_prefix(
        &self,
        _prefix: &str,
        _limit: usize,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        Err(self.miss())
    }

    fn head_id(&self, _thread_id: &str, _ns: &str) -> Result<Option<String>, StoreError> {
        Err(self.miss())
    }

    fn checkpoint(
        &self,
        _thread_id: &str,
        _ns: &str,
        _checkpoint_id: &str,
    ) -> Result<Option<CheckpointRow>, StoreError> {
        Err(self.miss())
    }

    fn checkpoints_at(
        &self,
        _keys: &[super::CheckpointKey],
        _f: &mut dyn FnMut(CheckpointRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn write_bytes_at(&self, _keys: &[super::CheckpointKey]) -> Result<Vec<u64>, StoreError> {
        Err(self.miss())
    }

    fn checkpoint_facts_at(
        &self,
        _keys: &[super::CheckpointKey],
        _want: super::FactsWanted,
        _f: &mut dyn FnMut(super::FactsRow) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn metadata(
        &self,
        _thread_id: &str,
        _ns: &str,
        _checkpoint_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Err(self.miss())
    }

    fn read_threads(
        &self,
        _ids: &[String],
        _budget: usize,
        _values: bool,
    ) -> Result<Option<Vec<ThreadRows>>, StoreError> {
        Err(self.miss())
    }

    fn read_ahead(&self, _ids: &[String], _budget: usize, _values: bool) -> Result<(), StoreError> {
        Err(self.miss())
    }

    fn writes(
        &self,
        _thread_id: &str,
        _ns: &str,
        _checkpoint_id: &str,
        _channel: Option<&str>,
    ) -> Result<Vec<WriteRow>, StoreError> {
        Err(self.miss())
    }

    fn write_totals_by_checkpoint(
        &self,
        _thread_id: &str,
        _ns: &str,
    ) -> Result<Vec<CheckpointWriteTotals>, StoreError> {
        Err(self.miss())
    }
}
