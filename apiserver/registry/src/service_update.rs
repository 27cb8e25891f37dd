//! What an update of a Service drops when its type changes (upstream's dropTypeDependentFields):
//! a field that no longer applies, that the server may have filled in, and that the client sent
//! back unchanged goes; one the client changed stays and is validated. So
//! `kubectl patch svc x -p '{"spec":{"type":"ClusterIP"}}'` on a NodePort Service works.

use serde_json::Value;

fn type_of(svc: &Value) -> &str {
    svc.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

fn needs_node_ports(svc: &Value) -> bool {
    matches!(type_of(svc), "NodePort" | "LoadBalancer")
}

fn needs_health_check_port(svc: &Value) -> bool {
    type_of(svc) == "LoadBalancer"
        && svc
            .pointer("/spec/externalTrafficPolicy")
            .and_then(Value::as_str)
            == Some("Local")
}

fn externally_accessible(svc: &Value) -> bool {
    needs_node_ports(svc)
        || (type_of(svc) == "ClusterIP"
            && svc
                .pointer("/spec/externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty()))
}

fn node_ports(svc: &Value) -> Vec<Option<&Value>> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| ports.iter().map(|p| p.get("nodePort")).collect())
        .unwrap_or_default()
}

/// Removes `spec.<field>` from `new` when it equals `old`'s.
fn drop_if_unchanged(new: &mut Value, old: &Value, field: &str) {
    let path = format!("/spec/{field}");
    if new.pointer(&path) == old.pointer(&path) {
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove(field);
        }
    }
}

/// Applies upstream's rules to `new`, a Service replacing `old`.
pub fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    if type_of(old) != "ExternalName" && type_of(new) == "ExternalName" {
        let same_ips = new.pointer("/spec/clusterIP") == old.pointer("/spec/clusterIP")
            && new.pointer("/spec/clusterIPs") == old.pointer("/spec/clusterIPs");
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            if same_ips {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
        }
        drop_if_unchanged(new, old, "ipFamilies");
        drop_if_unchanged(new, old, "ipFamilyPolicy");
    }
    if needs_node_ports(old) && !needs_node_ports(new) && node_ports(new) == node_ports(old) {
        if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                p.remove("nodePort");
            }
        }
    }
    if needs_health_check_port(old) && !needs_health_check_port(new) {
        drop_if_unchanged(new, old, "healthCheckNodePort");
    }
    if type_of(old) == "LoadBalancer" && type_of(new) != "LoadBalancer" {
        drop_if_unchanged(new, old, "allocateLoadBalancerNodePorts");
        drop_if_unchanged(new, old, "loadBalancerClass");
    }
    if externally_accessible(old) && !externally_accessible(new) {
        drop_if_unchanged(new, old, "externalTrafficPolicy");
    }
    // An address a load balancer gave no longer applies (its release is the implementation's).
    if type_of(new) != "LoadBalancer" {
        if let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) {
            status.insert("loadBalancer".into(), serde_json::json!({}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load_balancer() -> Value {
        json!({
            "spec": {
                "type": "LoadBalancer", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"],
                "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000,
                "allocateLoadBalancerNodePorts": true,
                "ports": [{"port": 80, "nodePort": 30080}],
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.1.240"}]}},
        })
    }

    #[test]
    fn a_type_change_drops_what_the_client_sent_back_unchanged() {
        let old = load_balancer();
        let mut new = old.clone();
        new["spec"]["type"] = json!("ClusterIP");
        drop_type_dependent_fields(&mut new, &old);
        assert_eq!(
            new,
            json!({
                "spec": {
                    "type": "ClusterIP", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"],
                    "ports": [{"port": 80}],
                },
                "status": {"loadBalancer": {}},
            })
        );
    }

    #[test]
    fn to_external_name_the_cluster_ip_sent_back_goes() {
        let old = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]}});
        let mut new = old.clone();
        new["spec"]["type"] = json!("ExternalName");
        drop_type_dependent_fields(&mut new, &old);
        assert_eq!(new, json!({"spec": {"type": "ExternalName"}}));
    }

    #[test]
    fn what_the_client_changed_stays_for_validation_to_judge() {
        let old = load_balancer();
        let mut new = old.clone();
        new["spec"]["type"] = json!("ClusterIP");
        new["spec"]["ports"][0]["nodePort"] = json!(30081);
        new["spec"]["externalTrafficPolicy"] = json!("Cluster");
        drop_type_dependent_fields(&mut new, &old);
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30081);
        assert_eq!(new["spec"]["externalTrafficPolicy"], "Cluster");
        // LoadBalancer to NodePort keeps the node ports and the policy.
        let mut node_port = old.clone();
        node_port["spec"]["type"] = json!("NodePort");
        drop_type_dependent_fields(&mut node_port, &old);
        assert_eq!(node_port["spec"]["ports"][0]["nodePort"], 30080);
        assert_eq!(node_port["spec"]["externalTrafficPolicy"], "Local");
        assert_eq!(node_port["spec"].get("healthCheckNodePort"), None);
        assert_eq!(node_port["status"]["loadBalancer"], json!({}));
    }
}
