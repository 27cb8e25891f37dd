//! The nftables backend: a table of its own (`ip keelson`) whose chains do not grow with the
//! number of Services; a sync touches only the map elements of what changed, in one `nft -f`.

pub mod affinity;
pub mod render;
pub mod skeleton;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;

use crate::backend::{RuleBackend, SyncScope, SyncStats};
use crate::error::ProxyError;
use crate::exec::Runner;
use crate::model::{ProxyModel, ServicePort, ServicePortName};

use render::{Elem, RenderOptions, SetName, FAMILY_TABLE};

pub struct NftBackend {
    runner: Box<dyn Runner>,
    opts: RenderOptions,
    /// Service ports as last written (their elements are re-rendered when needed: cheaper in
    /// memory than keeping every element). Only valid while `synced`.
    applied: BTreeMap<ServicePortName, ServicePort>,
    node_ips: Vec<Ipv4Addr>,
    /// How many service ports use each pod IP (its hairpin element stays while any does).
    hairpin_refs: HashMap<Ipv4Addr, usize>,
    /// Affinity timeouts whose sets and rules exist.
    timeouts: BTreeSet<u32>,
    synced: bool,
}

/// Elements of one service port keyed by (set, key), for diffing.
fn keyed(elems: Vec<Elem>) -> BTreeMap<(SetName, String), Option<String>> {
    elems
        .into_iter()
        .map(|e| ((e.set, e.key), e.value))
        .collect()
}

impl NftBackend {
    pub fn new(runner: Box<dyn Runner>, opts: RenderOptions) -> NftBackend {
        NftBackend {
            runner,
            opts,
            applied: BTreeMap::new(),
            node_ips: Vec::new(),
            hairpin_refs: HashMap::new(),
            timeouts: BTreeSet::new(),
            synced: false,
        }
    }

    fn elements(&self, sp: &ServicePort, node_ips: &[Ipv4Addr]) -> Vec<Elem> {
        render::service_elements(sp, node_ips, &self.opts)
    }

    /// The text of a full sync and the number of elements it writes. `existing_timeouts` are
    /// affinity sets present in the kernel; `stale_affinity` learned entries to drop.
    pub fn full_sync_text(
        &self,
        model: &ProxyModel,
        existing_timeouts: &BTreeSet<u32>,
        stale_affinity: &[String],
        recreate: bool,
    ) -> (String, usize) {
        let timeouts = render::affinity_timeouts(model);
        let mut text = if recreate {
            skeleton::recreate_skeleton(&self.opts, &timeouts)
        } else {
            let stale: BTreeSet<u32> = existing_timeouts.difference(&timeouts).copied().collect();
            skeleton::skeleton(&self.opts, &timeouts, &stale)
        };
        if !recreate {
            delete_affinity_text(stale_affinity, &mut text);
        }
        let hairpin: BTreeSet<Ipv4Addr> = model
            .services
            .values()
            .flat_map(render::hairpin_ips)
            .collect();
        let elems = model
            .services
            .values()
            .flat_map(|sp| self.elements(sp, &model.node_ips))
            .chain(hairpin.into_iter().map(render::hairpin_elem));
        let written = render::stream_add_elements(elems, &mut text);
        (text, written)
    }

    /// The text of a partial sync (element deletions, then additions) and the element count.
    /// Updates the applied state as if the text were loaded; a failed load is followed by a
    /// full sync, which rebuilds that state from scratch.
    pub fn partial_sync_text(
        &mut self,
        model: &ProxyModel,
        changed: &[ServicePortName],
    ) -> (String, usize) {
        let mut removed: Vec<Elem> = Vec::new();
        let mut added: Vec<Elem> = Vec::new();
        let mut hairpin_delta: BTreeMap<Ipv4Addr, i64> = BTreeMap::new();
        for name in changed {
            let old = self.applied.remove(name);
            let new = model.services.get(name);
            let old_elems = old
                .as_ref()
                .map(|sp| keyed(self.elements(sp, &self.node_ips)))
                .unwrap_or_default();
            let new_elems = new
                .map(|sp| keyed(self.elements(sp, &model.node_ips)))
                .unwrap_or_default();
            for ((set, key), value) in &old_elems {
                if new_elems.get(&(*set, key.clone())) != Some(value) {
                    removed.push(Elem {
                        set: *set,
                        key: key.clone(),
                        value: value.clone(),
                    });
                }
            }
            for ((set, key), value) in &new_elems {
                if old_elems.get(&(*set, key.clone())) != Some(value) {
                    added.push(Elem {
                        set: *set,
                        key: key.clone(),
                        value: value.clone(),
                    });
                }
            }
            for ip in old.iter().flat_map(render::hairpin_ips) {
                *hairpin_delta.entry(ip).or_insert(0) -= 1;
            }
            for ip in new.into_iter().flat_map(render::hairpin_ips) {
                *hairpin_delta.entry(ip).or_insert(0) += 1;
            }
            if let (Some(_), Some(sp)) = (new, model.services.get(name)) {
                self.applied.insert(name.clone(), sp.clone());
            }
        }
        for (ip, delta) in hairpin_delta {
            let before = self.hairpin_refs.get(&ip).copied().unwrap_or(0);
            let after = (before as i64 + delta).max(0) as usize;
            match (before, after) {
                (0, a) if a > 0 => added.push(render::hairpin_elem(ip)),
                (b, 0) if b > 0 => removed.push(render::hairpin_elem(ip)),
                _ => {}
            }
            if after == 0 {
                self.hairpin_refs.remove(&ip);
            } else {
                self.hairpin_refs.insert(ip, after);
            }
        }
        let mut text = String::new();
        let removed_refs: Vec<&Elem> = removed.iter().collect();
        render::delete_elements_text(&removed_refs, &mut text);
        let grouped = render::merge_elements(added.iter());
        let written = render::add_elements_text(&grouped, &mut text) + removed.len();
        (text, written)
    }

