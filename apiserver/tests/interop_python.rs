//! The official Python client (PyPI `kubernetes`, installed by scripts/interop/python, which
//! scripts/test runs) against a real keelson-apiserver with the controller manager's garbage
//! collector: tests/interop/python_client.py does what the client's users do and fails naming
//! what differed.

use std::process::Command;
use std::time::Duration;

use keelson_testing::{Apiserver, Component, Daemon};

#[test]
fn the_official_python_client_does_what_its_users_do() {
    let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/interop/python");
    let out = Command::new(setup)
        .output()
        .expect("scripts/interop/python runs");
    assert!(
        out.status.success(),
        "scripts/interop/python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let python = stdout
        .lines()
        .last()
        .expect("the interpreter's path")
        .trim();
    let api = Apiserver::start();
    let _gc = Daemon::start(
        &api,
        "keelson-controller-manager",
        Component::ControllerManager,
        &[],
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/interop/python_client.py"
    );
    let mut child = Command::new(python)
        .arg(script)
        .env("KUBECONFIG", api.kubeconfig())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while child.try_wait().expect("python's status").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("python's output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "python client checks failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
}
