//! The `dfck` binary: parse, dispatch, map errors to exit codes. Nothing else.

use clap::Parser;
use dfck::cli::{Cli, run};

fn main() {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let msg = e.to_string().replace(['\n', '\r'], " ");
            eprintln!("dfck: error: {msg}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
