use super::*;

#[test]
fn mode_names_as_upstreams_flag() {
    use clap::ValueEnum;
    let names: Vec<String> = Mode::value_variants()
        .iter()
        .map(|m| m.to_possible_value().unwrap().get_name().to_string())
        .collect();
    assert_eq!(names, ["AlwaysAllow", "Node", "RBAC"]);
}
