//! The `dfck` binary: parse, dispatch, and map outcomes and errors to exit codes in this one
//! place. Nothing else.

use clap::Parser;
use dfck::cli::{Cli, run};
use dfck::outcome::Outcome;

fn main() {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(Outcome::Clean) => 0,
        Ok(Outcome::Findings | Outcome::Refused | Outcome::Failed) => 1,
        Ok(Outcome::Interrupted) => 130,
        Err(e) => {
            // One line, and no terminal control sequences from store data.
            let msg = e.to_string().replace(['\n', '\r'], " ");
            let msg = dfck::render::escape::cell(&msg);
            eprintln!("dfck: error: {msg}");
            2
        }
    };
    std::process::exit(code);
}
