//! The command line as a person meets it: the EXAMPLES of every command's `--help`, the long
//! `--version`, and which shared options each command shows (and accepts on the command
//! line). [`command`] is the one clap command that parsing, completions and man pages use.

use super::Cli;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

/// Examples per command path (`"bench channels"`), shown under `Examples:` in `--help`. Every
/// command has an entry (tests/it/self_describing.rs checks it).
const EXAMPLES: &[(&str, &str)] = &[
    (
        "",
        "dfck inspect --db deerflow.db                   # what is in a store
  dfck verify --db postgresql://                  # check it (PG* environment, ~/.pgpass)
  dfck explain delta.fork_contaminated            # what a finding means, what to do",
    ),
    (
        "inspect",
        "dfck inspect --db deerflow.db                          # store summary
  dfck inspect t-1 --db deerflow.db                      # the thread's checkpoints
  dfck inspect t-1 --state                               # state at the head (config.yaml found)
  dfck inspect t-1 --state --checkpoint 1f0a3 --format json   # an id prefix is enough
  dfck inspect t-1 --state --last 3 --full               # the last 3 messages, untruncated
  dfck inspect --format csv --no-headers                 # one thread per line, for scripts
  dfck inspect --format openmetrics > m.tmp && mv m.tmp dfck.prom   # node_exporter textfile
  dfck --db 'host=db dbname=deerflow sslmode=verify-full' inspect",
    ),
    (
        "audit",
        "dfck audit --db deerflow.db                    # each import, classed for strict mode
  dfck audit --emit python > allowlist.py         # allowed_msgpack_modules = [(\"mod\", \"Name\"), …]
  dfck audit --emit langgraph-json                # checkpointer.serde for langgraph.json
  dfck audit --emit env                           # LANGGRAPH_STRICT_MSGPACK=true, when enough
  DFCK_DB=postgresql://app@db/deerflow dfck audit --jobs 4 --format json",
    ),
    (
        "verify",
        "dfck verify --db deerflow.db                   # every thread; exit 1 on errors
  dfck verify t-1 t-2 --format json
  dfck verify --format ndjson | jq -r .code      # one finding per line
  DFCK_DB=postgresql://app@db/deerflow dfck verify --jobs 4",
    ),
    (
        "lineage",
        "dfck lineage t-1 --db deerflow.db              # head to root
  dfck lineage t-1 --tree                         # the whole tree with its forks
  dfck lineage t-1 --checkpoint 1f0a3             # from a checkpoint (unique id prefix)",
    ),
    (
        "migrate",
        "dfck migrate delta-to-full --all --db deerflow.db            # the plan (dry run)
  dfck migrate delta-to-full --all --apply --backup pre.db",
    ),
    (
        "migrate delta-to-full",
        "dfck migrate delta-to-full --all --db deerflow.db            # the plan (dry run)
  dfck migrate delta-to-full t-1 --apply --backup pre.db        # convert one thread
  dfck migrate delta-to-full --all --apply --jobs 4 --db postgresql://app@db/deerflow",
    ),
    (
        "migrate full-to-delta",
        "dfck migrate full-to-delta --all --db deerflow.db            # the plan (dry run)
  dfck migrate full-to-delta --all --snapshot-frequency 50 --apply --backup pre.db",
    ),
    (
        "prune",
        "dfck prune --all --branches --db deerflow.db                  # what would go (dry run)
  dfck prune --all --older-than 30d --keep-last-turns 5 --apply
  dfck prune t-1 --branches --protect 1f0a3 --apply",
    ),
    (
        "reclaim",
        "dfck reclaim --db deerflow.db                               # what would be freed
  dfck reclaim --into compact.db --apply",
    ),
    (
        "copy",
        "dfck copy --to postgresql://app@db/deerflow --all --db deerflow.db   # the plan
  dfck copy --to backup.db t-1 t-2 --apply
  dfck copy --to postgresql:// --to-pg-schema archive --all --replace --apply --jobs 4",
    ),
    (
        "bench",
        "dfck bench channels --backends memory,sqlite --output rows.jsonl
  dfck bench summarize rows.jsonl",
    ),
    (
        "bench channels",
        "dfck bench channels --backends memory,sqlite --updates 100 --output rows.jsonl
  dfck bench channels --backends postgres --db postgresql://bench@localhost/bench --output pg.jsonl
  dfck bench channels --engine langgraph --python .venv/bin/python --output lg.jsonl",
    ),
    (
        "bench production",
        "dfck bench production --backends sqlite --turns 10 --output prod.jsonl
  dfck bench production --replay-from deerflow.db --sample 5 --output replay.jsonl",
    ),
    (
        "bench summarize",
        "dfck bench summarize rows.jsonl
  dfck bench summarize a.jsonl b.jsonl --json
  dfck bench summarize rows.jsonl --wide           # a row per group, every metric across
  dfck bench summarize rows.jsonl --plot sizes.svg",
    ),
    (
        "diff",
        "dfck diff t-1 1f0a3 1f0b7 --db deerflow.db     # what changed between two checkpoints
  dfck diff t-1 1f0a3 1f0a3 --thread2 t-2         # the same id across threads
  dfck diff t-1 1f0a3 1f0a3 --db2 copy.db --format json",
    ),
    (
        "completions",
        "dfck completions bash > ~/.local/share/bash-completion/completions/dfck
  dfck completions zsh > ~/.zfunc/_dfck
  dfck completions fish > ~/.config/fish/completions/dfck.fish",
    ),
    (
        "manpage",
        "dfck manpage > dfck.1 && man ./dfck.1
  dfck manpage --dir /usr/local/share/man/man1    # one page per command",
    ),
    (
        "explain",
        "dfck explain                                    # every code, one line each
  dfck explain delta.fork_contaminated
  dfck explain cycle                              # a unique part of a code is enough",
    ),
];

