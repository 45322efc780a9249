use std::ops::ControlFlow;

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

#[test]
fn a_rule_regex_is_compiled_only_once_a_text_names_its_keywords() {
    let text = r#"
[[rules]]
id = "corp-token"
regex = '''corp_live_[a-z0-9]{8}'''
keywords = ["corp_live_"]

[[rules]]
id = "other-token"
regex = '''other_[a-z0-9]{8}'''
keywords = ["other_"]
[rules.allowlist]
regexes = ['''other_00000000''']
"#;
    let set = RuleSet::parse(text, "test").expect("the test rules must parse");
    let compiled = |set: &RuleSet| -> Vec<String> {
        set.rules
            .iter()
            .filter(|r| r.regex.is_compiled())
            .map(|r| r.id.clone())
            .collect()
    };
    assert!(
        compiled(&set).is_empty(),
        "loading must compile no rule for use"
    );
    let builtin = RuleSet::load(BUILTIN, "built-in", Check::Trusted)
        .expect("the built-in rules must load unchecked");
    assert!(
        compiled(&builtin).is_empty(),
        "loading the built-in set must compile no rule"
    );
    assert_eq!(set.find("https://example.com/?q=nothing"), None);
    assert!(
        compiled(&set).is_empty(),
        "a text naming no keyword must compile no rule"
    );
    let hit = set
        .find("https://example.com/?t=corp_live_abcdef12")
        .expect("the corp token must be found");
    assert_eq!(hit.rule, "corp-token");
    assert_eq!(
        compiled(&set),
        vec!["corp-token"],
        "only the rule whose keyword occurred must be compiled"
    );
    assert_eq!(
        set.find("https://example.com/?t=other_00000000"),
        None,
        "the lazily compiled allowlist must still allow its match"
    );
    assert!(
        set.find("https://example.com/?t=other_abcdef12").is_some(),
        "the lazily compiled rule must still refuse a token outside its allowlist"
    );
}

#[test]
fn a_bad_regex_is_still_refused_at_load() {
    for (text, what) in [
        (
            "[[rules]]\nid = \"bad\"\nregex = '''(unclosed'''\n",
            "invalid regex",
        ),
        (
            "[[rules]]\nid = \"bad\"\nregex = '''ok'''\n[rules.allowlist]\nregexes = ['''(unclosed''']\n",
            "invalid allowlist regex",
        ),
        (
            "[[rules]]\nid = \"bad\"\nregex = '''(a)b'''\nsecretGroup = 2\n",
            "secretGroup 2",
        ),
    ] {
        let err = RuleSet::parse(text, "test").expect_err("a bad rule must be refused at load");
        assert!(
            err.to_string().contains(what),
            "the refusal must say {what:?}: {err}"
        );
    }
}

#[test]
fn a_set_with_literals_finds_what_the_set_finds_and_stops_where_the_caller_does() {
    let builtin = RuleSet::builtin();
    let literals = LiteralFilter::of([b"zz_".as_slice(), b"Corp-".as_slice()]);
    let joint = builtin.with_literals(&literals);
    let aws = "use AKIAIOSFODNN7EXAMPLA for the bucket";
    let texts = [
        aws.to_string(),
        format!(
            "{} {aws}",
            "prose with an api key, a path and a secret. ".repeat(40)
        ),
        "nothing here, zz_ and corp- are not secrets".to_string(),
        String::new(),
    ];
    for text in &texts {
        let mut visits = Vec::new();
        let answer = joint.find_except(text, &[], |i| {
            visits.push(i);
            None::<()>
        });
        assert_eq!(
            answer,
            ControlFlow::Continue(builtin.find(text)),
            "{text:.60}"
        );
        // Every place a literal starts (in any case) is visited.
        let lower = text.to_ascii_lowercase();
        for literal in ["zz_", "corp-"] {
            for (at, _) in lower.match_indices(literal) {
                assert!(visits.contains(&at), "{literal} at {at} not visited");
            }
        }
    }
    // The caller's answer ends the pass.
    let text = &texts[2];
    let at = text.find("corp-").expect("the text names corp-");
    let answer = joint.find_except(text, &[], |i| (i == at).then_some(i));
    assert_eq!(answer, ControlFlow::Break(at));
    // Exempt rules are skipped as with find_except.
    let skip = [builtin.find(aws).expect("the AWS key is found").rule];
    assert_eq!(
        joint.find_except(aws, &skip, |_| None::<()>),
        ControlFlow::Continue(builtin.find_except(aws, &skip))
    );
}
