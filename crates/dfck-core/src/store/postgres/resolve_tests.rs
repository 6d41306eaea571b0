use super::*;
use std::collections::HashMap;

fn env_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn run(input: &str, env: &HashMap<String, String>) -> Result<Resolved, String> {
    resolve(input, &|k: &str| env.get(k).cloned())
}

fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn environment_fills_what_the_string_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let env = env_of(&[
        ("PGHOST", "db.example"),
        ("PGPORT", "6543"),
        ("PGUSER", "alice"),
        ("PGSSLMODE", "verify-full"),
        ("HOME", dir.path().to_str().unwrap()),
    ]);
    let r = run("postgresql://", &env).unwrap();
    assert_eq!(r.get("host"), Some("db.example"));
    assert_eq!(r.get("port"), Some("6543"));
    assert_eq!(
        r.get("dbname"),
        Some("alice"),
        "dbname defaults to the user"
    );
    assert_eq!(r.get("sslmode"), Some("verify-full"));
    assert_eq!(r.source("host"), Some(&Source::Env("PGHOST")));
    assert_eq!(r.get("password"), None);
    // Given values win over the environment.
    let r = run("host=other dbname=d", &env).unwrap();
    assert_eq!(r.get("host"), Some("other"));
    assert_eq!(r.source("port"), Some(&Source::Env("PGPORT")));
    assert!(r.origins().contains("port from PGPORT"), "{}", r.origins());
}

#[test]
fn pgpass_supplies_the_password_for_the_matching_line() {
    let dir = tempfile::tempdir().unwrap();
    let pgpass = dir.path().join(".pgpass");
    write_private(
        &pgpass,
        "# comment\nother:*:*:*:nope\ndb.example:6543:*:alice:s3cr\\:et\n*:*:*:*:fallback\n",
    );
    let env = env_of(&[("HOME", dir.path().to_str().unwrap())]);
    let r = run("host=db.example port=6543 user=alice dbname=x", &env).unwrap();
    assert_eq!(r.get("password"), Some("s3cr:et"));
    assert_eq!(
        r.source("password"),
        Some(&Source::Passfile(pgpass.clone()))
    );
    let r = run("host=elsewhere user=bob dbname=x", &env).unwrap();
    assert_eq!(r.get("password"), Some("fallback"));
    // PGPASSWORD comes before the file; a given password before both.
    let mut env2 = env.clone();
    env2.insert("PGPASSWORD".into(), "fromenv".into());
    assert_eq!(
        run("host=db.example user=alice", &env2)
            .unwrap()
            .get("password"),
        Some("fromenv")
    );
    assert_eq!(
        run("host=db.example user=alice password=given", &env2)
            .unwrap()
            .get("password"),
        Some("given")
    );
    // A file others may read is ignored, as libpq does, and the reason is kept.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = run("host=db.example port=6543 user=alice", &env).unwrap();
    assert_eq!(r.get("password"), None);
    assert!(r.passfile_note.unwrap().contains("group or world"));
}

#[test]
fn service_file_sections() {
    let dir = tempfile::tempdir().unwrap();
    let user_file = dir.path().join("services.conf");
    std::fs::write(
        &user_file,
        "# mine\n[prod]\nhost=prod.example\nport = 7000\ndbname=lg\n\n[dev]\nhost=dev\n",
    )
    .unwrap();
    let sys = dir.path().join("etc");
    std::fs::create_dir(&sys).unwrap();
    std::fs::write(
        sys.join("pg_service.conf"),
        "[shared]\nhost=shared.example\n",
    )
    .unwrap();
    let env = env_of(&[
        ("PGSERVICEFILE", user_file.to_str().unwrap()),
        ("PGSYSCONFDIR", sys.to_str().unwrap()),
        ("PGUSER", "u"),
        ("PGPORT", "1"),
    ]);
    let r = run("service=prod", &env).unwrap();
    assert_eq!(r.get("host"), Some("prod.example"));
    assert_eq!(
        r.get("port"),
        Some("7000"),
        "service before the environment"
    );
    assert_eq!(r.get("dbname"), Some("lg"));
    // Given values win over the service; PGSERVICE names the service.
    let mut env2 = env.clone();
    env2.insert("PGSERVICE".into(), "dev".into());
    let r = run("postgresql:///mydb", &env2).unwrap();
    assert_eq!(r.get("host"), Some("dev"));
    assert_eq!(r.get("dbname"), Some("mydb"));
    assert_eq!(r.get("port"), Some("1"));
    // The system file is searched after the user's.
    assert_eq!(
        run("service=shared", &env).unwrap().get("host"),
        Some("shared.example")
    );
    let e = run("service=nope", &env).unwrap_err();
    assert!(e.contains("service \"nope\" not found"), "{e}");
}
