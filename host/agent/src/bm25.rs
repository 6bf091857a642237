//! Offline lexical ranking of tools against a request, with BM25.
//!
//! When a host carries more tools than fit in a prompt, the agent offers the
//! model only the few that match the request. This ranks them without a model
//! or network: words of the request against each tool's name and description.
//! Names weigh double, since a tool called `get_weather` is about weather more
//! surely than one that mentions weather once in its description.

use std::collections::{BTreeMap, HashMap};

/// Term-frequency saturation: how quickly repeating a word stops adding score.
const K1: f64 = 1.2;
/// Length normalization: how much a long description is discounted.
const B: f64 = 0.75;
/// How many times each name token is counted, against once for the description.
const NAME_WEIGHT: u32 = 2;

/// Words too common to say anything about which tool fits, and the pieces
/// contractions leave after splitting ("what's" → "what", "s").
const STOP_WORDS: &[&str] = &[
    "d", "ll", "m", "re", "s", "t", "ve", "a", "about", "all", "an", "and", "any", "are", "as",
    "at", "be", "by", "can", "could", "do", "does", "for", "from", "give", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "need", "of", "on", "or", "our", "please", "some",
    "than", "that", "the", "their", "them", "then", "there", "these", "this", "those", "to", "us",
    "want", "was", "we", "what", "when", "where", "which", "who", "will", "with", "would", "you",
    "your",
];

/// A BM25 index over tool names and descriptions.
#[derive(Clone, Debug)]
pub struct Bm25Index {
    /// Tool names, sorted; a tool's position is its document number.
    names: Vec<String>,
    /// Weighted token count of each tool's document.
    lengths: Vec<u32>,
    average_length: f64,
    /// For each term: the tools containing it and how often (name tokens weighted).
    postings: HashMap<String, Vec<(usize, u32)>>,
}

impl Bm25Index {
    /// Indexes `(tool name, description)` pairs; a repeated name replaces the
    /// earlier entry, as a later registration would.
    pub fn new<'a>(docs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let docs: BTreeMap<&str, &str> = docs.into_iter().collect();
        let mut names = Vec::with_capacity(docs.len());
        let mut lengths = Vec::with_capacity(docs.len());
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        for (doc, (name, description)) in docs.into_iter().enumerate() {
            let mut counts: BTreeMap<String, u32> = BTreeMap::new();
            for token in tokenize(name) {
                *counts.entry(token).or_default() += NAME_WEIGHT;
            }
            for token in tokenize(description) {
                *counts.entry(token).or_default() += 1;
            }
            lengths.push(counts.values().sum());
            for (term, count) in counts {
                postings.entry(term).or_default().push((doc, count));
            }
            names.push(name.to_owned());
        }
        let total: f64 = lengths.iter().map(|&l| f64::from(l)).sum();
        let average_length = if names.is_empty() {
            0.0
        } else {
            total / names.len() as f64
        };
        Self {
            names,
            lengths,
            average_length,
            postings,
        }
    }

    /// Up to `limit` tool names, best match first; only tools sharing a term
    /// with `query` are returned, and equal scores are ordered by name.
    pub fn rank(&self, query: &str, limit: usize) -> Vec<String> {
        let mut terms = tokenize(query);
        // Repeating a word in the request should not make it count more.
        terms.sort_unstable();
        terms.dedup();
        let docs = self.names.len() as f64;
        let mut scores = vec![0.0_f64; self.names.len()];
        for term in &terms {
            let Some(posting) = self.postings.get(term) else {
                continue;
            };
            // The "+ 1" form of IDF stays positive even for a term most tools
            // share, so a match always adds to the score.
            let with_term = posting.len() as f64;
            let idf = (1.0 + (docs - with_term + 0.5) / (with_term + 0.5)).ln();
            for &(doc, count) in posting {
                let tf = f64::from(count);
                let relative_length = if self.average_length > 0.0 {
                    f64::from(self.lengths[doc]) / self.average_length
                } else {
                    1.0
                };
                let norm = K1 * (1.0 - B + B * relative_length);
                scores[doc] += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(f64, &str)> = scores
            .into_iter()
            .zip(&self.names)
            .filter(|(score, _)| *score > 0.0)
            .map(|(score, name)| (score, name.as_str()))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        ranked
            .into_iter()
            .take(limit)
            .map(|(_, name)| name.to_owned())
            .collect()
    }
}

/// Splits text into lowercase, stemmed terms without stop words. Names and
/// prose go through the same path, so `getWeather`, `get_weather` and "get
/// the weather" all yield `get`, `weather`.
fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        for part in split_camel_case(word) {
            let lower = part.to_lowercase();
            if !STOP_WORDS.contains(&lower.as_str()) {
                tokens.push(stem(&lower));
            }
        }
    }
    tokens
}

