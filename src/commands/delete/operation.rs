//! A thread operation the way DeerFlow runs one (`reserve_thread_operation`): the reservation
//! taken before the thread's transaction, in a committed transaction of its own (a `pending`
//! `runs` row, `operation_kind = 'delete'`, owner `dfck:HOST:PID`, a lease), so DeerFlow starts
//! no run on the thread meanwhile; the thread's files removed after the commit; the
//! reservation released last. A rerun after a crash takes over the reservation an earlier
//! dfck left behind. Shared by `dfck delete` and `prune --older-than/--idle` on a DeerFlow
//! database.

use dfck_core::deerflow::{ActiveRun, AppSchema, files};
use dfck_core::store::Store;
use dfck_core::write::Refusal;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// The reservations and file steps of one run.
pub struct ThreadOperation {
    /// DeerFlow's schema (the reservation needs `runs.operation_kind`).
    pub schema: AppSchema,
    /// This process's worker id.
    pub owner: String,
    /// The base directory of thread files (`None`: files are not DeerFlow's to remove here).
    pub base_dir: Option<PathBuf>,
    /// With `--erase` and DeerFlow's `jsonl` run-events backend, the root of the event files.
    pub events_dir: Option<PathBuf>,
    /// Reservations held, by thread: (run id, taken over from an earlier dfck).
    held: Mutex<HashMap<String, (String, bool)>>,
}

/// What the file step did for one thread.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FileStep {
    /// Directories removed (or that would be).
    pub removed: Vec<String>,
    /// Why nothing was looked at, or what failed.
    pub note: Option<String>,
}

impl ThreadOperation {
    /// For a store with DeerFlow's `schema`.
    pub fn new(schema: AppSchema, base_dir: Option<PathBuf>, events_dir: Option<PathBuf>) -> Self {
        ThreadOperation {
            schema,
            owner: dfck_core::deerflow::owner_worker_id(),
            base_dir,
            events_dir,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// The run id of the reservation held on `thread_id`.
    pub fn reservation(&self, thread_id: &str) -> Option<String> {
        self.held
            .lock()
            .ok()
            .and_then(|h| h.get(thread_id).map(|(r, _)| r.clone()))
    }

    /// Takes the reservation (or takes over one an earlier dfck left); a refusal naming what
    /// holds the thread otherwise.
    pub fn reserve(
        &self,
        store: &dyn Store,
        thread_id: &str,
        user_id: Option<&str>,
    ) -> Result<(), Refusal> {
        let fail =
            |e: dfck_core::error::StoreError| Refusal(format!("reserving the thread failed: {e}"));
        let app = store
            .app()
            .ok_or_else(|| Refusal("the store has no DeerFlow tables".into()))?;
        let run_id = new_run_id();
        if app
            .reserve_delete(&run_id, thread_id, user_id, &self.owner)
            .map_err(fail)?
        {
            self.remember(thread_id, run_id, false);
            return Ok(());
        }
        let active: Vec<ActiveRun> = app
            .active_runs(&self.schema)
            .map_err(fail)?
            .into_iter()
            .filter(|r| r.thread_id == thread_id)
            .collect();
        let now = dfck_core::time::now_micros() / 1_000_000;
        if let [ours] = active.as_slice() {
            if ours.is_dfcks() && (ours.lease_expired(now) || !alive(ours)) {
                app.take_over(&ours.run_id, &self.owner).map_err(fail)?;
                self.remember(thread_id, ours.run_id.clone(), true);
                return Ok(());
            }
        }
        Err(Refusal(match active.first() {
            Some(r) => format!(
                "DeerFlow has work in flight on this thread: {}; delete it after the work finishes",
                r.describe()
            ),
            None => "DeerFlow's runs table refused the reservation".into(),
        }))
    }

    /// Whether the reservation of `thread_id` was taken over from an earlier dfck (a resumed
    /// delete).
    pub fn resumed(&self, thread_id: &str) -> bool {
        self.held
            .lock()
            .ok()
            .and_then(|h| h.get(thread_id).map(|(_, r)| *r))
            .unwrap_or(false)
    }

    /// Releases the reservation of `thread_id`, if one is held.
    pub fn release(
        &self,
        store: &dyn Store,
        thread_id: &str,
    ) -> Result<(), dfck_core::error::Error> {
        let taken = self.held.lock().ok().and_then(|mut h| h.remove(thread_id));
        if let (Some((run_id, _)), Some(app)) = (taken, store.app()) {
            app.release(&run_id)?;
        }
        Ok(())
    }

    /// Renews the lease of the reservation of `thread_id` (a long step follows).
    pub fn renew(&self, store: &dyn Store, thread_id: &str) -> Result<(), dfck_core::error::Error> {
        if let (Some(run_id), Some(app)) = (self.reservation(thread_id), store.app()) {
            app.renew(&run_id, &self.owner)?;
        }
        Ok(())
    }

    /// The thread's directories (`apply`: removed), as DeerFlow's delete removes them, and
    /// its JSONL event files when `events_dir` is set (an erasure).
    pub fn files(&self, thread_id: &str, user_id: Option<&str>, apply: bool) -> FileStep {
        let mut step = FileStep::default();
        if let Some(root) = &self.events_dir {
            for f in files::thread_event_files(root, thread_id) {
                if apply {
                    if let Err(e) = std::fs::remove_file(&f) {
                        step.note = Some(format!("{}: {e}", f.display()));
                        continue;
                    }
                }
                step.removed.push(f.display().to_string());
            }
        }
        let Some(base) = &self.base_dir else {
            step.note = Some(
                "no DeerFlow config found: thread files not looked at (pass --deerflow-home)"
                    .into(),
            );
            return step;
        };
        let dirs = match files::thread_dirs(base, thread_id, user_id) {
            Ok(d) => d,
            Err(why) => {
                step.note = Some(why);
                return step;
            }
        };
        for d in dirs {
            if apply {
                if let Err(e) = files::remove_thread_dir(base, &d) {
                    step.note = Some(format!("{}: {e}", d.display()));
                    continue;
                }
            }
            step.removed.push(d.display().to_string());
        }
        step
    }

    fn remember(&self, thread_id: &str, run_id: String, resumed: bool) {
        if let Ok(mut h) = self.held.lock() {
            h.insert(thread_id.to_owned(), (run_id, resumed));
        }
    }
}

/// A fresh run id in the form of DeerFlow's (`str(uuid4())`).
fn new_run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Whether the dfck process named in a reservation's owner may still run: on this host, its
/// pid alive; on another host, not known (only its lease says).
fn alive(r: &ActiveRun) -> bool {
    let Some(owner) = r.owner_worker_id.as_deref() else {
        return false;
    };
    let mine = dfck_core::deerflow::owner_worker_id();
    let host = |o: &str| o.rsplit_once(':').map(|(h, _)| h.to_owned());
    if host(owner) != host(&mine) {
        return true;
    }
    owner
        .rsplit_once(':')
        .and_then(|(_, pid)| pid.parse::<i32>().ok())
        // EPERM: the process exists, as another user (not ours to signal), so it is alive.
        .is_some_and(|pid| {
            matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Ok(()) | Err(nix::errno::Errno::EPERM)
            )
        })
}
