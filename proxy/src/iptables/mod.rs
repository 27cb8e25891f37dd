//! The iptables backend: kube-proxy's chain layout, one `iptables-restore --noflush` per sync.

pub mod render;
pub mod restore;

use std::collections::{BTreeMap, BTreeSet};

use crate::backend::{RuleBackend, SyncScope, SyncStats};
use crate::error::ProxyError;
use crate::exec::Runner;
use crate::model::{ProxyModel, ServicePortName};

use render::{RenderOptions, ServiceRules, CANARY, JUMPS};
use restore::{parse_save, restore_text, RestoreInput};

/// Which iptables implementation writes the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Nft,
    Legacy,
}

impl Variant {
    fn tool(self, suffix: &str) -> String {
        match self {
            Variant::Nft => format!("iptables-nft{suffix}"),
            Variant::Legacy => format!("iptables-legacy{suffix}"),
        }
    }
}

/// Picks the variant that already holds Kubernetes rules (like the iptables-wrapper
/// scripts do); with none, the nf_tables one, Debian's default.
pub fn detect_variant(runner: &dyn Runner) -> Variant {
    let count = |v: Variant| {
        runner
            .run(&v.tool("-save"), &[], None)
            .ok()
            .filter(|o| o.success())
            .map(|o| o.stdout.lines().filter(|l| l.contains("KUBE-")).count())
            .unwrap_or(0)
    };
    if count(Variant::Legacy) > count(Variant::Nft) {
        Variant::Legacy
    } else {
        Variant::Nft
    }
}

pub struct IptablesBackend {
    runner: Box<dyn Runner>,
    variant: Variant,
    opts: RenderOptions,
    /// Rules last written per service port; only valid while `synced`.
    cache: BTreeMap<ServicePortName, ServiceRules>,
    synced: bool,
}

impl IptablesBackend {
    pub fn new(runner: Box<dyn Runner>, variant: Variant, opts: RenderOptions) -> IptablesBackend {
        IptablesBackend {
            runner,
            variant,
            opts,
            cache: BTreeMap::new(),
            synced: false,
        }
    }

    /// Renders the text a full sync would write, given the current `iptables-save` output.
    pub fn full_sync_text(
        &self,
        model: &ProxyModel,
        saved: &str,
    ) -> (String, BTreeMap<ServicePortName, ServiceRules>) {
        let cache: BTreeMap<_, _> = model
            .services
            .iter()
            .map(|(k, sp)| (k.clone(), render::service_rules(sp, &self.opts)))
            .collect();
        let saved = parse_save(saved);
        let wanted: BTreeSet<&String> = cache.values().flat_map(|r| r.chains.iter()).collect();
        let delete_chains = saved
            .owned_nat_chains()
            .into_iter()
            .filter(|c| !wanted.contains(c))
            .collect();
        let input = RestoreInput {
            all: cache.values().collect(),
            rewrite: cache.values().collect(),
            delete_chains,
            missing_jumps: JUMPS
                .iter()
                .filter(|j| !saved.has_jump(j))
                .copied()
                .collect(),
        };
        (restore_text(&input), cache)
    }

    /// Renders the text of a partial sync, updating the cache as if it were loaded (a failed
    /// load is followed by a full sync, which rebuilds the cache from scratch).
    pub fn partial_sync_text(&mut self, model: &ProxyModel, changed: &[ServicePortName]) -> String {
        let mut delete_chains = Vec::new();
        let mut rewritten = Vec::new();
        for name in changed {
            let old = self.cache.remove(name);
            let new = model
                .services
                .get(name)
                .map(|sp| render::service_rules(sp, &self.opts));
            let keep: BTreeSet<&String> = new.iter().flat_map(|r| r.chains.iter()).collect();
            if let Some(old) = &old {
                delete_chains.extend(old.chains.iter().filter(|c| !keep.contains(c)).cloned());
            }
            if let Some(new) = new {
                rewritten.push(name.clone());
                self.cache.insert(name.clone(), new);
            }
        }
        let input = RestoreInput {
            all: self.cache.values().collect(),
            rewrite: rewritten.iter().filter_map(|n| self.cache.get(n)).collect(),
            delete_chains,
            missing_jumps: Vec::new(),
        };
        restore_text(&input)
    }

    fn restore(&self, text: &str) -> Result<(), ProxyError> {
        let prog = self.variant.tool("-restore");
        let out = self
            .runner
            .run(&prog, &["-w", "5", "--noflush"], Some(text.as_bytes()))?;
        if !out.success() {
            return Err(out.failure(&prog, "loading service rules"));
        }
        Ok(())
    }

    fn full_sync(&mut self, model: &ProxyModel) -> Result<SyncStats, ProxyError> {
        let prog = self.variant.tool("-save");
        let out = self.runner.run(&prog, &[], None)?;
        if !out.success() {
            return Err(out.failure(&prog, "reading current rules"));
        }
        let (text, cache) = self.full_sync_text(model, &out.stdout);
        self.synced = false;
        self.restore(&text)?;
        self.cache = cache;
        self.synced = true;
        Ok(SyncStats {
            full: true,
            written: count_rules(&text),
            ..SyncStats::default()
        })
    }
}

fn count_rules(text: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("-A ") || l.starts_with("-I "))
        .count()
}

impl RuleBackend for IptablesBackend {
    fn name(&self) -> &'static str {
        "iptables"
    }

    fn sync(&mut self, model: &ProxyModel, scope: &SyncScope) -> Result<SyncStats, ProxyError> {
        let changed = match scope {
            SyncScope::Partial(changed) if self.synced => changed,
            _ => return self.full_sync(model),
        };
        let text = self.partial_sync_text(model, changed);
        match self.restore(&text) {
            Ok(()) => Ok(SyncStats {
                full: false,
                written: count_rules(&text),
                ..SyncStats::default()
            }),
            Err(e) => {
                // The kernel state no longer matches our cache; start over from iptables-save.
                tracing::warn!(error = %e, "partial iptables sync failed, doing a full sync");
                self.synced = false;
                self.full_sync(model)
            }
        }
    }

    fn rules_lost(&mut self) -> Result<bool, ProxyError> {
        if !self.synced {
            return Ok(false);
        }
        let prog = self.variant.tool("");
        for table in ["nat", "filter"] {
            let out = self
                .runner
                .run(&prog, &["-w", "5", "-t", table, "-S", CANARY], None)?;
            let present = out.success() && out.stdout.lines().any(|l| l.starts_with("-A "));
            if !present {
                self.synced = false;
                return Ok(true);
            }
        }
        Ok(false)
    }
}