/// Splits `getWeather` into `get`, `Weather` and `JSONQuery` into `JSON`,
/// `Query`; digits stay with the letters before them (`utf8`, `base64`).
fn split_camel_case(word: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let prev = chars[i - 1].1;
        let next_is_lower = chars.get(i + 1).is_some_and(|&(_, n)| n.is_lowercase());
        let lower_to_upper = c.is_uppercase() && (prev.is_lowercase() || prev.is_numeric());
        let acronym_end = c.is_uppercase() && prev.is_uppercase() && next_is_lower;
        if lower_to_upper || acronym_end {
            parts.push(&word[start..at]);
            start = at;
        }
    }
    if start < word.len() {
        parts.push(&word[start..]);
    }
    parts
}

/// A deliberately light stemmer: plurals, `-ing`, `-ed` and a final `e`, so
/// that "files", "file", "writing" and "write" meet. A full Porter stemmer
/// would add little for the short texts tool descriptions are.
fn stem(word: &str) -> String {
    let mut w = word.to_owned();
    if w.chars().any(|c| !c.is_ascii_lowercase()) {
        // Suffix rules are English; leave other scripts and digits alone.
        return w;
    }
    if let Some(base) = w.strip_suffix("ies").or_else(|| w.strip_suffix("ied"))
        && base.len() >= 2
    {
        w = format!("{base}y");
    } else if ["sses", "xes", "ches", "shes", "zes"]
        .iter()
        .any(|s| w.ends_with(s))
    {
        w.truncate(w.len() - 2);
    } else if w.len() > 3 && w.ends_with('s') && !["ss", "us", "is"].iter().any(|s| w.ends_with(s))
    {
        w.pop();
    } else if let Some(base) = w.strip_suffix("ing").or_else(|| w.strip_suffix("ed"))
        && base.len() >= 3
    {
        w = undouble(base).to_owned();
    }
    if w.len() > 3 && w.ends_with('e') {
        w.pop();
    }
    w
}

