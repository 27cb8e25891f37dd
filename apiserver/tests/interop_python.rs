//! The official Python client (PyPI `kubernetes`, installed by scripts/interop/python, which
//! scripts/test runs) against a real keelson-apiserver with the controller manager's garbage
//! collector: tests/interop/python_client.py does what the client's users do and fails naming
//! what differed.

#[path = "interop/run.rs"]
mod run;

#[test]
fn the_official_python_client_does_what_its_users_do() {
    let python = run::install("python");
    let mut client = std::process::Command::new(python);
    client.arg(run::checks("python_client.py"));
    run::against_keelson(client, &[]);
}
