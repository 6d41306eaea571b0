//! DeerFlow's history cache assumes checkpoints never change, so every command that rewrites a
//! thread purges that thread's keys after its commit (docs/deerflow-database.md): the two
//! `migrate` directions and `prune`, against a real Redis server.

use crate::common::*;

fn con(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<u64>(con).unwrap() == 1
}

/// Runs `args` on a copy of `fixture` with the cache at `url` under a fresh prefix: the keys
/// of `changed` must go, those of `kept` stay.
fn purges(url: &str, fixture: &str, args: &[&str], changed: &str, kept: &str) {
    let mut c = con(url);
    let prefix = format!("dfck-it-hc-{}-{fixture}-{}", std::process::id(), args[0]);
    let gone = format!("{prefix}:{changed}:h1");
    let stays = format!("{prefix}:{kept}:h1");
    for k in [&gone, &stays] {
        let _: () = redis::cmd("SET").arg(k).arg("x").query(&mut c).unwrap();
    }
    let (_d, db) = temp_copy(&sqlite_fixture(fixture));
    let cache = ["--redis-url", url, "--cache-key-prefix", &prefix];
    let out = dfck(db.to_str().unwrap(), &[args, &cache].concat());
    assert!(exists(&mut c, &gone), "a dry run purges nothing");
    let out2 = dfck(db.to_str().unwrap(), &[args, &["--apply"], &cache].concat());
    assert!(
        out.status.success() && out2.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out2.stderr)
    );
    assert!(!exists(&mut c, &gone), "{args:?}: {changed}'s keys left");
    assert!(exists(&mut c, &stays), "{args:?}: {kept}'s keys purged");
    assert!(
        String::from_utf8_lossy(&out2.stderr).contains(&prefix),
        "the note names the prefix"
    );
    let _: () = redis::cmd("DEL").arg(&stays).query(&mut c).unwrap();
}

#[test]
fn rewriting_commands_purge_the_threads_they_change() {
    let Some(url) = require_redis("the history-cache purge of migrate and prune") else {
        return;
    };
    purges(
        &url,
        "delta_k3",
        &["migrate", "delta-to-full", "t-linear"],
        "t-linear",
        "t-fork",
    );
    purges(
        &url,
        "full",
        &[
            "migrate",
            "full-to-delta",
            "t-linear",
            "--snapshot-frequency",
            "3",
        ],
        "t-linear",
        "t-fork",
    );
    purges(
        &url,
        "retention",
        &["prune", "r-linear-full"],
        "r-linear-full",
        "r-linear-delta",
    );
}
