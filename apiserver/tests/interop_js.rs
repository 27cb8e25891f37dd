//! The official JavaScript client (npm `@kubernetes/client-node`, installed by
//! scripts/interop/js) against a real keelson-apiserver keeping 100 watch events (so a watch can
//! be sent 410 Gone) with the controller manager's garbage collector: tests/interop/
//! js_client.mjs does what the client's users do, its informer included, and fails naming what
//! differed.

#[path = "interop/run.rs"]
mod run;

#[test]
fn the_official_javascript_client_does_what_its_users_do() {
    let dir = run::install("js");
    let mut client = std::process::Command::new("node");
    client
        .arg(run::checks("js_client.mjs"))
        .env("KEELSON_JS_CLIENT", dir);
    run::against_keelson(client, &["--watch-cache-size", "100"]);
}
