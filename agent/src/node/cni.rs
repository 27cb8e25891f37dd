//! The CNI network configuration list for this node's pod CIDR, written where containerd's CRI
//! plugin reads it (its `conf_dir`).

use std::path::Path;

use ipnetwork::Ipv4Network;

/// Which plugins the conflist names: Keelson's own, or Debian's reference plugins.
#[derive(Clone, Debug)]
pub struct CniPlugins {
    pub main: String,
    pub ipam: String,
    /// Chain the `portmap` plugin (from the same bin dir) for hostPort mappings.
    pub portmap: bool,
}

/// Renders the conflist (bridge + IPAM over the pod CIDR, gateway the first address; the IPAM
/// state under `ipam_data_dir`, which is the node's own; masquerade only for destinations
/// outside the cluster CIDR; the bridge and pod interfaces' MTU when given). Pure.
pub fn render(
    network: &str,
    bridge: &str,
    pod_cidr: Ipv4Network,
    cluster_cidr: Ipv4Network,
    mtu: Option<u32>,
    plugins: &CniPlugins,
    ipam_data_dir: &Path,
) -> String {
    let gateway = pod_cidr.nth(1).map(|g| g.to_string()).unwrap_or_default();
    let mut conf = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": network,
        "plugins": [{
            "type": plugins.main,
            "bridge": bridge,
            "isGateway": true,
            "isDefaultGateway": true,
            "ipMasq": true,
            // keelson-cni's: pods on other nodes see the client pod's own address (the
            // reference bridge plugin ignores the key and masquerades outside the pod CIDR).
            "nonMasqueradeCIDRs": [cluster_cidr.to_string()],
            "hairpinMode": true,
            "ipam": {
                "type": plugins.ipam,
                "ranges": [[{ "subnet": pod_cidr.to_string(), "gateway": gateway }]],
                "dataDir": ipam_data_dir.display().to_string(),
            }
        }]
    });
    if let (Some(mtu), Some(main)) = (
        mtu,
        conf.pointer_mut("/plugins/0")
            .and_then(serde_json::Value::as_object_mut),
    ) {
        main.insert("mtu".into(), mtu.into());
    }
    if plugins.portmap {
        // containerd hands the sandbox's port mappings to plugins with this capability.
        if let Some(list) = conf
            .get_mut("plugins")
            .and_then(serde_json::Value::as_array_mut)
        {
            list.push(
                serde_json::json!({ "type": "portmap", "capabilities": { "portMappings": true } }),
            );
        }
    }
    serde_json::to_string_pretty(&conf).unwrap_or_default()
}

/// Writes the conflist atomically (write then rename), only when its content changed.
pub fn write(dir: &Path, content: &str) -> std::io::Result<bool> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("10-keelson.conflist");
    if std::fs::read_to_string(&path).ok().as_deref() == Some(content) {
        return Ok(false);
    }
    let tmp = dir.join(".10-keelson.conflist.tmp");
    std::fs::write(&tmp, content)?;
    std::fs::rename(&tmp, &path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conflist of node n1 (pod CIDR 10.244.3.0/24 in 10.244.0.0/16, bridge keelson0).
    fn render_n1(network: &str, mtu: Option<u32>, portmap: bool) -> String {
        let plugins = CniPlugins {
            main: "keelson-cni".into(),
            ipam: "keelson-ipam".into(),
            portmap,
        };
        render(
            network,
            "keelson0",
            "10.244.3.0/24".parse().unwrap(),
            "10.244.0.0/16".parse().unwrap(),
            mtu,
            &plugins,
            Path::new("/var/lib/keelson/n1/cni"),
        )
    }

    #[test]
    fn conflist_for_the_pod_cidr() {
        let text = render_n1("keelson", None, true);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["plugins"][0]["type"], "keelson-cni");
        assert_eq!(v["plugins"][0]["bridge"], "keelson0");
        assert_eq!(v["plugins"][0]["ipam"]["type"], "keelson-ipam");
        assert_eq!(
            v["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.3.0/24"
        );
        assert_eq!(
            v["plugins"][0]["ipam"]["ranges"][0][0]["gateway"],
            "10.244.3.1"
        );
        assert_eq!(
            v["plugins"][0]["ipam"]["dataDir"],
            "/var/lib/keelson/n1/cni"
        );
        assert_eq!(v["plugins"][0].get("mtu"), None);
        assert_eq!(v["plugins"][1]["type"], "portmap");
    }

    #[test]
    fn overlay_mtu_on_the_bridge_plugin() {
        let text = render_n1("keelson", Some(1450), true);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["plugins"][0]["mtu"], 1450);
        assert_eq!(v["plugins"][1].get("mtu"), None);
    }

    #[test]
    fn conflist_text_exact_with_the_cluster_cidr_left_unmasqueraded() {
        let text = render_n1("keelson-n1", None, false);
        assert_eq!(
            text,
            r#"{
  "cniVersion": "1.0.0",
  "name": "keelson-n1",
  "plugins": [
    {
      "bridge": "keelson0",
      "hairpinMode": true,
      "ipMasq": true,
      "ipam": {
        "dataDir": "/var/lib/keelson/n1/cni",
        "ranges": [
          [
            {
              "gateway": "10.244.3.1",
              "subnet": "10.244.3.0/24"
            }
          ]
        ],
        "type": "keelson-ipam"
      },
      "isDefaultGateway": true,
      "isGateway": true,
      "nonMasqueradeCIDRs": [
        "10.244.0.0/16"
      ],
      "type": "keelson-cni"
    }
  ]
}"#
        );
    }

    #[test]
    fn writes_only_on_change() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(write(tmp.path(), "a").unwrap());
        assert!(!write(tmp.path(), "a").unwrap());
        assert!(write(tmp.path(), "b").unwrap());
    }
}
