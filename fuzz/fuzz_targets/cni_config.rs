//! The network configuration a runtime writes to the plugin's stdin: no input may panic, and
//! whatever parses answers its accessors.
#![no_main]
use keelson_cni::config::NetConf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(conf) = NetConf::parse(data) {
        let _ = conf.bridge_name();
        let _ = conf.gateway_on_bridge();
        let _ = conf.ipam();
        let _ = conf.prev_ips();
        let _ = conf.valid_owners();
        let _ = conf.validate_bridge();
    }
});
