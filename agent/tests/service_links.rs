//! Service links: a container sees `WEB_SERVICE_HOST` and the docker-link variables of every
//! Service of its namespace made before it, as the kubelet sets them; its own env wins, other
//! namespaces' and headless Services give nothing, and `enableServiceLinks: false` turns them
//! off. The real agent, containerd and keelson-apiserver (see common/mod.rs).

mod common;

use std::time::Duration;

use common::*;

fn env_pod(name: &str, node: &str, extra: &str) -> String {
    pod_yaml(
        name,
        node,
        &format!(
            "{extra}  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'env | sort; echo END; sleep 3600']\n    env: [{{name: WEB_SERVICE_PORT, value: mine}}]\n"
        ),
    )
}

/// The pod's `env | sort` output once it is complete.
fn env_of(cluster: &Cluster, pod: &str) -> String {
    cluster.wait_until(Duration::from_secs(60), &format!("{pod}'s env"), || {
        cluster
            .kubectl(&["logs", pod])
            .ok()
            .filter(|l| l.contains("END"))
    })
}

#[test]
fn containers_get_the_variables_of_their_namespaces_services() {
    let cluster = Cluster::start("aglink");
    cluster.apply(
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: 8080}\n  - {name: dns-udp, port: 53, protocol: UDP}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: headless-db}\nspec:\n  clusterIP: None\n  selector: {app: db}\n  ports: [{port: 5432}]\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: cache, namespace: other}\nspec:\n  selector: {app: cache}\n  ports: [{port: 6379}]\n",
    );
    let ip = cluster
        .kubectl(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"])
        .expect("web's ClusterIP");
    assert!(!ip.is_empty(), "web has no ClusterIP");
    cluster.apply(&env_pod("linked", &cluster.node_name, ""));
    let env = env_of(&cluster, "linked");
    for line in [
        format!("WEB_SERVICE_HOST={ip}"),
        "WEB_SERVICE_PORT_HTTP=80".into(),
        "WEB_SERVICE_PORT_DNS_UDP=53".into(),
        format!("WEB_PORT=tcp://{ip}:80"),
        format!("WEB_PORT_80_TCP=tcp://{ip}:80"),
        "WEB_PORT_80_TCP_PROTO=tcp".into(),
        "WEB_PORT_80_TCP_PORT=80".into(),
        format!("WEB_PORT_80_TCP_ADDR={ip}"),
        format!("WEB_PORT_53_UDP=udp://{ip}:53"),
        // The container's own value wins over the link's.
        "WEB_SERVICE_PORT=mine".into(),
    ] {
        assert!(env.lines().any(|l| l == line), "no {line} in:\n{env}");
    }
    assert!(
        !env.contains("HEADLESS_DB_"),
        "headless Service linked:\n{env}"
    );
    assert!(
        !env.contains("CACHE_"),
        "another namespace's Service linked:\n{env}"
    );

    cluster.apply(&env_pod(
        "unlinked",
        &cluster.node_name,
        "  enableServiceLinks: false\n",
    ));
    let env = env_of(&cluster, "unlinked");
    assert!(
        !env.contains("WEB_SERVICE_HOST"),
        "links despite enableServiceLinks: false:\n{env}"
    );
    assert!(env.lines().any(|l| l == "WEB_SERVICE_PORT=mine"), "{env}");
}