/// Shared options a command does not use: hidden from its help and refused on its command
/// line. Commands not listed use them all.
const UNUSED_GLOBALS: &[(&str, &[&str])] = &[
    (
        "bench",
        &["format", "pretty", "no_headers", "color", "pg_schema"],
    ),
    (
        "bench channels",
        &["format", "pretty", "no_headers", "color", "pg_schema"],
    ),
    (
        "bench production",
        &["format", "pretty", "no_headers", "color", "pg_schema"],
    ),
    (
        "bench summarize",
        &["db", "config", "deerflow_cwd", "env_file", "pg_schema"],
    ),
    (
        "completions",
        &[
            "db",
            "format",
            "pretty",
            "no_headers",
            "color",
            "config",
            "deerflow_cwd",
            "env_file",
            "pg_schema",
        ],
    ),
    (
        "manpage",
        &[
            "db",
            "format",
            "pretty",
            "no_headers",
            "color",
            "config",
            "deerflow_cwd",
            "env_file",
            "pg_schema",
        ],
    ),
    (
        "explain",
        &["db", "config", "deerflow_cwd", "env_file", "pg_schema"],
    ),
];

/// The examples of a command path, if any.
pub fn examples(path: &str) -> Option<&'static str> {
    EXAMPLES.iter().find(|(p, _)| *p == path).map(|(_, e)| *e)
}

fn unused_globals(path: &str) -> &'static [&'static str] {
    UNUSED_GLOBALS
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, a)| *a)
        .unwrap_or(&[])
}

/// `0.1.0 (git 1a2b3c4d5e6f)`.
fn short_version() -> String {
    let sha = dfck_bench::env::BUILD_GIT_SHA;
    format!(
        "{} (git {})",
        env!("CARGO_PKG_VERSION"),
        sha.get(..12).unwrap_or(sha)
    )
}

/// The version with what dfck reads.
fn long_version() -> String {
    format!(
        "{}\nrevision: {}\nreads:    LangGraph 1.2 checkpoints (DeltaChannel, _DeltaSnapshot), JsonPlusSerializer msgpack (ext 0-7)\n          SqliteSaver stores (langgraph-checkpoint-sqlite 3.x)\n          PostgresSaver stores, checkpoint_migrations v0-v{} (langgraph-checkpoint-postgres 3.x)\n          DeerFlow's delta marker and config.yaml discovery",
        short_version(),
        dfck_bench::env::BUILD_GIT_SHA,
        dfck_core::store::postgres::MAX_KNOWN_MIGRATION,
    )
}

/// Applies examples to `cmd` and its subcommands, recursively, and gives every subcommand
/// its own copy of each shared option, hidden where the command does not use it (clap copies
/// shared options down only where a command has none of its own).
fn decorate(mut cmd: clap::Command, path: &str, globals: &[clap::Arg]) -> clap::Command {
    if let Some(e) = examples(path) {
        cmd = cmd.after_help(format!("Examples:\n  {e}"));
    }
    if !path.is_empty() {
        let unused = unused_globals(path);
        for a in globals {
            let hidden = unused.contains(&a.get_id().as_str());
            cmd = cmd.arg(a.clone().hide(hidden || a.is_hide_set()));
        }
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(name, |s| decorate(s, &sub_path, globals));
    }
    cmd
}

/// The dfck command: clap's definition with examples, the long version and per-command help.
pub fn command() -> clap::Command {
    let version: &'static str = Box::leak(short_version().into_boxed_str());
    let long: &'static str = Box::leak(long_version().into_boxed_str());
    let cmd = Cli::command().version(version).long_version(long);
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    decorate(cmd, "", &globals)
}

/// Parses the process's arguments: clap's errors as they are, and a usage error for a shared
/// option given on the command line to a command that does not use it.
pub fn parse() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os())
}

