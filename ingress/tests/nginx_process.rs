//! The real nginx behind the `Nginx` trait: a config nginx rejects is never loaded, and the one
//! before keeps serving.

use std::net::TcpListener;

mod harness;

use harness::{curl, DEADLINE};
use keelson_ingress::error::NginxError;
use keelson_ingress::nginx::{Nginx, NginxProcess};
use keelson_testing::{eventually, free_port, require_tools};

fn conf(dir: &std::path::Path, port: u16, body: &str) -> String {
    let d = dir.display();
    format!(
        "pid {d}/nginx.pid;\nerror_log {d}/logs/error.log;\nevents {{}}\nhttp {{\n\
         access_log off;\nclient_body_temp_path {d}/tmp/body;\nproxy_temp_path {d}/tmp/proxy;\n\
         fastcgi_temp_path {d}/tmp/fastcgi;\nuwsgi_temp_path {d}/tmp/uwsgi;\nscgi_temp_path {d}/tmp/scgi;\n\
         server {{ listen 127.0.0.1:{port}; location / {{ return 200 \"{body}\"; }} }}\n}}\n"
    )
}

/// nginx's answer on `port`, or None when nothing answered.
fn get(port: u16) -> Option<String> {
    curl(&[&format!("http://127.0.0.1:{port}/")]).map(|(_, body)| body)
}

/// Polls until the answer is `want` (reloads are asynchronous in nginx).
fn wait_for(port: u16, want: &str) {
    eventually(&format!("{want:?} from nginx"), DEADLINE, || {
        match get(port) {
            Some(body) if body == want => Ok(()),
            last => Err(format!("last answer {last:?}")),
        }
    });
}

#[test]
fn rejected_config_keeps_the_old_one_serving() {
    require_tools(&["nginx", "curl"]);
    let dir = tempfile::Builder::new()
        .prefix("keelson-ingress-nginx")
        .tempdir()
        .unwrap();
    let port = free_port();
    let mut nginx = NginxProcess::new("nginx", dir.path());
    nginx
        .apply(&conf(dir.path(), port, "one"), &[])
        .expect("valid config loads");
    assert!(nginx.running());
    wait_for(port, "one");

    let bad = conf(dir.path(), port, "two").replace("return 200", "return_with_typo 200");
    match nginx.apply(&bad, &[]) {
        Err(NginxError::Rejected { message }) => {
            assert!(
                message.contains("unknown directive \"return_with_typo\""),
                "{message}"
            )
        }
        other => panic!("a config nginx -t refuses must be rejected, got {other:?}"),
    }
    let live = std::fs::read_to_string(nginx.conf_path()).unwrap();
    assert!(
        !live.contains("return_with_typo"),
        "the rejected text replaced the live config"
    );
    wait_for(port, "one");

    nginx
        .apply(&conf(dir.path(), port, "two"), &[])
        .expect("valid config loads");
    wait_for(port, "two");
    nginx.stop().unwrap();
    assert!(!nginx.running());
    assert_eq!(get(port), None, "nginx still answers after stop");
}

#[test]
fn busy_port_is_reported_with_nginx_own_words() {
    require_tools(&["nginx"]);
    let dir = tempfile::Builder::new()
        .prefix("keelson-ingress-nginx")
        .tempdir()
        .unwrap();
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let mut nginx = NginxProcess::new("nginx", dir.path());
    match nginx.apply(&conf(dir.path(), port, "one"), &[]) {
        Err(NginxError::Exited { message, .. }) => {
            assert!(message.contains("Address already in use"), "{message}")
        }
        other => panic!("nginx cannot serve on a busy port, got {other:?}"),
    }
    assert!(!nginx.running());
}