/// Drops the doubled consonant left by `running` or `stopped`, but not the
/// `ll`, `ss` or `zz` that belong to the word (`calling`, `passed`).
fn undouble(base: &str) -> &str {
    let bytes = base.as_bytes();
    match bytes {
        [.., a, b] if a == b && !b"aeioulsz".contains(b) => &base[..base.len() - 1],
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: &[(&str, &str)] = &[
        (
            "calculate",
            "Evaluate an arithmetic expression and return the number.",
        ),
        (
            "read_file",
            "Read a text file from a granted directory and return its contents.",
        ),
        (
            "write_file",
            "Write text to a file in a granted directory, replacing it.",
        ),
        (
            "list_dir",
            "List the entries of a directory: names, sizes and kinds.",
        ),
        (
            "fetch_url",
            "Fetch a URL over HTTPS and return the response body.",
        ),
        (
            "get_weather",
            "Current weather and forecast (temperature, rain, wind) for a city.",
        ),
        ("json_query", "Run a JSONPath query over a JSON document."),
        (
            "send_email",
            "Send an email message to a recipient with a subject and body.",
        ),
    ];

    fn index() -> Bm25Index {
        Bm25Index::new(TOOLS.iter().copied())
    }

    #[test]
    fn tokenizer_splits_names_and_drops_stop_words() {
        assert_eq!(tokenize("get_weather"), ["get", "weather"]);
        assert_eq!(tokenize("getWeather"), ["get", "weather"]);
        assert_eq!(tokenize("get-weather"), ["get", "weather"]);
        assert_eq!(tokenize("JSONQuery"), ["json", "query"]);
        assert_eq!(
            tokenize("What is the weather in Paris?"),
            ["weather", "paris"]
        );
        assert_eq!(tokenize("base64 utf8Decode"), ["base64", "utf8", "decod"]);
        assert_eq!(tokenize(""), Vec::<String>::new());
        assert_eq!(tokenize("日本語 Ünïcode"), ["日本語", "ünïcode"]);
    }

    #[test]
    fn stemmer_joins_common_inflections() {
        for (a, b) in [
            ("files", "file"),
            ("writing", "write"),
            ("reading", "read"),
            ("emails", "email"),
            ("queries", "query"),
            ("copied", "copy"),
            ("matches", "match"),
            ("boxes", "box"),
            ("running", "run"),
            ("stopped", "stop"),
            ("calling", "call"),
            ("passed", "pass"),
            ("fetched", "fetch"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} vs {b}");
        }
        // Words that only look inflected are left whole.
        assert_eq!(stem("status"), "status");
        assert_eq!(stem("address"), "address");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("red"), "red");
    }

    #[test]
    fn weather_query_ranks_the_weather_tool_first() {
        let ranked = index().rank("What's the weather like in Paris tomorrow?", 3);
        assert_eq!(ranked.first().map(String::as_str), Some("get_weather"));
        let ranked = index().rank("will it rain?", 8);
        assert_eq!(ranked, ["get_weather"]);
    }

    #[test]
    fn other_queries_find_their_tools() {
        let index = index();
        let first = |q: &str| index.rank(q, 1).into_iter().next();
        assert_eq!(
            first("read the files in my notes").as_deref(),
            Some("read_file")
        );
        assert_eq!(first("writing a file").as_deref(), Some("write_file"));
        assert_eq!(first("email Bob the report").as_deref(), Some("send_email"));
        assert_eq!(
            first("download https://example.com").as_deref(),
            Some("fetch_url")
        );
        assert_eq!(first("fetch this URL").as_deref(), Some("fetch_url"));
        assert_eq!(
            first("what is 17 * 23? calculate it").as_deref(),
            Some("calculate")
        );
        assert_eq!(first("listDir of /tmp").as_deref(), Some("list_dir"));
        assert_eq!(first("queries over JSON").as_deref(), Some("json_query"));
    }

    #[test]
    fn limit_is_respected() {
        let index = index();
        let all = index.rank("file directory text", 8);
        assert!(all.len() >= 3);
        assert_eq!(index.rank("file directory text", 2), all[..2]);
        assert!(index.rank("file directory text", 0).is_empty());
    }

    #[test]
    fn no_overlap_returns_nothing() {
        let index = index();
        assert!(index.rank("quantum chromodynamics", 5).is_empty());
        assert!(index.rank("the of and", 5).is_empty());
        assert!(index.rank("", 5).is_empty());
        assert!(Bm25Index::new([]).rank("weather", 5).is_empty());
    }

    #[test]
    fn name_tokens_outweigh_description_tokens() {
        let index = Bm25Index::new([
            ("translate", "Translate text; also handles weather reports."),
            ("weather", "Look things up for a place."),
        ]);
        assert_eq!(index.rank("weather", 2), ["weather", "translate"]);
    }

    #[test]
    fn ranking_is_deterministic_with_ties_by_name() {
        let docs = [
            ("zeta", "same words"),
            ("alpha", "same words"),
            ("mid", "same words"),
        ];
        let forward = Bm25Index::new(docs);
        let backward = Bm25Index::new(docs.iter().rev().copied());
        let expected = ["alpha", "mid", "zeta"];
        for _ in 0..10 {
            assert_eq!(forward.rank("words", 5), expected);
            assert_eq!(backward.rank("words", 5), expected);
        }
        assert_eq!(
            index().rank("file text", 8),
            index().rank("text file file", 8)
        );
    }

    #[test]
    fn a_repeated_name_replaces_the_earlier_entry() {
        let index = Bm25Index::new([("tool", "weather"), ("tool", "email")]);
        assert!(index.rank("weather", 5).is_empty());
        assert_eq!(index.rank("email", 5), ["tool"]);
    }

    #[test]
    fn empty_documents_do_not_break_scoring() {
        let index = Bm25Index::new([("", ""), ("weather", "")]);
        assert_eq!(index.rank("weather", 5), ["weather"]);
    }
}
