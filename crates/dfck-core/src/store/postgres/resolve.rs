//! Completing a connection string the way libpq does (docs/postgres-connection.md): values
//! given win, then the service's section of the service file, then the `PG*` environment,
//! then the defaults; a missing password comes from the password file. Every value remembers
//! where it came from, so that errors can say so.

use super::conninfo::{self, KEYWORDS};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a connection value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The connection string itself.
    Given,
    /// A service file section.
    Service(PathBuf),
    /// An environment variable.
    Env(&'static str),
    /// libpq's default.
    Default,
    /// The password file.
    Passfile(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Given => write!(f, "the connection string"),
            Source::Service(p) => write!(f, "service file {}", p.display()),
            Source::Env(v) => write!(f, "{v}"),
            Source::Default => write!(f, "default"),
            Source::Passfile(p) => write!(f, "password file {}", p.display()),
        }
    }
}

/// A complete set of connection values.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    values: BTreeMap<String, (String, Source)>,
    /// Why a password file was not used (group/world readable, …), for error messages.
    pub passfile_note: Option<String>,
}

impl Resolved {
    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(|(v, _)| v.as_str())
    }

    /// Where `key`'s value came from.
    pub fn source(&self, key: &str) -> Option<&Source> {
        self.values.get(key).map(|(_, s)| s)
    }

    fn set(&mut self, key: &str, value: String, source: Source) {
        self.values.insert(key.to_owned(), (value, source));
    }

    /// The values other than the password, in libpq's keyword order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        KEYWORDS
            .iter()
            .filter_map(|(k, _)| self.get(k).map(|v| (*k, v)))
    }

    /// `user@host:port/dbname`, never the password.
    pub fn summary(&self) -> String {
        format!(
            "{}@{}:{}/{}",
            self.get("user").unwrap_or_default(),
            self.get("host")
                .or(self.get("hostaddr"))
                .unwrap_or_default(),
            self.get("port").unwrap_or("5432"),
            self.get("dbname").unwrap_or_default(),
        )
    }

    /// The values that did not come from the connection string, e.g.
    /// `host from PGHOST, password from password file ~/.pgpass`.
    pub fn origins(&self) -> String {
        let mut parts = Vec::new();
        for key in [
            "service", "host", "hostaddr", "port", "dbname", "user", "password",
        ] {
            match self.source(key) {
                Some(Source::Given) | Some(Source::Default) | None => {}
                Some(s) => parts.push(format!("{key} from {s}")),
            }
        }
        if let Some(mode) = self.get("sslmode") {
            if let Some(s) = self
                .source("sslmode")
                .filter(|s| !matches!(s, Source::Given | Source::Default))
            {
                parts.push(format!("sslmode={mode} from {s}"));
            }
        }
        parts.join(", ")
    }
}

/// Reads the environment (a closure, so tests can supply their own).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Completes `input` (a URL or keyword DSN): service file, environment, defaults, password
/// file. Errors are one line without the password.
pub fn resolve(input: &str, env: Env<'_>) -> Result<Resolved, String> {
    let mut r = Resolved::default();
    for (k, v) in conninfo::parse(input)? {
        r.set(&k, v, Source::Given);
    }
    let env_nonempty = |k: &str| env(k).filter(|v| !v.is_empty());
    let service = r
        .get("service")
        .map(str::to_owned)
        .or_else(|| env_nonempty("PGSERVICE"));
    if let Some(name) = service {
        if r.get("service").is_none() {
            r.set("service", name.clone(), Source::Env("PGSERVICE"));
        }
        let (file, section) = find_service(&name, env)?;
        for (k, v) in section {
            if !conninfo::is_keyword(&k) || k == "service" {
                return Err(format!(
                    "syntax error in service file {}: invalid connection option \"{k}\"",
                    file.display()
                ));
            }
            if r.get(&k).is_none() {
                r.set(&k, v, Source::Service(file.clone()));
            }
        }
    }
    for (key, var) in KEYWORDS {
        if r.get(key).is_some() {
            continue;
        }
        if let Some(var) = var {
            if let Some(v) = env_nonempty(var) {
                r.set(key, v, Source::Env(var));
            }
        }
    }
    if r.get("host").is_none() && r.get("hostaddr").is_none() {
        r.set("host", default_socket_dir(), Source::Default);
    }
    if r.get("port").is_none() {
        r.set("port", "5432".into(), Source::Default);
    }
    if r.get("user").is_none() {
        let user = os_user(env).ok_or("no user name: set PGUSER or give user=")?;
        r.set("user", user, Source::Default);
    }
    if r.get("dbname").is_none() {
        let user = r.get("user").unwrap_or_default().to_owned();
        r.set("dbname", user, Source::Default);
    }
    if r.get("sslmode").is_none() {
        r.set("sslmode", "prefer".into(), Source::Default);
    }
    if r.get("password").is_none() {
        let file = match r.get("passfile") {
            Some(p) => Some(PathBuf::from(p)),
            None => home(env).map(|h| h.join(".pgpass")),
        };
        if let Some(file) = file {
            match password_from_file(&r, &file) {
                Ok(Some(pw)) => r.set("password", pw, Source::Passfile(file)),
                Ok(None) => {}
                Err(note) => r.passfile_note = Some(note),
            }
        }
    }
    Ok(r)
}

