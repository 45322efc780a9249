//! The gitleaks rule-file parser on arbitrary files and on generated rule files (fuzz-chosen
//! regex, keywords, entropy, allowlist): never panics; a file that loads answers on any text,
//! and every hit names a rule id of the file.
#![no_main]

use fleetgate_proxy::judge::gates::secret_url::rules::RuleSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(set) = RuleSet::parse(&text, "fuzz") {
        let ids: Vec<String> = set.ids().map(str::to_string).collect();
        if let Some(hit) = set.find(&text) {
            assert!(ids.contains(&hit.rule), "hit of an unknown rule {}", hit.rule);
        }
    }
    // Generated files: the input split into regex | keyword | allowlist regex | sample.
    let parts: Vec<&str> = text.splitn(4, '\u{1}').collect();
    let [regex, keyword, allow, sample] = parts.as_slice() else {
        return;
    };
    let clean = |s: &str| s.replace("'''", "").replace('\n', " ");
    let entropy = data.first().map_or(0.0, |b| f64::from(*b % 80) / 10.0);
    let file = format!(
        "[[rules]]\nid = \"gen\"\nregex = '''{}'''\nkeywords = [{:?}]\nentropy = {entropy}\n[[rules.allowlists]]\nregexes = ['''{}''']\nstopwords = [{:?}]\n",
        clean(regex),
        clean(keyword),
        clean(allow),
        clean(keyword)
    );
    if let Ok(set) = RuleSet::parse(&file, "generated") {
        if let Some(hit) = set.find(sample) {
            assert_eq!(hit.rule, "gen");
            assert!(hit.span.end <= sample.len());
        }
    }
});
