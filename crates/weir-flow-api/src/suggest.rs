//! "Did you mean": the known names closest to a mistyped one, for the errors of the CLI and
//! of flow validation (`unknown processor type `Putfile`; did you mean `PutFile`?`).

/// The most suggestions [`similar`] returns.
const MAX_SUGGESTIONS: usize = 3;

/// The `candidates` close to `word`, closest first (at most three, none when nothing is
/// close). Case is ignored. A candidate is close when it contains `word` (three characters
/// or more: `jetstream` finds `ConsumeJetStream`), or when its edit distance (Levenshtein,
/// in characters) from `word` is the smallest of all candidates and at most a third of
/// `word`'s length (at least 1): `Putfile` finds `PutFile` alone, not `GetFile` two edits
/// away. Costs one edit-distance computation per candidate, `O(len(word) × len(candidate))`
/// each.
pub fn similar<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let wanted = word.trim().to_lowercase();
    if wanted.is_empty() {
        return Vec::new();
    }
    let allowed = (wanted.chars().count() / 3).max(1);
    // (distance, contains `word`, name) of every candidate.
    let measured: Vec<(usize, bool, &'a str)> = candidates
        .into_iter()
        .map(|candidate| {
            let lower = candidate.to_lowercase();
            let contains = wanted.chars().count() >= 3 && lower.contains(&wanted);
            (strsim::levenshtein(&wanted, &lower), contains, candidate)
        })
        .collect();
    let best = measured
        .iter()
        .map(|&(d, ..)| d)
        .min()
        .unwrap_or(usize::MAX);
    let mut close: Vec<(usize, &'a str)> = measured
        .into_iter()
        .filter(|&(distance, contains, _)| contains || (distance == best && distance <= allowed))
        .map(|(distance, _, name)| (distance, name))
        .collect();
    close.sort_unstable();
    close.dedup_by_key(|(_, name)| *name);
    close
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, name)| name)
        .collect()
}

/// `"; did you mean `A` or `B`?"` for the [`similar`] names, or `""` when there are none: a
/// tail for an error message.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<String> = similar(word, candidates)
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        [rest @ .., last] => format!("; did you mean {} or {last}?", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TYPES: [&str; 6] = [
        "GetFile",
        "PutFile",
        "ConsumeJetStream",
        "PublishJetStream",
        "CryptographicHashContent",
        "Funnel",
    ];

    #[test]
    fn a_near_miss_finds_its_name() {
        assert_eq!(similar("Putfile", TYPES), ["PutFile"]);
        assert_eq!(similar("PutFiel", TYPES), ["PutFile"]);
        assert_eq!(similar("GetFiles", TYPES), ["GetFile"]);
        assert_eq!(similar(" funel ", TYPES), ["Funnel"]);
        // Both within reach, the closer first.
        assert_eq!(similar("GutFile", TYPES), ["GetFile", "PutFile"]);
    }

    #[test]
    fn a_part_of_a_name_finds_the_names_holding_it() {
        assert_eq!(
            similar("jetstream", TYPES),
            ["ConsumeJetStream", "PublishJetStream"]
        );
        assert_eq!(similar("HashContent", TYPES), ["CryptographicHashContent"]);
        // Too short to say anything.
        assert!(similar("ub", TYPES).is_empty());
    }

    #[test]
    fn nothing_close_suggests_nothing() {
        assert!(similar("SplitRecord", TYPES).is_empty());
        assert!(similar("", TYPES).is_empty());
        assert!(similar("  ", TYPES).is_empty());
        assert!(similar("PutFile", []).is_empty());
        assert_eq!(did_you_mean("SplitRecord", TYPES), "");
    }

    #[test]
    fn the_tail_names_one_or_several() {
        assert_eq!(did_you_mean("putfile", TYPES), "; did you mean `PutFile`?");
        assert_eq!(
            did_you_mean("GutFile", TYPES),
            "; did you mean `GetFile` or `PutFile`?"
        );
        assert_eq!(
            did_you_mean("File", ["GetFile", "PutFile", "FetchFile", "ListFile"]),
            "; did you mean `GetFile`, `PutFile` or `ListFile`?"
        );
    }

    #[test]
    fn multi_byte_names_are_measured_in_characters() {
        assert_eq!(similar("Größe", ["Grösse", "Größe", "Weite"]), ["Größe"]);
        assert_eq!(similar("Grösse", ["Größe", "Weite"]), ["Größe"]);
        assert_eq!(similar("ÉTAPE", ["étape"]), ["étape"]);
    }

    proptest! {
        /// Any known name is found from itself, in any case, first; and nothing found is
        /// anything but a candidate, with at most three.
        #[test]
        fn a_name_finds_itself_first(i in 0..TYPES.len(), upper in any::<bool>(), noise in "[a-zA-Z ]{0,12}") {
            let name = TYPES[i];
            let typed = if upper { name.to_uppercase() } else { name.to_lowercase() };
            prop_assert_eq!(similar(&typed, TYPES).first().copied(), Some(name));
            let found = similar(&noise, TYPES);
            prop_assert!(found.len() <= MAX_SUGGESTIONS);
            prop_assert!(found.iter().all(|f| TYPES.contains(f)));
        }
    }
}