/// The home directory (`HOME`).
fn home(env: Env<'_>) -> Option<PathBuf> {
    env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// libpq's default socket directory: the Debian one when it exists, else `/tmp`.
fn default_socket_dir() -> String {
    if Path::new("/var/run/postgresql").is_dir() {
        "/var/run/postgresql".into()
    } else {
        "/tmp".into()
    }
}

/// The operating-system user name: `USER`/`LOGNAME`, else the password database entry of
/// this process's uid.
fn os_user(env: Env<'_>) -> Option<String> {
    if let Some(u) = env("USER")
        .or_else(|| env("LOGNAME"))
        .filter(|u| !u.is_empty())
    {
        return Some(u);
    }
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok()?.uid().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2] == uid).then(|| f[0].to_owned())
    })
}

/// The section `[name]` of the user's service file (`PGSERVICEFILE`, else
/// `~/.pg_service.conf`), else of `PGSYSCONFDIR/pg_service.conf`.
fn find_service(name: &str, env: Env<'_>) -> Result<(PathBuf, Vec<(String, String)>), String> {
    let mut files = Vec::new();
    match env("PGSERVICEFILE").filter(|v| !v.is_empty()) {
        Some(f) => files.push(PathBuf::from(f)),
        None => files.extend(home(env).map(|h| h.join(".pg_service.conf"))),
    }
    let sysconf = env("PGSYSCONFDIR")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "/etc/postgresql-common".into());
    files.push(Path::new(&sysconf).join("pg_service.conf"));
    for file in &files {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read service file {}: {e}", file.display())),
        };
        if let Some(section) = service_section(&text, name, file)? {
            return Ok((file.clone(), section));
        }
    }
    let looked: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    Err(format!(
        "definition of service \"{name}\" not found (looked in {})",
        looked.join(", ")
    ))
}

/// Parses one service file and returns the section `[name]`, if present.
fn service_section(
    text: &str,
    name: &str,
    file: &Path,
) -> Result<Option<Vec<(String, String)>>, String> {
    let mut current: Option<&str> = None;
    let mut found: Option<Vec<(String, String)>> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(sect) = line.strip_prefix('[') {
            if found.is_some() {
                break;
            }
            let sect = sect.strip_suffix(']').ok_or_else(|| {
                format!(
                    "syntax error in service file {}, line {}",
                    file.display(),
                    n + 1
                )
            })?;
            current = Some(sect.trim());
            if current == Some(name) {
                found = Some(Vec::new());
            }
            continue;
        }
        if current != Some(name) {
            continue;
        }
        let (k, v) = line.split_once('=').ok_or_else(|| {
            format!(
                "syntax error in service file {}, line {}",
                file.display(),
                n + 1
            )
        })?;
        if let Some(sect) = found.as_mut() {
            sect.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    Ok(found)
}

/// The password for the resolved host/port/dbname/user from a `.pgpass` file, or why the
/// file was ignored (libpq ignores one that others may read).
fn password_from_file(r: &Resolved, file: &Path) -> Result<Option<String>, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(file) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Err(format!(
            "password file {} is not a plain file",
            file.display()
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "password file {} ignored: it has group or world access (chmod 0600)",
            file.display()
        ));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read password file {}: {e}", file.display()))?;
    let first = |v: &str| v.split(',').next().unwrap_or_default().to_owned();
    let mut host = first(r.get("host").or(r.get("hostaddr")).unwrap_or_default());
    if host.is_empty() || host == default_socket_dir() {
        host = "localhost".into();
    }
    let port = first(r.get("port").unwrap_or("5432"));
    let port = if port.is_empty() { "5432".into() } else { port };
    let wanted = [
        host.as_str(),
        port.as_str(),
        r.get("dbname").unwrap_or_default(),
        r.get("user").unwrap_or_default(),
    ];
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = pgpass_fields(line);
        if fields.len() < 5 {
            continue;
        }
        if wanted
            .iter()
            .zip(&fields)
            .all(|(want, f)| f == "*" || f == want)
        {
            return Ok(Some(fields[4..].join(":")));
        }
    }
    Ok(None)
}

/// Splits a `.pgpass` line at unescaped colons (`\:` and `\\` are escapes).
fn pgpass_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(n), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c)
                }
            }
        }
    }
    fields
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
