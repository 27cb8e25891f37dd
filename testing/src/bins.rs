//! Finding the workspace's built binaries. One rule: `KEELSON_BIN_DIR` if set, otherwise the
//! folder of the running test binary's profile (`<target>/<profile>/deps/..`), which follows
//! `CARGO_TARGET_DIR` and the profile the tests were built with.

use std::path::PathBuf;

/// The folder holding the workspace's binaries for this build.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KEELSON_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test binary's own path");
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    // Test binaries live in <profile>/deps, examples in <profile>/examples.
    if dir.ends_with("deps") || dir.ends_with("examples") {
        dir.pop();
    }
    dir
}

/// The path of a workspace binary (`keelson-apiserver`, ...); panics with the command that builds
/// it when it is missing.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` (or scripts/test), or set KEELSON_BIN_DIR",
        path.display()
    );
    path
}
