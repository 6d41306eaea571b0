//! How a write command's report reaches stdout: streamed as its threads come, or held and
//! rendered whole (docs/performance.md, "Reports of many threads").

use crate::render::{self, output};
use dfck_core::error::Error;

/// How a write command's report is written: as its threads come (`streamed`) where the
/// format allows and nothing asks for it whole (`streamable`; the `report-held` failpoint in
/// tests), else held and rendered whole (`held`, `table`).
pub(crate) struct ReportWriting<R, T> {
    /// The command's name, for the failpoints.
    pub command: &'static str,
    /// A stream of the command's rows ([`render::streams`]).
    pub stream: fn(render::Format) -> Result<render::ReportStream<R>, Error>,
    /// The lines above the table.
    pub head: fn(&T) -> String,
    /// The whole report as text.
    pub table: fn(&T) -> String,
    /// The command writes to the store (`--apply`) ([`streamed`]).
    pub writes: bool,
}

impl<R: serde::Serialize, T: serde::Serialize> ReportWriting<R, T> {
    /// Runs the command (`each`: each thread's report to the sink, the totals returned;
    /// `held`: the whole report) and writes its report in `format`.
    pub fn write(
        &self,
        format: render::Format,
        streamable: bool,
        each: impl FnOnce(&mut (dyn FnMut(R) -> Result<(), Error> + Send)) -> Result<T, Error>,
        held: impl FnOnce() -> Result<T, Error>,
    ) -> Result<T, Error> {
        if streamable && streamed(self.command, format, self.writes) {
            let mut out = (self.stream)(format)?;
            let report = each(&mut |r| out.push(&r))?;
            out.finish((self.head)(&report), &report)?;
            return Ok(report);
        }
        let report = held()?;
        output(format, &report, self.table)?;
        Ok(report)
    }
}

/// Whether `command`'s report is written as its rows come: where `format` streams and no
/// failpoint (`report-held`) asks for it whole. A command that `writes` to the store streams
/// only where its rows could wait in a temporary file; otherwise its report is held in
/// memory, as a note on stderr says, so that a report is never lost after the writes.
pub(crate) fn streamed(command: &'static str, format: render::Format, writes: bool) -> bool {
    let failpoints = dfck_core::failpoint::Failpoints::from_env(command);
    if !render::streams(format) || failpoints.report_held() {
        return false;
    }
    if writes {
        if let Err(e) = render::check_stream_before_writes(format) {
            render::note(&format!(
                "dfck: note: {e}; the report is held in memory instead"
            ));
            return false;
        }
    }
    true
}
