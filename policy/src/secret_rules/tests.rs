use super::*;

#[test]
fn every_builtin_rule_compiles_and_ids_are_unique() {
    let set = RuleSet::parse(BUILTIN, "built-in").expect("the built-in rules must compile");
    assert!(
        set.len() >= 150,
        "at least 150 built-in formats, got {}",
        set.len()
    );
    let ids: std::collections::HashSet<&str> = set.ids().collect();
    assert_eq!(ids.len(), set.len(), "rule ids must be unique");
    for id in set.ids() {
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "rule id {id} must be kebab-case"
        );
    }
}
