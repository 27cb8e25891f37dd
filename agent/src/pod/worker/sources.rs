//! The ConfigMaps and Secrets a container's env and the pod's volumes refer to.

use super::*;

impl Worker {
    pub(super) async fn fetch_sources(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<(env::Sources, volumes::Objects), String> {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let (mut cms, mut secrets) = env::referenced(container);
        let (vcms, vsecrets) = volumes::referenced(pod);
        cms.extend(vcms);
        secrets.extend(vsecrets);
        cms.sort();
        cms.dedup();
        secrets.sort();
        secrets.dedup();
        let mut env_sources = env::Sources::default();
        let mut objects = volumes::Objects::default();
        let cm_api: Api<ConfigMap> = Api::namespaced(self.ctx.client.clone(), &ns);
        for name in cms {
            if let Some(cm) = cm_api
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading configmap {ns}/{name}: {e}"))?
            {
                let mut bytes: BTreeMap<String, Vec<u8>> = cm
                    .data
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                bytes.extend(
                    cm.binary_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0)),
                );
                env_sources
                    .config_maps
                    .insert(name.clone(), cm.data.unwrap_or_default());
                objects.config_maps.insert(name, bytes);
            }
        }
        let secret_api: Api<Secret> = Api::namespaced(self.ctx.client.clone(), &ns);
        for name in secrets {
            if let Some(s) = secret_api
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading secret {ns}/{name}: {e}"))?
            {
                let mut bytes: BTreeMap<String, Vec<u8>> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                bytes.extend(
                    s.string_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.into_bytes())),
                );
                env_sources.secrets.insert(
                    name.clone(),
                    bytes
                        .iter()
                        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
                        .collect(),
                );
                objects.secrets.insert(name, bytes);
            }
        }
        Ok((env_sources, objects))
    }
}
