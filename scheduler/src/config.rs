//! `--config`: a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) read as upstream
//! reads it: profiles by schedulerName, plugins enabled and disabled per extension point (or
//! multiPoint) with score weights, percentageOfNodesToScore, and the plugin args Keelson
//! honours. Anything else is refused with its field's name rather than ignored.

use crate::plugins::{fit, spread, Plugin};
use serde::Deserialize;
use std::collections::HashSet;

/// One profile: the plugins it runs, in upstream's order, and their settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub scheduler_name: String,
    pub filters: Vec<Plugin>,
    pub scores: Vec<(Plugin, i64)>,
    pub preemption: bool,
    pub gates: bool,
    /// 0: adaptive, as upstream.
    pub percentage_of_nodes_to_score: u32,
    pub spread_defaults: Vec<spread::Default>,
    /// Whether `spread_defaults` are upstream's system defaults (defaultingType System).
    pub spread_system: bool,
    pub hard_pod_affinity_weight: i64,
    pub fit: fit::Strategy,
}

impl Default for Profile {
    fn default() -> Self {
        Profile::build(crate::SCHEDULER_NAME, &Choices::default(), 0)
    }
}

/// What one extension point of a profile's `plugins` disables and enables.
#[derive(Default)]
struct Choice {
    off: HashSet<String>,
    on: Vec<(Plugin, Option<i64>)>,
}

impl Choice {
    /// Whether `p` runs here, given whether it ran before this choice applied.
    fn keeps(&self, p: Plugin, before: bool) -> bool {
        let on = self.on.iter().any(|(q, _)| *q == p);
        on || (before && !self.off.contains("*") && !self.off.contains(p.name()))
    }

    fn weight(&self, p: Plugin) -> Option<i64> {
        self.on
            .iter()
            .find(|(q, _)| *q == p)
            .and_then(|(_, w)| *w)
            .filter(|w| *w > 0)
    }
}

/// The extension points Keelson configures: multiPoint (all of them), preFilter and filter,
/// preScore and score, postFilter (preemption), preEnqueue (scheduling gates).
#[derive(Default)]
struct Choices {
    multi: Choice,
    filter: Choice,
    score: Choice,
    post_filter: Choice,
    pre_enqueue: Choice,
}

