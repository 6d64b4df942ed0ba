//! CI reports of `verbsim run` (issue #17 item 2): JUnit XML as GitLab,
//! Jenkins and GitHub test reporters read it, and JSON. Hand-written: the
//! formats are small, and every string goes through an escaper.

use conformance::{Outcome, Summary};

/// XML text and attribute escaping.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no representation for most control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// A JSON string literal.
fn json(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The seed a failure message names (`… (VERBS_SIM_SEED=7)`).
fn seed_of(message: &str) -> Option<u64> {
    let at = message.rfind("VERBS_SIM_SEED=")? + "VERBS_SIM_SEED=".len();
    let digits: String = message[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `classname` of a script: its directory, dotted (`conformance.scripts.qp`).
fn classname(path: &str) -> String {
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    dir.trim_start_matches("./").replace('/', ".")
}

/// One `<testsuite>` (named after the backend), one `<testcase>` per
/// script; a failure's message is `path:line: what` and names the seed.
pub(crate) fn junit(summary: &Summary, backend: &str) -> String {
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let tests = summary.results.len();
    s.push_str(&format!(
        "<testsuites name=\"verbsim\" tests=\"{tests}\" failures=\"{}\" skipped=\"{}\">\n",
        summary.failed, summary.skipped
    ));
    s.push_str(&format!(
        "  <testsuite name=\"verbsim run ({})\" tests=\"{tests}\" failures=\"{}\" skipped=\"{}\" errors=\"0\">\n",
        xml(backend),
        summary.failed,
        summary.skipped
    ));
    for (path, outcome) in &summary.results {
        let name = path.rsplit_once('/').map_or(path.as_str(), |(_, f)| f);
        let open = format!(
            "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\"",
            xml(&classname(path)),
            xml(name),
            xml(path)
        );
        match outcome {
            Outcome::Pass => s.push_str(&format!("{open}/>\n")),
            Outcome::Fail { line, message } => {
                let headline = format!("{path}:{line}: {message}");
                s.push_str(&format!(
                    "{open}>\n      <failure message=\"{}\" type=\"verbs\">{}</failure>\n    </testcase>\n",
                    xml(&headline),
                    xml(&headline)
                ));
            }
            Outcome::Skip { reason } => s.push_str(&format!(
                "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                xml(reason)
            )),
        }
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}

/// The run as one JSON object: counts and one entry per script.
pub(crate) fn json_report(summary: &Summary, backend: &str) -> String {
    let mut scripts = Vec::new();
    for (path, outcome) in &summary.results {
        let entry = match outcome {
            Outcome::Pass => format!("{{\"path\":{},\"outcome\":\"pass\"}}", json(path)),
            Outcome::Fail { line, message } => format!(
                "{{\"path\":{},\"outcome\":\"fail\",\"line\":{line},\"message\":{},\"seed\":{}}}",
                json(path),
                json(message),
                seed_of(message).map_or_else(|| "null".to_owned(), |s| s.to_string())
            ),
            Outcome::Skip { reason } => format!(
                "{{\"path\":{},\"outcome\":\"skip\",\"reason\":{}}}",
                json(path),
                json(reason)
            ),
        };
        scripts.push(entry);
    }
    format!(
        "{{\"backend\":{},\"passed\":{},\"failed\":{},\"skipped\":{},\"scripts\":[{}]}}\n",
        json(backend),
        summary.passed,
        summary.failed,
        summary.skipped,
        scripts.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_seed_extraction() {
        assert_eq!(xml("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(json("x\"y\\\n"), "\"x\\\"y\\\\\\n\"");
        assert_eq!(seed_of("expected X (VERBS_SIM_SEED=42)"), Some(42));
        assert_eq!(seed_of("no seed"), None);
        assert_eq!(
            classname("conformance/scripts/qp/a.verbs"),
            "conformance.scripts.qp"
        );
    }
}
