//! PostgreSQL the way psql users connect: the `PG*` environment, `.pgpass`, service files,
//! keyword DSNs, and `sslmode=verify-ca|verify-full` against the test server's certificate.

use crate::common::{assert_clean_failure, pg, require_postgres};
use std::path::Path;
use std::process::Output;

const PASSWORD: &str = "dfck-test-pw";

/// Host and port of the test server's URI.
fn host_port(uri: &str) -> (String, String) {
    let rest = uri.split_once("://").unwrap().1;
    let authority = rest.split(['/', '?']).next().unwrap();
    let hostport = authority.rsplit_once('@').map_or(authority, |x| x.1);
    let (h, p) = hostport.rsplit_once(':').unwrap_or((hostport, "5432"));
    (h.to_owned(), p.to_owned())
}

/// dfck with a clean libpq environment: no `PG*` variable but those given, `HOME` = `home`.
fn dfck_env(home: &Path, vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = crate::common::dfck_command();
    for (k, _) in std::env::vars() {
        if k.starts_with("PG") || k == "DFCK_DB" {
            cmd.env_remove(k);
        }
    }
    cmd.env("HOME", home).envs(vars.iter().copied()).args(args);
    cmd.output().unwrap()
}

fn threads(out: &Output) -> u64 {
    assert!(
        out.status.success(),
        "dfck failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    j["counts"]["threads"].as_u64().unwrap()
}

fn private_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn pg_environment_and_pgpass() {
    let Some(uri) = require_postgres("PG* environment test") else {
        return;
    };
    let (host, port) = host_port(&uri);
    let home = tempfile::tempdir().unwrap();
    private_file(
        &home.path().join(".pgpass"),
        &format!("# dfck test\n{host}:{port}:*:dfck:{PASSWORD}\n"),
    );
    let vars = [
        ("PGHOST", host.as_str()),
        ("PGPORT", port.as_str()),
        ("PGUSER", "dfck"),
        ("PGDATABASE", "dfck_delta_k3"),
    ];
    let args = ["--db", "postgresql://", "inspect", "--format", "json"];
    assert_eq!(threads(&dfck_env(home.path(), &vars, &args)), 8);
    // A keyword DSN is a PostgreSQL target too; what it names wins over PGDATABASE.
    let out = dfck_env(
        home.path(),
        &vars,
        &[
            "--db",
            "dbname=dfck_deerflow",
            "inspect",
            "--format",
            "json",
        ],
    );
    assert!(threads(&out) >= 1);
    // The summary says what the connection became, never the password.
    let out = dfck_env(home.path(), &vars, &["--db", "postgresql://", "inspect"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("dfck@{host}:{port}/dfck_delta_k3")),
        "{text}"
    );
    // A failure names where the values came from and hides the password.
    let out = dfck_env(
        home.path(),
        &vars,
        &["--db", "dbname=dfck_ux_missing", "inspect"],
    );
    let line = assert_clean_failure(&out, "password from password file");
    assert!(line.contains("host from PGHOST"), "{line}");
    assert!(!line.contains(PASSWORD), "{line}");
    // libpq ignores a password file others can read, and dfck says so.
    use std::os::unix::fs::PermissionsExt;
    let pgpass = home.path().join(".pgpass");
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = dfck_env(home.path(), &vars, &args);
    assert_clean_failure(&out, "group or world access");
    // PGPASSWORD works without the file.
    let mut with_pw = vars.to_vec();
    with_pw.push(("PGPASSWORD", PASSWORD));
    assert_eq!(threads(&dfck_env(home.path(), &with_pw, &args)), 8);
}

#[test]
fn pg_service_file() {
    let Some(uri) = require_postgres("PG service file test") else {
        return;
    };
    let (host, port) = host_port(&uri);
    let home = tempfile::tempdir().unwrap();
    let services = home.path().join("services.conf");
    std::fs::write(
        &services,
        format!(
            "# dfck test services\n[other]\nhost=nowhere.invalid\n\n[lg]\nhost={host}\nport={port}\nuser=dfck\npassword={PASSWORD}\ndbname=dfck_delta_k3\n"
        ),
    )
    .unwrap();
    let file = services.to_str().unwrap();
    let json = ["inspect", "--format", "json"];
    let mut args = vec!["--db", "service=lg"];
    args.extend(json);
    assert_eq!(
        threads(&dfck_env(home.path(), &[("PGSERVICEFILE", file)], &args)),
        8
    );
    // PGSERVICE with a bare URL; ~/.pg_service.conf is the default file.
    std::fs::copy(&services, home.path().join(".pg_service.conf")).unwrap();
    let mut args = vec!["--db", "postgresql://"];
    args.extend(json);
    assert_eq!(
        threads(&dfck_env(home.path(), &[("PGSERVICE", "lg")], &args)),
        8
    );
    // The service file's password never shows, not even when the connection fails.
    std::fs::write(
        &services,
        format!(
            "[bad]\nhost={host}\nport={port}\nuser=dfck\npassword={PASSWORD}\ndbname=dfck_ux_nope\n"
        ),
    )
    .unwrap();
    let out = dfck_env(
        home.path(),
        &[("PGSERVICEFILE", file)],
        &["--db", "service=bad", "inspect"],
    );
    let line = assert_clean_failure(&out, "dfck_ux_nope");
    assert!(line.contains("from service file"), "{line}");
    assert!(!line.contains(PASSWORD), "{line}");
    // An unknown service is one line, exit 2.
    let out = dfck_env(
        home.path(),
        &[
            ("PGSERVICEFILE", file),
            ("PGSYSCONFDIR", home.path().to_str().unwrap()),
        ],
        &["--db", "service=nope", "inspect"],
    );
    assert_clean_failure(&out, "service \"nope\" not found");
}

/// The test server's certificate, read through SQL (the role is a superuser).
fn server_certificate(uri: &str, dir: &Path) -> std::path::PathBuf {
    let rt = pg::runtime();
    let client = pg::connect(&rt, uri);
    let row = rt
        .block_on(client.query_one("SELECT pg_read_file('server.crt')", &[]))
        .unwrap();
    let pem: String = row.get(0);
    let path = dir.join("root.crt");
    std::fs::write(&path, pem).unwrap();
    path
}

#[test]
fn pg_verify_full_against_the_server_certificate() {
    let Some(uri) = require_postgres("sslmode=verify-full test") else {
        return;
    };
    let (host, port) = host_port(&uri);
    let home = tempfile::tempdir().unwrap();
    let root = server_certificate(&uri, home.path());
    let root = root.to_str().unwrap();
    // Role dfck_tls may only connect over TLS.
    let dsn = |host: &str, mode: &str, rootcert: &str| {
        format!(
            "host={host} port={port} user=dfck_tls dbname=dfck_delta_k3 sslmode={mode} sslrootcert={rootcert}"
        )
    };
    let vars = [("PGPASSWORD", PASSWORD)];
    let run = |db: &str| {
        dfck_env(
            home.path(),
            &vars,
            &["--db", db, "inspect", "--format", "json"],
        )
    };
    assert_eq!(threads(&run(&dsn(&host, "verify-full", root))), 8);
    // The same from the environment: PGSSLMODE and PGSSLROOTCERT.
    let env_vars = [
        ("PGPASSWORD", PASSWORD),
        ("PGHOST", host.as_str()),
        ("PGPORT", port.as_str()),
        ("PGUSER", "dfck_tls"),
        ("PGDATABASE", "dfck_delta_k3"),
        ("PGSSLMODE", "verify-full"),
        ("PGSSLROOTCERT", root),
    ];
    let out = dfck_env(
        home.path(),
        &env_vars,
        &["--db", "postgresql://", "inspect", "--format", "json"],
    );
    assert_eq!(threads(&out), 8);
    // The certificate names 127.0.0.1, not localhost: verify-ca accepts, verify-full refuses.
    if host == "127.0.0.1" {
        assert_eq!(threads(&run(&dsn("localhost", "verify-ca", root))), 8);
        let out = run(&dsn("localhost", "verify-full", root));
        let line = assert_clean_failure(&out, "not the host \"localhost\"");
        assert!(!line.contains(PASSWORD), "{line}");
    }
    // A root certificate that signed nothing: one line, exit 2.
    let wrong = crate::common::root().join("fixtures/tls/wrong-root.crt");
    let out = run(&dsn(&host, "verify-full", wrong.to_str().unwrap()));
    let line = assert_clean_failure(&out, "not signed by a certificate in sslrootcert");
    assert!(!line.contains(PASSWORD), "{line}");
    // verify-full without any root certificate says what to give.
    let out = run(&format!(
        "host={host} port={port} user=dfck_tls dbname=dfck_delta_k3 sslmode=verify-full"
    ));
    assert_clean_failure(&out, "needs a root certificate");
}