/// [`parse`] over given arguments.
pub fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut cmd = command();
    let matches = cmd.try_get_matches_from_mut(args)?;
    let (path, leaf) = leaf(&matches);
    if let Some(msg) = openmetrics_misuse(&path, leaf) {
        return Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, msg));
    }
    for id in unused_globals(&path) {
        if leaf.value_source(id) == Some(ValueSource::CommandLine) {
            let flag = format!("--{}", id.replace('_', "-"));
            return Err(cmd.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!("{flag} is not used by `dfck {path}`"),
            ));
        }
    }
    if matches.value_source("config") == Some(ValueSource::CommandLine)
        && matches.value_source("db") == Some(ValueSource::CommandLine)
    {
        return Err(cmd.error(
            clap::error::ErrorKind::ArgumentConflict,
            "--config and --db both name the store: give one",
        ));
    }
    if let Some(msg) = contradiction(&matches, leaf) {
        return Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, msg));
    }
    let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.with_cmd(&cmd))?;
    match matches.value_source("db") {
        // An explicit --config beats DFCK_DB from the environment.
        Some(ValueSource::EnvVariable)
            if matches.value_source("config") == Some(ValueSource::CommandLine) =>
        {
            cli.global.db = None;
        }
        Some(ValueSource::EnvVariable) => cli.global.db_origin = Some("DFCK_DB"),
        Some(ValueSource::CommandLine) => cli.global.db_origin = Some("--db"),
        _ => {}
    }
    Ok(cli)
}

/// Format options that contradict each other: `--pretty` without `--format json`,
/// `--no-headers` with JSON, and bench summarize's `--json`/`--csv` beside another `--format`.
fn contradiction(matches: &ArgMatches, leaf: &ArgMatches) -> Option<String> {
    use super::FormatArg;
    let given = |m: &ArgMatches, id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    let flag = |id: &str| {
        leaf.try_get_one::<bool>(id)
            .ok()
            .flatten()
            .copied()
            .unwrap_or(false)
    };
    let format = leaf
        .try_get_one::<FormatArg>("format")
        .ok()
        .flatten()
        .copied()
        .unwrap_or(FormatArg::Table);
    let format_given = given(leaf, "format") || given(matches, "format");
    let name = |f: FormatArg| match f {
        FormatArg::Table => "table",
        FormatArg::Json => "json",
        FormatArg::Ndjson => "ndjson",
        FormatArg::Csv => "csv",
        FormatArg::Openmetrics => "openmetrics",
    };
    let summarize_json = flag("json") && leaf.try_get_one::<bool>("csv").is_ok();
    let json = format == FormatArg::Json || summarize_json;
    if flag("pretty") && !json {
        return Some(format!(
            "--pretty indents JSON, but the format is {}",
            name(format)
        ));
    }
    if flag("no_headers")
        && matches!(
            format,
            FormatArg::Json | FormatArg::Ndjson | FormatArg::Openmetrics
        )
    {
        return Some(format!(
            "--no-headers has no meaning with --format {}",
            name(format)
        ));
    }
    for (id, wants) in [("json", FormatArg::Json), ("csv", FormatArg::Csv)] {
        if flag(id) && format_given && format != wants {
            return Some(format!(
                "--{id} and --format {} ask for two formats: give one",
                name(format)
            ));
        }
    }
    None
}

/// `--format openmetrics` is the store summary's alone: another command, `inspect THREAD`, and
/// the summary's options that change what it lists (the metrics cover the whole store) are
/// refused, naming the format and the command.
fn openmetrics_misuse(path: &str, leaf: &ArgMatches) -> Option<String> {
    use super::FormatArg;
    let format = leaf.try_get_one::<FormatArg>("format").ok().flatten();
    if format != Some(&FormatArg::Openmetrics) {
        return None;
    }
    let what = "--format openmetrics: only the store summary (`dfck inspect` without a thread) has metrics";
    if path != "inspect" {
        return Some(format!("{what}, not `dfck {path}`"));
    }
    if leaf
        .try_get_one::<String>("thread")
        .ok()
        .flatten()
        .is_some()
    {
        return Some(format!("{what}, not `dfck inspect THREAD`"));
    }
    ["top", "channels", "savings"]
        .into_iter()
        .find(|id| leaf.value_source(id) == Some(ValueSource::CommandLine))
        .map(|id| {
            format!("--format openmetrics and --{id}: the metrics cover the whole store; leave --{id} out")
        })
}

/// The path of the subcommand that runs (`"bench channels"`) and its matches.
fn leaf(matches: &ArgMatches) -> (String, &ArgMatches) {
    let mut path = Vec::new();
    let mut m = matches;
    while let Some((name, sub)) = m.subcommand() {
        path.push(name.to_owned());
        m = sub;
    }
    (path.join(" "), m)
}
