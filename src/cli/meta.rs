//! `dfck completions`, `dfck manpage` and `dfck explain`: dfck describing itself.

use super::{GlobalArgs, output};
use crate::render;
use clap::Args;
use dfck_core::error::Error;
use dfck_core::outcome::Outcome;
use std::path::PathBuf;

/// Arguments of `dfck completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `dfck manpage`.
#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Write one page per command (dfck.1, dfck-inspect.1, …) into this directory instead of
    /// printing dfck.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Arguments of `dfck explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A finding code (`delta.fork_contaminated`) or a unique part of one (`cycle`); without
    /// it, every code with its severity and meaning.
    pub code: Option<String>,
}

/// Prints the completion script for a shell.
pub fn completions(args: &CompletionsArgs) -> Result<Outcome, Error> {
    let mut cmd = super::help::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "dfck", &mut buf);
    render::emit(&String::from_utf8_lossy(&buf))?;
    Ok(Outcome::Clean)
}

/// Prints dfck.1, or writes every command's page into a directory.
pub fn manpage(args: &ManpageArgs) -> Result<Outcome, Error> {
    let cmd = super::help::command();
    let Some(dir) = &args.dir else {
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut buf)?;
        render::emit(&String::from_utf8_lossy(&buf))?;
        return Ok(Outcome::Clean);
    };
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = 0;
    let mut stack = vec![cmd];
    while let Some(cmd) = stack.pop() {
        stack.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        clap_mangen::Man::new(cmd).generate_to(dir)?;
        written += 1;
    }
    render::note(&format!(
        "dfck: wrote {written} man pages to {}",
        dir.display()
    ));
    Ok(Outcome::Clean)
}

/// Explains one finding code, or lists them all.
pub fn explain(global: &GlobalArgs, args: &ExplainArgs) -> Result<Outcome, Error> {
    match &args.code {
        Some(code) => {
            let code =
                crate::commands::explain::lookup(code).map_err(|e| Error::Usage(e.to_string()))?;
            output(
                global.format(),
                &crate::commands::explain::explain(code),
                render::meta::explanation_text,
            )?;
        }
        None => {
            let all: Vec<_> = dfck_core::finding::FindingCode::ALL
                .iter()
                .map(|c| crate::commands::explain::explain(*c))
                .collect();
            output(global.format(), &all, |all| {
                render::meta::explanation_list(all)
            })?;
        }
    }
    Ok(Outcome::Clean)
}
