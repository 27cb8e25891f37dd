//! What every client interop test does: install the client (a scripts/interop script, which
//! prints what to run on its last line), start a keelson-apiserver with the controller manager's
//! garbage collector, run the client's checks against it and fail with their output unless they
//! print "all checks passed".

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keelson_testing::{Apiserver, Component, Daemon};

pub use keelson_testing::interop::install;

/// A checks file under tests/interop.
pub fn checks(file: &str) -> String {
    format!("{}/tests/interop/{file}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `client` (KUBECONFIG set to the admin's) against a server started with `flags`, for 3
/// minutes at most.
pub fn against_keelson(mut client: Command, flags: &[&str]) {
    let api = Apiserver::start_with(flags);
    let _gc = Daemon::start(
        &api,
        "keelson-controller-manager",
        Component::ControllerManager,
        &[],
    );
    let mut child = client
        .env("KUBECONFIG", api.kubeconfig())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the client starts");
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().expect("the client's status").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("the client's output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "the client's checks failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
}
