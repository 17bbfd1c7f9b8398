//! Reading Prometheus text back into samples, for `nodetool` (which builds
//! its reports from `/metrics`) and tests. Comments, histogram series and
//! anything malformed are skipped: this reads a server's answer, so bad
//! input yields fewer samples, never a panic.

/// One sample line: `name{label="value",...} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl ParsedSample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Every well-formed sample line of `text`.
pub fn parse_text(text: &str) -> Vec<ParsedSample> {
    text.lines().filter(|line| !line.starts_with('#')).filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<ParsedSample> {
    let name_end = line.find(['{', ' '])?;
    let (name, mut rest) = line.split_at(name_end);
    if name.is_empty() {
        return None;
    }
    let mut labels = Vec::new();
    if let Some(inside) = rest.strip_prefix('{') {
        rest = inside;
        loop {
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after_key) = rest.split_once("=\"")?;
            let (value, after_value) = unescape_until_quote(after_key)?;
            labels.push((key.trim_start_matches(',').to_string(), value));
            rest = after_value.strip_prefix(',').unwrap_or(after_value);
        }
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(ParsedSample { name: name.to_string(), labels, value })
}

/// The label value up to its closing quote, and what follows the quote.
fn unescape_until_quote(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[at + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Family, Kind, Sample, Value};
    use crate::render::render_prometheus;

    #[test]
    fn reads_back_what_the_exporter_writes() {
        let family = Family {
            name: "x_total",
            help: "Help.",
            kind: Kind::Counter,
            samples: vec![Sample { labels: vec![("table", "a\"b\\c\nd".into())], value: Value::Counter(2.5) }],
        };
        let samples = parse_text(&render_prometheus(&[(3, vec![family])]));
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].name, "x_total");
        assert_eq!(samples[0].label("shard"), Some("3"));
        assert_eq!(samples[0].label("table"), Some("a\"b\\c\nd"));
        assert_eq!(samples[0].value, 2.5);
    }

    #[test]
    fn skips_what_it_cannot_read() {
        let samples =
            parse_text("# HELP x\nbare 1\n{x=\"1\"} 2\nunterminated{a=\"b 3\nno_value{a=\"b\"}\nok{a=\"b\"} +Inf\n");
        let names: Vec<_> = samples.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["bare", "ok"]);
        assert!(samples[1].value.is_infinite());
    }
}
