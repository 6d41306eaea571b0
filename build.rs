//! Build script: records the compiler's version for the `runtime_version` of benchmark rows
//! (`DFCK_RUSTC_VERSION`, e.g. `1.95.0`); nothing else.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string));
    if let Some(v) = version {
        println!("cargo:rustc-env=DFCK_RUSTC_VERSION={v}");
    }
}
