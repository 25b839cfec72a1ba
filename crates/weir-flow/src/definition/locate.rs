//! Places a validation error on a line of the YAML text.
//!
//! `serde_yaml_ng` keeps no positions once a document is deserialized, so the checks that come
//! after it (unknown types, relationships, properties) find their line by searching the text
//! from the enclosing item's line: the item's `name:` line, then the first line below it that
//! holds the key. Both block (`key: value`) and flow (`{ key: value }`) styles are found.

pub(super) struct Locator {
    lines: Vec<String>,
}

fn strip_quotes(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(s)
}

impl Locator {
    pub(super) fn new(text: &str) -> Locator {
        Locator {
            lines: text
                .lines()
                .map(|l| l.split(" #").next().unwrap_or("").to_string())
                .collect(),
        }
    }

    /// Positions (byte offsets) in `line` where `key:` starts as a key.
    fn key_at(line: &str, key: &str) -> Option<usize> {
        let mut from = 0;
        while let Some(i) = line[from..].find(key) {
            let at = from + i;
            let before = line[..at].trim_end();
            let before_ok = before.is_empty()
                || before.ends_with('-')
                || before.ends_with('{')
                || before.ends_with(',')
                || before.ends_with('"')
                || before.ends_with('\'');
            let after = line[at + key.len()..].trim_start_matches(['"', '\'']);
            if before_ok && after.starts_with(':') {
                return Some(at);
            }
            from = at + key.len();
        }
        None
    }

    /// The first line at or after `from` (1-based) where `key: value` is written.
    pub(super) fn value_line(&self, key: &str, value: &str, from: usize) -> Option<usize> {
        for (i, line) in self.lines.iter().enumerate().skip(from.saturating_sub(1)) {
            if let Some(at) = Self::key_at(line, key) {
                let rest = &line[at + key.len()..];
                let rest = rest.split_once(':').map_or("", |(_, r)| r);
                let v = rest.split([',', '}']).next().unwrap_or("");
                if strip_quotes(v) == value {
                    return Some(i + 1);
                }
            }
        }
        None
    }

    /// The first line at or after `from` (1-based) that holds `key:`.
    pub(super) fn key_line(&self, key: &str, from: Option<usize>) -> Option<usize> {
        let from = from?;
        self.lines
            .iter()
            .enumerate()
            .skip(from.saturating_sub(1))
            .find(|(_, l)| Self::key_at(l, key).is_some())
            .map(|(i, _)| i + 1)
    }

    /// The line of a key at the top level (no indentation).
    pub(super) fn top_level_key_line(&self, key: &str) -> Option<usize> {
        self.lines
            .iter()
            .position(|l| l.starts_with(key) && l[key.len()..].starts_with(':'))
            .map(|i| i + 1)
    }
}
