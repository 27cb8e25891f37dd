//! Ruby's kubeclient (Debian `ruby-kubeclient`, checked by scripts/interop/ruby) against a real
//! keelson-apiserver keeping 100 watch events (so a watch can be sent 410 Gone) with the
//! controller manager's garbage collector: tests/interop/ruby_client.rb does what the client's
//! users do, through its own paths (the /watch/ form among them), and fails naming what differed.

#[path = "interop/run.rs"]
mod run;

#[test]
fn rubys_kubeclient_does_what_its_users_do() {
    let ruby = run::install("ruby");
    let mut client = std::process::Command::new(ruby);
    client.arg(run::checks("ruby_client.rb"));
    run::against_keelson(client, &["--watch-cache-size", "100"]);
}
