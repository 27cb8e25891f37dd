//! The nftables backend: a table of its own (`ip keelson`) whose chains do not grow with the
//! number of Services; a sync touches only the map elements of what changed, in one `nft -f`.

pub mod affinity;
pub mod render;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::backend::{RuleBackend, SyncScope, SyncStats};
use crate::error::ProxyError;
use crate::exec::Runner;
use crate::model::{ProxyModel, ServicePortName};

use render::{Elem, RenderOptions, FAMILY_TABLE};

pub struct NftBackend {
    runner: Box<dyn Runner>,
    opts: RenderOptions,
    /// Elements last written per service port; only valid while `synced`.
    cache: BTreeMap<ServicePortName, Vec<Elem>>,
    /// How many service ports contribute each element (a pod IP can back several Services).
    refs: HashMap<Elem, usize>,
    /// Affinity timeouts whose sets and rules exist.
    timeouts: BTreeSet<u32>,
    synced: bool,
}

impl NftBackend {
    pub fn new(runner: Box<dyn Runner>, opts: RenderOptions) -> NftBackend {
        NftBackend {
            runner,
            opts,
            cache: BTreeMap::new(),
            refs: HashMap::new(),
            timeouts: BTreeSet::new(),
            synced: false,
        }
    }

    fn render_all(&self, model: &ProxyModel) -> BTreeMap<ServicePortName, Vec<Elem>> {
        model
            .services
            .iter()
            .map(|(k, sp)| {
                (
                    k.clone(),
                    render::service_elements(sp, &model.node_ips, &self.opts),
                )
            })
            .collect()
    }

    /// The text of a full sync. `existing_timeouts` are affinity sets present in the kernel.
    pub fn full_sync_text(
        &self,
        model: &ProxyModel,
        existing_timeouts: &BTreeSet<u32>,
        stale_affinity: &[String],
        recreate: bool,
    ) -> (String, BTreeMap<ServicePortName, Vec<Elem>>, usize) {
        let timeouts = render::affinity_timeouts(model);
        let mut text = if recreate {
            render::recreate_skeleton(&self.opts, &timeouts)
        } else {
            let stale: BTreeSet<u32> = existing_timeouts.difference(&timeouts).copied().collect();
            render::skeleton(&self.opts, &timeouts, &stale)
        };
        if !recreate && !stale_affinity.is_empty() {
            delete_affinity_text(stale_affinity, &mut text);
        }
        let cache = self.render_all(model);
        let grouped = render::merge_elements(cache.values().flatten());
        let written = render::add_elements_text(&grouped, &mut text);
        (text, cache, written)
    }

    /// The text of a partial sync: element deletions then additions, and the new reference counts.
    pub fn partial_sync_text(
        &self,
        model: &ProxyModel,
        changed: &[ServicePortName],
    ) -> (
        String,
        BTreeMap<ServicePortName, Vec<Elem>>,
        HashMap<Elem, usize>,
        usize,
    ) {
        let mut cache = self.cache.clone();
        let mut refs = self.refs.clone();
        let mut removed: Vec<Elem> = Vec::new();
        let mut added: Vec<Elem> = Vec::new();
        for name in changed {
            let old = cache.remove(name).unwrap_or_default();
            let new = model
                .services
                .get(name)
                .map(|sp| render::service_elements(sp, &model.node_ips, &self.opts))
                .unwrap_or_default();
            for e in &old {
                if let Some(c) = refs.get_mut(e) {
                    *c -= 1;
                    if *c == 0 {
                        refs.remove(e);
                        removed.push(e.clone());
                    }
                }
            }
            for e in &new {
                let c = refs.entry(e.clone()).or_insert(0);
                *c += 1;
                if *c == 1 {
                    added.push(e.clone());
                }
            }
            if model.services.contains_key(name) {
                cache.insert(name.clone(), new);
            }
        }
        // An element removed and re-added by two services in one batch needs no change.
        let re_added: BTreeSet<&Elem> = added.iter().collect();
        let really_removed: Vec<&Elem> = removed.iter().filter(|e| !re_added.contains(e)).collect();
        let removed_set: BTreeSet<&Elem> = removed.iter().collect();
        let really_added: Vec<&Elem> = added.iter().filter(|e| !removed_set.contains(e)).collect();
        let mut text = String::new();
        render::delete_elements_text(&really_removed, &mut text);
        let grouped = render::merge_elements(really_added.iter().copied());
        let written = render::add_elements_text(&grouped, &mut text) + really_removed.len();
        (text, cache, refs, written)
    }

