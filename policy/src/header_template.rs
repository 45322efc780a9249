//! Header templates of a watch: `${VAR}` takes a variable of the gate's environment,
//! `${file:/path}` the trimmed contents of a file (a mounted Secret), so no secret sits in
//! the policy.

/// Check a template's syntax at policy load.
pub fn check_template(template: &str) -> Result<(), String> {
    expand_with(template, |_| Ok(String::new())).map(|_| ())
}

/// Expand a template from the environment and the file system.
pub fn expand(template: &str) -> Result<String, String> {
    expand_with(template, |reference| {
        match reference.strip_prefix("file:") {
        Some(path) => crate::file::read_regular_to_string(std::path::Path::new(path))
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("failed to read the header file {path}: {e}")),
        None => std::env::var(reference)
            .map_err(|_| format!("failed to expand ${{{reference}}}: the gate's environment does not set {reference}")),
    }
    })
}

fn expand_with<F>(template: &str, mut lookup: F) -> Result<String, String>
where
    F: FnMut(&str) -> Result<String, String>,
{
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed `${{` in '{template}'; write `${{VAR}}`"));
        };
        let reference = &after[..end];
        if !valid_reference(reference) {
            return Err(format!(
                "'${{{reference}}}' is neither `${{VAR}}` nor `${{file:/absolute/path}}`"
            ));
        }
        out.push_str(&lookup(reference)?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn valid_reference(reference: &str) -> bool {
    if let Some(path) = reference.strip_prefix("file:") {
        return path.starts_with('/');
    }
    let mut bytes = reference.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_variables_and_refuse_bad_syntax() {
        let lookup = |r: &str| match r {
            "TOKEN" => Ok("abc".to_string()),
            other => Err(format!("missing {other}")),
        };
        let cases: &[(&str, Result<&str, ()>)] = &[
            ("Bearer ${TOKEN}", Ok("Bearer abc")),
            ("plain", Ok("plain")),
            ("${TOKEN}-${TOKEN}", Ok("abc-abc")),
            ("Bearer ${TOKEN", Err(())),
            ("${1BAD}", Err(())),
            ("${file:relative}", Err(())),
            ("${OTHER}", Err(())),
        ];
        for (template, want) in cases {
            let got = expand_with(template, lookup);
            match want {
                Ok(w) => assert_eq!(got.as_deref(), Ok(*w), "{template} must expand"),
                Err(()) => assert!(got.is_err(), "{template} must be refused, got {got:?}"),
            }
        }
    }

    #[test]
    fn a_file_reference_reads_the_trimmed_file() {
        let dir = tempfile::tempdir().expect("a temp dir must be created");
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cret\n").expect("the token file must be written");
        let got = expand(&format!("Bearer ${{file:{}}}", file.display()));
        assert_eq!(got.as_deref(), Ok("Bearer s3cret"), "the file must be read");
    }
}