    fn apply(&self, text: &str) -> Result<(), ProxyError> {
        let out = self
            .runner
            .run("nft", &["-f", "-"], Some(text.as_bytes()))?;
        if !out.success() {
            return Err(out.failure("nft", "loading service rules"));
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

    /// Learned affinity entries that point to endpoints no longer valid. Listing one map is
    /// cheap (unlike listing a chain, which makes nft fetch every element of the table).
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
        let existing = if self.synced {
            self.timeouts.clone()
        } else {
            self.existing_timeouts()
        };
        self.synced = false;
        let stale = self.stale_affinity(model);
        let (text, written) = self.full_sync_text(model, &existing, &stale, false);
        if let Err(e) = self.apply(&text) {
            // A table from another version (or a half-removed one): replace it atomically.
            tracing::warn!(error = %e, "nft full sync failed, recreating table {FAMILY_TABLE}");
            let (text, _) = self.full_sync_text(model, &existing, &[], true);
            self.apply(&text)?;
        }
        self.applied = model.services.clone();
        self.node_ips = model.node_ips.clone();
        self.hairpin_refs = HashMap::new();
        for ip in model.services.values().flat_map(render::hairpin_ips) {
            *self.hairpin_refs.entry(ip).or_insert(0) += 1;
        }
        self.timeouts = render::affinity_timeouts(model);
        self.synced = true;
        Ok(SyncStats {
            full: true,
            written,
            ..SyncStats::default()
        })
    }
}

fn delete_affinity_text(keys: &[String], out: &mut String) {
    for chunk in keys.chunks(1000) {
        out.push_str(&format!(
            "delete element {FAMILY_TABLE} affinity {{ {} }}\n",
            chunk.join(", ")
        ));
    }
}

/// Whether an affinity service lost an endpoint (its learned entries may now point nowhere).
fn affinity_lost_endpoints(old: Option<&ServicePort>, new: Option<&ServicePort>) -> bool {
    let Some(old) = old.filter(|o| o.affinity_timeout.is_some()) else {
        return false;
    };
    let kept: BTreeSet<_> = new
        .map(|n| n.used_endpoints().iter().map(|e| (e.ip, e.port)).collect())
        .unwrap_or_default();
    old.used_endpoints()
        .iter()
        .any(|e| !kept.contains(&(e.ip, e.port)))
}

impl RuleBackend for NftBackend {
    fn name(&self) -> &'static str {
        "nftables"
    }

    fn sync(&mut self, model: &ProxyModel, scope: &SyncScope) -> Result<SyncStats, ProxyError> {
        let changed = match scope {
            SyncScope::Partial(changed)
                if self.synced
                    && model.node_ips == self.node_ips
                    && render::affinity_timeouts(model) == self.timeouts =>
            {
                changed
            }
            _ => return self.full_sync(model),
        };
        let check_affinity = changed
            .iter()
            .any(|n| affinity_lost_endpoints(self.applied.get(n), model.services.get(n)));
        let (mut text, written) = self.partial_sync_text(model, changed);
        if check_affinity {
            delete_affinity_text(&self.stale_affinity(model), &mut text);
        }
        if !text.is_empty() {
            if let Err(e) = self.apply(&text) {
                tracing::warn!(error = %e, "partial nft sync failed, doing a full sync");
                self.synced = false;
                return self.full_sync(model);
            }
        }
        Ok(SyncStats {
            full: false,
            written,
            ..SyncStats::default()
        })
    }

    fn rules_lost(&mut self) -> Result<bool, ProxyError> {
        if !self.synced {
            return Ok(false);
        }
        let out = self
            .runner
            .run("nft", &["list", "set", "ip", "keelson", "canary"], None)?;
        let present = out.success() && out.stdout.contains("elements = { 0x00000001 }");
        if !present {
            self.synced = false;
        }
        Ok(!present)
    }
}