impl Profile {
    fn build(name: &str, c: &Choices, pct: u32) -> Profile {
        let mut filters = Vec::new();
        let mut scores = Vec::new();
        for (p, default_weight) in Plugin::DEFAULTS {
            let multi = c.multi.keeps(p, true);
            if p.filters() && c.filter.keeps(p, multi) {
                filters.push(p);
            }
            if p.scores() && c.score.keeps(p, multi) {
                let w = c
                    .score
                    .weight(p)
                    .or(c.multi.weight(p))
                    .unwrap_or(default_weight.max(1));
                scores.push((p, w));
            }
        }
        Profile {
            scheduler_name: name.to_string(),
            filters,
            scores,
            preemption: c.post_filter.keeps(
                Plugin::DefaultPreemption,
                c.multi.keeps(Plugin::DefaultPreemption, true),
            ),
            gates: c.pre_enqueue.keeps(
                Plugin::SchedulingGates,
                c.multi.keeps(Plugin::SchedulingGates, true),
            ),
            percentage_of_nodes_to_score: pct,
            spread_defaults: spread::system_defaults(),
            spread_system: true,
            hard_pod_affinity_weight: 1,
            fit: fit::Strategy::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Parse(String),
    #[error("{field}: {why}")]
    Invalid { field: String, why: String },
}

fn invalid(field: impl Into<String>, why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        why: why.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    api_version: String,
    kind: String,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<i64>,
    #[serde(default)]
    profiles: Vec<FileProfile>,
    /// Accepted for kubeconfig-style files; Keelson takes these from its flags.
    #[serde(default)]
    client_connection: Option<serde_json::Value>,
    #[serde(default)]
    leader_election: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FileProfile {
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<i64>,
    #[serde(default)]
    plugins: Option<Plugins>,
    #[serde(default)]
    plugin_config: Vec<PluginConfig>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Plugins {
    #[serde(default)]
    multi_point: Option<PluginSet>,
    #[serde(default)]
    pre_enqueue: Option<PluginSet>,
    #[serde(default)]
    queue_sort: Option<PluginSet>,
    #[serde(default)]
    pre_filter: Option<PluginSet>,
    #[serde(default)]
    filter: Option<PluginSet>,
    #[serde(default)]
    post_filter: Option<PluginSet>,
    #[serde(default)]
    pre_score: Option<PluginSet>,
    #[serde(default)]
    score: Option<PluginSet>,
    #[serde(default)]
    reserve: Option<PluginSet>,
    #[serde(default)]
    permit: Option<PluginSet>,
    #[serde(default)]
    pre_bind: Option<PluginSet>,
    #[serde(default)]
    bind: Option<PluginSet>,
    #[serde(default)]
    post_bind: Option<PluginSet>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PluginSet {
    #[serde(default)]
    enabled: Vec<PluginRef>,
    #[serde(default)]
    disabled: Vec<PluginRef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginRef {
    name: String,
    #[serde(default)]
    weight: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginConfig {
    name: String,
    #[serde(default)]
    args: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SpreadArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    default_constraints: Vec<DefaultConstraint>,
    #[serde(default)]
    defaulting_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DefaultConstraint {
    max_skew: i32,
    topology_key: String,
    when_unsatisfiable: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AffinityArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    hard_pod_affinity_weight: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FitArgs {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    scoring_strategy: Option<ScoringStrategy>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScoringStrategy {
    #[serde(rename = "type", default)]
    type_: Option<String>,
    #[serde(default)]
    resources: Vec<PluginRef>,
}

/// The profiles a configuration file asks for.
pub fn load(path: &std::path::Path) -> Result<Vec<Profile>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text)
}

fn percentage(v: Option<i64>, field: &str) -> Result<Option<u32>, ConfigError> {
    match v {
        None => Ok(None),
        Some(p) if (0..=100).contains(&p) => Ok(Some(p as u32)),
        Some(p) => Err(invalid(
            field,
            format!("Invalid value: {p}: not in valid range [0-100]"),
        )),
    }
}

pub fn parse(text: &str) -> Result<Vec<Profile>, ConfigError> {
    let file: File = serde_norway::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
    if file.api_version != "kubescheduler.config.k8s.io/v1" {
        return Err(invalid(
            "apiVersion",
            format!(
                "unsupported \"{}\": only kubescheduler.config.k8s.io/v1",
                file.api_version
            ),
        ));
    }
    if file.kind != "KubeSchedulerConfiguration" {
        return Err(invalid("kind", format!("unsupported \"{}\"", file.kind)));
    }
    let _ = (&file.client_connection, &file.leader_election);
    let global = percentage(
        file.percentage_of_nodes_to_score,
        "percentageOfNodesToScore",
    )?
    .unwrap_or(0);
    if file.profiles.is_empty() {
        return Ok(vec![Profile {
            percentage_of_nodes_to_score: global,
            ..Profile::default()
        }]);
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, fp) in file.profiles.into_iter().enumerate() {
        let at = format!("profiles[{i}]");
        let name = fp
            .scheduler_name
            .unwrap_or_else(|| crate::SCHEDULER_NAME.to_string());
        if !seen.insert(name.clone()) {
            return Err(invalid(
                format!("{at}.schedulerName"),
                format!("Duplicate value: \"{name}\""),
            ));
        }
        let pct = percentage(
            fp.percentage_of_nodes_to_score,
            &format!("{at}.percentageOfNodesToScore"),
        )?
        .unwrap_or(global);
        let mut profile = plugins(&at, &name, fp.plugins.unwrap_or_default(), pct)?;
        for (k, pc) in fp.plugin_config.iter().enumerate() {
            args(&mut profile, &format!("{at}.pluginConfig[{k}]"), pc)?;
        }
        out.push(profile);
    }
    Ok(out)
}

fn plugins(at: &str, name: &str, p: Plugins, pct: u32) -> Result<Profile, ConfigError> {
    let mut c = Choices::default();
    let sets = [
        ("multiPoint", p.multi_point, Some(&mut c.multi)),
        ("preEnqueue", p.pre_enqueue, Some(&mut c.pre_enqueue)),
        ("queueSort", p.queue_sort, None),
        ("preFilter", p.pre_filter, None),
        ("filter", p.filter, Some(&mut c.filter)),
        ("postFilter", p.post_filter, Some(&mut c.post_filter)),
        ("preScore", p.pre_score, None),
        ("score", p.score, Some(&mut c.score)),
        ("reserve", p.reserve, None),
        ("permit", p.permit, None),
        ("preBind", p.pre_bind, None),
        ("bind", p.bind, None),
        ("postBind", p.post_bind, None),
    ];
    for (point, set, choice) in sets {
        let Some(set) = set else { continue };
        let Some(choice) = choice else {
            if set.enabled.is_empty() && set.disabled.is_empty() {
                continue;
            }
            // The pre-points follow their point (filter, score); the rest are fixed.
            return Err(invalid(
                format!("{at}.plugins.{point}"),
                "Keelson does not configure this extension point: enable or disable plugins under multiPoint, filter, score, postFilter or preEnqueue",
            ));
        };
        for (k, r) in set.disabled.iter().enumerate() {
            if r.name != "*" && Plugin::from_name(&r.name).is_none() {
                return Err(unknown(
                    &format!("{at}.plugins.{point}.disabled[{k}]"),
                    &r.name,
                ));
            }
            choice.off.insert(r.name.clone());
        }
        for (k, r) in set.enabled.iter().enumerate() {
            let field = format!("{at}.plugins.{point}.enabled[{k}]");
            let plugin = Plugin::from_name(&r.name).ok_or_else(|| unknown(&field, &r.name))?;
            let extends = match point {
                "filter" => plugin.filters(),
                "score" => plugin.scores(),
                "postFilter" => plugin == Plugin::DefaultPreemption,
                "preEnqueue" => plugin == Plugin::SchedulingGates,
                _ => true,
            };
            if !extends {
                return Err(invalid(
                    &field,
                    format!("plugin \"{}\" does not extend {point}", r.name),
                ));
            }
            if let Some(w) = r.weight {
                if !(0..=100).contains(&w) {
                    return Err(invalid(
                        format!("{field}.weight"),
                        format!("Invalid value: {w}: must be in range [0, 100]"),
                    ));
                }
                if !plugin.scores() {
                    return Err(invalid(
                        format!("{field}.weight"),
                        format!("{} is not a score plugin", r.name),
                    ));
                }
            }
            choice.on.push((plugin, r.weight));
        }
    }
    Ok(Profile::build(name, &c, pct))
}

fn unknown(field: &str, name: &str) -> ConfigError {
    invalid(
        field,
        format!("plugin \"{name}\" is not in Keelson's registry (upstream's in-tree plugins)"),
    )
}

fn args(profile: &mut Profile, at: &str, pc: &PluginConfig) -> Result<(), ConfigError> {
    let bad = |e: serde_json::Error| invalid(format!("{at}.args"), e.to_string());
    let args = if pc.args.is_null() {
        serde_json::json!({})
    } else {
        pc.args.clone()
    };
    match pc.name.as_str() {
        "PodTopologySpread" => {
            let a: SpreadArgs = serde_json::from_value(args).map_err(bad)?;
            let _ = (a.api_version, a.kind);
            match a.defaulting_type.as_deref().unwrap_or("System") {
                "System" if !a.default_constraints.is_empty() => {
                    return Err(invalid(format!("{at}.args.defaultConstraints"), "Invalid value: when .defaultingType is \"System\", .defaultConstraints must be empty"));
                }
                "System" => {}
                "List" => {
                    profile.spread_system = false;
                    profile.spread_defaults = Vec::new();
                    for (k, c) in a.default_constraints.into_iter().enumerate() {
                        let field = format!("{at}.args.defaultConstraints[{k}]");
                        if c.max_skew < 1 {
                            return Err(invalid(
                                format!("{field}.maxSkew"),
                                "must be greater than zero",
                            ));
                        }
                        let hard = match c.when_unsatisfiable.as_str() {
                            "DoNotSchedule" => true,
                            "ScheduleAnyway" => false,
                            other => {
                                return Err(invalid(
                                    format!("{field}.whenUnsatisfiable"),
                                    format!("Unsupported value: \"{other}\""),
                                ))
                            }
                        };
                        profile.spread_defaults.push(spread::Default {
                            max_skew: c.max_skew,
                            topology_key: c.topology_key,
                            hard,
                        });
                    }
                }
                other => {
                    return Err(invalid(
                        format!("{at}.args.defaultingType"),
                        format!(
                        "Unsupported value: \"{other}\": supported values: \"System\", \"List\""
                    ),
                    ))
                }
            }
        }
        "InterPodAffinity" => {
            let a: AffinityArgs = serde_json::from_value(args).map_err(bad)?;
            let _ = (a.api_version, a.kind);
            if let Some(w) = a.hard_pod_affinity_weight {
                if !(0..=100).contains(&w) {
                    return Err(invalid(
                        format!("{at}.args.hardPodAffinityWeight"),
                        "not in valid range [0-100]",
                    ));
                }
                profile.hard_pod_affinity_weight = w;
            }
        }
        "NodeResourcesFit" => {
            let a: FitArgs = serde_json::from_value(args).map_err(bad)?;
            let _ = (a.api_version, a.kind);
            if let Some(s) = a.scoring_strategy {
                profile.fit.most_allocated = match s.type_.as_deref().unwrap_or("LeastAllocated") {
                    "LeastAllocated" => false,
                    "MostAllocated" => true,
                    other => return Err(invalid(format!("{at}.args.scoringStrategy.type"), format!("Unsupported value: \"{other}\": supported values: \"LeastAllocated\", \"MostAllocated\""))),
                };
                if !s.resources.is_empty() {
                    profile.fit.resources = s
                        .resources
                        .into_iter()
                        .map(|r| (r.name, r.weight.unwrap_or(1)))
                        .collect();
                }
            }
        }
        other => {
            return Err(invalid(
                format!("{at}.name"),
                format!("no arguments are honoured for plugin \"{other}\""),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams_profile() {
        let p =
            parse("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
                .unwrap();
        assert_eq!(p, vec![Profile::default()]);
        let weights: Vec<(&str, i64)> = p[0].scores.iter().map(|(p, w)| (p.name(), *w)).collect();
        assert_eq!(
            weights,
            [
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1)
            ]
        );
    }

    #[test]
    fn profiles_disable_enable_and_weigh_plugins() {
        let p = parse(
            "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  percentageOfNodesToScore: 100
  plugins:
    score:
      disabled: [{name: '*'}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
    filter:
      disabled: [{name: InterPodAffinity}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]
",
        )
        .unwrap();
        assert_eq!(p[0].percentage_of_nodes_to_score, 30);
        let packer = &p[1];
        assert_eq!(packer.percentage_of_nodes_to_score, 100);
        assert_eq!(packer.scores, [(Plugin::NodeResourcesFit, 5)]);
        assert!(!packer.filters.contains(&Plugin::InterPodAffinity));
        assert!(packer.filters.contains(&Plugin::NodeResourcesFit));
        assert!(packer.fit.most_allocated);
        assert!(!packer.spread_system);
        assert_eq!(packer.spread_defaults.len(), 1);
    }

    #[test]
    fn what_is_not_honoured_is_refused_by_name() {
        let head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
        for (body, want) in [
            ("profiles: [{plugins: {score: {enabled: [{name: Nope}]}}}]", "profiles[0].plugins.score.enabled[0]: plugin \"Nope\""),
            ("percentageOfNodesToScore: 101", "percentageOfNodesToScore: Invalid value: 101"),
            ("profiles: [{schedulerName: a}, {schedulerName: a}]", "profiles[1].schedulerName: Duplicate value"),
            ("podMaxBackoffSeconds: 3", "unknown field `podMaxBackoffSeconds`"),
            ("profiles: [{pluginConfig: [{name: NodeAffinity, args: {}}]}]", "profiles[0].pluginConfig[0].name: no arguments are honoured"),
            ("profiles: [{pluginConfig: [{name: PodTopologySpread, args: {defaultingType: Other}}]}]", "Unsupported value: \"Other\""),
        ] {
            let err = parse(&format!("{head}{body}\n")).unwrap_err().to_string();
            assert!(err.contains(want), "{body}: {err}");
        }
        let err = parse(
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("apiVersion: unsupported"),
            "{err}"
        );
    }
}
