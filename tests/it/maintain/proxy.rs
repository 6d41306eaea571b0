//! The lease behind a transaction-pooling proxy: PgBouncer (`pool_mode = transaction`, a
//! server connection per transaction, no session state kept) in front of the test server.
//! Two runs started together through it never both work, and a run through it sweeps and
//! records its cursor.

use super::signals::race_behind_a_lock;
use super::*;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A PgBouncer child process, stopped on drop.
struct Bouncer {
    child: Child,
    _dir: tempfile::TempDir,
    /// `postgresql://user:password@127.0.0.1:PORT/DB` through the bouncer.
    uri: String,
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pgbouncer binary, or `None` after saying the test is skipped; with
/// `DFCK_REQUIRE_PGBOUNCER` set (CI) a missing one fails the test.
fn pgbouncer() -> Option<PathBuf> {
    let found = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("DFCK_REQUIRE_PGBOUNCER").is_none_or(|v| v.is_empty() || v == "0"),
            "pgbouncer missing but DFCK_REQUIRE_PGBOUNCER is set (scripts/test-all.sh installs it)"
        );
        eprintln!("maintain behind PgBouncer skipped: no pgbouncer binary");
    }
    found
}

/// Starts PgBouncer in transaction mode in front of database `db` of the test server, with
/// `pool` server connections.
fn start(bin: &Path, server: &str, db: &str, pool: usize) -> Bouncer {
    // postgresql://USER:PASSWORD@HOST:PORT/...
    let rest = server.split_once("://").unwrap().1;
    let (auth, hostport) = rest.split_once('@').unwrap();
    let (user, password) = auth.split_once(':').unwrap();
    let (host, port) = hostport.split('/').next().unwrap().split_once(':').unwrap();
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let ini = dir.path().join("pgbouncer.ini");
    std::fs::write(
        dir.path().join("users.txt"),
        format!("\"{user}\" \"{password}\"\n"),
    )
    .unwrap();
    std::fs::write(
        &ini,
        format!(
            "[databases]\n{db} = host={host} port={port} dbname={db}\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\nauth_type = plain\nauth_file = {}\npool_mode = transaction\nmax_client_conn = 100\ndefault_pool_size = {pool}\nunix_socket_dir =\n",
            dir.path().join("users.txt").display()
        ),
    )
    .unwrap();
    // PgBouncer refuses to run as root: `-u nobody` then, which must read the files.
    for p in [
        dir.path().to_path_buf(),
        ini.clone(),
        dir.path().join("users.txt"),
    ] {
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mut cmd = Command::new(bin);
    // /proc/self belongs to the process's user.
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    if root {
        cmd.args(["-u", "nobody"]);
    }
    let child = cmd
        .arg(&ini)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "pgbouncer never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Bouncer {
        child,
        _dir: dir,
        uri: format!("postgresql://{user}:{password}@127.0.0.1:{listen}/{db}"),
    }
}

#[test]
fn behind_a_transaction_pooling_proxy_one_sweeper_at_a_time() {
    let Some(server) = require_postgres("maintain behind PgBouncer") else {
        return;
    };
    let Some(bin) = pgbouncer() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let direct = Db::pg(&server, "deerflow_app", "dfck_maint_bouncer");
    let bouncer = start(&bin, &server, "dfck_maint_bouncer", 8);
    let through = Db::Pg(bouncer.uri.clone());
    // Two runs at once through the proxy while the winner's VACUUM waits on a lock.
    race_behind_a_lock(&through, &direct, dir.path());
    // A sweep through the proxy stops at its limit, and the next resumes after it.
    let p = policy(dir.path(), "delete:\n  idle: 30d\nsweep:\n  limit: 1\n");
    let (r, _, err) = maintain(&through, &p, &["--apply"]);
    assert_eq!(r["run"]["threads_deleted"], 1, "{r} {err}");
    assert_eq!(r["next_after"], T02);
    let (r, _, _) = maintain(&through, &p, &["--apply"]);
    assert_eq!(r["resumed_after"], T02);
    assert_eq!(r["run"]["threads_deleted"], 1);
}

/// The statements the write engine prepares in a transaction are closed before it ends, and
/// never used in another: `prune --apply --jobs 2` through a pool of two server connections
/// (each transaction may land on either) does what it does directly, and leaves no prepared
/// statement on the server connections.
#[test]
fn writes_through_a_transaction_pooling_proxy_prepare_per_transaction() {
    let Some(server) = require_postgres("writes behind PgBouncer") else {
        return;
    };
    let Some(bin) = pgbouncer() else {
        return;
    };
    let direct = Db::pg(&server, "forks_delta_k4", "dfck_bounce_direct");
    let proxied = Db::pg(&server, "forks_delta_k4", "dfck_bounce_writes");
    let before = proxied.dump();
    let bouncer = start(&bin, &server, "dfck_bounce_writes", 2);
    let args = ["prune", "--all", "--branches", "--apply", "--jobs", "2"];
    let run = |target: &str| {
        let out = dfck_command()
            .env_remove("DFCK_FAILPOINT")
            .args(["--db", target, "--format", "json"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{err}");
        serde_json::from_slice::<Json>(&out.stdout).unwrap()
    };
    let (a, b) = (run(&direct.target()), run(&bouncer.uri));
    assert_eq!(a, b);
    assert!(a["pruned"].as_u64().unwrap() > 0, "{a}");
    let after = proxied.dump();
    assert_ne!(before, after, "the run changed nothing");
    assert_eq!(direct.dump(), after);
    // Both server connections of the pool, asked through the proxy.
    let rt = runtime();
    for _ in 0..2 {
        let client = connect(&rt, &bouncer.uri);
        let left = rt
            .block_on(client.simple_query("SELECT count(*) FROM pg_prepared_statements"))
            .unwrap();
        let n = left.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        });
        assert_eq!(n.as_deref(), Some("0"));
    }
}
