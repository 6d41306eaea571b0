//! Rendering of `dfck maintain`: the run's table (what happened to which thread, each
//! step, how the run ended) and `--explain`'s effective policy.

use super::escape::owned as esc;
use super::{add_row, finish, table};
use crate::commands::maintain::{MaintainReport, ended};
use dfck_core::config::policy::Source;
use std::fmt::Write as _;

/// The human report of one run.
pub fn maintain_table(r: &MaintainReport) -> String {
    let mut out = String::new();
    if let Some(h) = &r.lease_held_by {
        let _ = writeln!(
            out,
            "maintain: another sweeper holds the lease: {}; nothing done",
            esc(h)
        );
        return finish(out);
    }
    let head = if r.dry_run {
        "dry run, nothing changed (--apply to do it)"
    } else {
        "done"
    };
    let _ = writeln!(out, "maintain: {head}");
    let _ = writeln!(out, "store:    {}", esc(&r.store));
    let run = &r.run;
    let resumed = match &r.resumed_after {
        Some(c) => format!(" (resumed after {})", esc(c)),
        None => String::new(),
    };
    let ex = &r.exempted;
    let exempt = if ex.total() > 0 {
        format!(
            "; exempted {} (pinned {}, threads {}, users {}, metadata key {})",
            ex.total(),
            ex.pinned,
            ex.threads,
            ex.users,
            ex.metadata_key
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "threads:  {} examined{resumed}{exempt}",
        run.threads_examined
    );
    let verb = if r.dry_run { "would be " } else { "" };
    let _ = writeln!(
        out,
        "result:   {} {verb}deleted, {} {verb}pruned, {} {verb}converted, {} refused; {} checkpoints {verb}deleted",
        run.threads_deleted,
        run.threads_pruned,
        run.threads_converted,
        run.threads_refused,
        run.checkpoints_deleted
    );
    if !r.threads.is_empty() {
        let mut t = table(&["thread", "action", "status", "checkpoints", "reason"]);
        for a in &r.threads {
            add_row(
                &mut t,
                vec![
                    a.thread_id.clone(),
                    a.action.as_str().into(),
                    a.status.into(),
                    a.checkpoints.to_string(),
                    a.reason.clone().unwrap_or_default(),
                ],
            );
        }
        let _ = writeln!(out, "{t}");
    }
    let mut t = table(&["step", "ran", "seconds", "why"]);
    for s in &r.steps {
        add_row(
            &mut t,
            vec![
                s.step.into(),
                if s.ran { "yes" } else { "no" }.into(),
                format!("{:.2}", s.seconds),
                s.reason.clone().unwrap_or_default(),
            ],
        );
    }
    let _ = writeln!(out, "{t}");
    if let Some(rc) = &r.reclaim {
        let _ = writeln!(out, "reclaim:  {}", rc.status.as_str());
        if let Some(why) = &rc.reason {
            let _ = writeln!(out, "          {}", esc(why));
        }
    }
    if let Some(f) = &run.findings {
        let total: u64 = f.iter().map(|c| c.count).sum();
        let list: Vec<String> = f
            .iter()
            .map(|c| format!("{} {} ({})", c.count, c.code, c.severity))
            .collect();
        let _ = writeln!(
            out,
            "verify:   {total} finding(s){}{}",
            if list.is_empty() { "" } else { ": " },
            list.join(", ")
        );
    }
    let next = match &r.next_after {
        Some(c) => format!("; the next run resumes after {}", esc(c)),
        None => String::new(),
    };
    let how = if run.ended == ended::COMPLETE {
        "every thread examined".to_owned()
    } else {
        run.ended.clone()
    };
    let _ = writeln!(out, "ended:    {how}{next} ({:.2} s)", run.seconds);
    finish(out)
}

/// `maintain --explain`: every policy key, its value and where it came from.
pub fn explain_table(sources: &[Source]) -> String {
    let mut t = table(&["key", "value", "from"]);
    for s in sources {
        add_row(&mut t, vec![s.key.clone(), s.value.clone(), s.from.clone()]);
    }
    finish(format!("{t}\n"))
}