    fn apply(&self, text: &str) -> Result<(), ProxyError> {
        let out = self
            .runner
            .run("nft", &["-f", "-"], Some(text.as_bytes()))?;
        if !out.success() {
            return Err(ProxyError::command("nft", "loading service rules", &out));
        }
        Ok(())
    }

    /// Affinity sets that exist in our table (after a restart the cache does not know them).
    fn existing_timeouts(&self) -> BTreeSet<u32> {
        let Ok(out) = self.runner.run("nft", &["-t", "list", "sets", "ip"], None) else {
            return BTreeSet::new();
        };
        let mut in_table = false;
        let mut found = BTreeSet::new();
        for line in out.stdout.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("table ip ") {
                in_table = rest.trim_end_matches('{').trim() == "keelson";
            } else if in_table {
                if let Some(t) = line
                    .strip_prefix("set affinity_")
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                {
                    found.insert(t);
                }
            }
        }
        found
    }

    fn stale_affinity(&self, model: &ProxyModel) -> Vec<String> {
        let Ok(out) = self
            .runner
            .run("nft", &["list", "map", "ip", "keelson", "affinity"], None)
        else {
            return Vec::new();
        };
        if !out.success() {
            return Vec::new();
        }
        affinity::stale_keys(&out.stdout, &affinity::valid_targets(model))
    }

    fn full_sync(&mut self, model: &ProxyModel) -> Result<SyncStats, ProxyError> {
        self.synced = false;
        let existing = self.existing_timeouts();
        let stale = self.stale_affinity(model);
        let (text, cache, written) = self.full_sync_text(model, &existing, &stale, false);
        if let Err(e) = self.apply(&text) {
            // A table from another version (or a half-removed one): replace it atomically.
            tracing::warn!(error = %e, "nft full sync failed, recreating table {FAMILY_TABLE}");
            let (text, _, _) = self.full_sync_text(model, &existing, &[], true);
            self.apply(&text)?;
        }
        self.refs = count_refs(&cache);
        self.cache = cache;
        self.timeouts = render::affinity_timeouts(model);
        self.synced = true;
        Ok(SyncStats {
            full: true,
            written,
        })
    }
}

fn count_refs(cache: &BTreeMap<ServicePortName, Vec<Elem>>) -> HashMap<Elem, usize> {
    let mut refs = HashMap::new();
    for e in cache.values().flatten() {
        *refs.entry(e.clone()).or_insert(0) += 1;
    }
    refs
}

fn delete_affinity_text(keys: &[String], out: &mut String) {
    for chunk in keys.chunks(1000) {
        out.push_str(&format!(
            "delete element {FAMILY_TABLE} affinity {{ {} }}\n",
            chunk.join(", ")
        ));
    }
}

impl RuleBackend for NftBackend {
    fn name(&self) -> &'static str {
        "nftables"
    }

    fn sync(&mut self, model: &ProxyModel, scope: &SyncScope) -> Result<SyncStats, ProxyError> {
        let changed = match scope {
            SyncScope::Partial(changed)
                if self.synced && render::affinity_timeouts(model) == self.timeouts =>
            {
                changed
            }
            _ => return self.full_sync(model),
        };
        let (mut text, cache, refs, written) = self.partial_sync_text(model, changed);
        let touches_affinity = changed.iter().any(|n| {
            let had = self.cache.get(n).is_some_and(|els| {
                els.iter()
                    .any(|e| matches!(e.set, render::SetName::Affinity(_)))
            });
            had || model
                .services
                .get(n)
                .is_some_and(|s| s.affinity_timeout.is_some())
        });
        if touches_affinity {
            let stale = self.stale_affinity(model);
            delete_affinity_text(&stale, &mut text);
        }
        if !text.is_empty() {
            if let Err(e) = self.apply(&text) {
                tracing::warn!(error = %e, "partial nft sync failed, doing a full sync");
                return self.full_sync(model);
            }
        }
        self.cache = cache;
        self.refs = refs;
        Ok(SyncStats {
            full: false,
            written,
        })
    }

    fn rules_lost(&mut self) -> Result<bool, ProxyError> {
        if !self.synced {
            return Ok(false);
        }
        let out = self.runner.run(
            "nft",
            &["list", "chain", "ip", "keelson", "nat_prerouting"],
            None,
        )?;
        let present = out.success() && out.stdout.contains("jump services");
        if !present {
            self.synced = false;
        }
        Ok(!present)
    }
}
