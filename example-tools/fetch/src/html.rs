//! Reduces an HTML page to the text a reader would see: no scripts, styles,
//! navigation or head; blocks on lines of their own; headings and list
//! items marked the Markdown way; entities decoded; whitespace collapsed.
//!
//! It is a forgiving scanner, not a parser: malformed markup never fails,
//! it just yields slightly worse text.

/// Elements whose whole content is dropped.
const HIDDEN: &[&str] = &[
    "head", "script", "style", "noscript", "template", "nav", "svg", "iframe", "object", "title",
];

/// Elements that start and end a line.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "caption",
    "dd",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "header",
    "hr",
    "main",
    "ol",
    "option",
    "section",
    "summary",
    "table",
    "tbody",
    "thead",
    "tfoot",
    "tr",
    "ul",
];

/// Elements set off by a blank line.
const PARAGRAPHS: &[&str] = &["p", "pre", "h1", "h2", "h3", "h4", "h5", "h6"];

/// A page reduced to text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The `<title>`, if there is a non-empty one.
    pub title: Option<String>,
    /// The readable text.
    pub text: String,
}

/// Reduces `html` to its title and readable text.
pub fn reduce(html: &str) -> Page {
    let title = element_content(html, "title")
        .map(|raw| collapse_whitespace(&decode_entities(raw)))
        .filter(|title| !title.is_empty());
    let mut text = TextBuilder::default();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        text.push_text(&decode_entities(&rest[..start]));
        rest = &rest[start..];
        rest = match Tag::parse(rest) {
            Markup::Comment(after) => after,
            Markup::Tag(tag, after) => {
                if !tag.closing && HIDDEN.contains(&tag.name.as_str()) {
                    skip_element(after, &tag.name)
                } else {
                    text.apply(&tag);
                    after
                }
            }
            Markup::Text => {
                text.push_text("<");
                &rest[1..]
            }
        };
    }
    text.push_text(&decode_entities(rest));
    Page {
        title,
        text: text.finish(),
    }
}

/// What starts at a `<`.
enum Markup<'a> {
    /// A comment, doctype or processing instruction; the rest after it.
    Comment(&'a str),
    /// A start or end tag; the rest after it.
    Tag(Tag, &'a str),
    /// A `<` that starts no markup (e.g. `a < b`).
    Text,
}

struct Tag {
    /// Lower-case.
    name: String,
    closing: bool,
}

impl Tag {
    /// Reads the markup at the start of `text`, which begins with `<`.
    fn parse(text: &str) -> Markup<'_> {
        if let Some(comment) = text.strip_prefix("<!--") {
            return Markup::Comment(comment.find("-->").map_or("", |end| &comment[end + 3..]));
        }
        if text.starts_with("<!") || text.starts_with("<?") {
            return Markup::Comment(text.find('>').map_or("", |end| &text[end + 1..]));
        }
        let (closing, after_bracket) = match text[1..].strip_prefix('/') {
            Some(after) => (true, after),
            None => (false, &text[1..]),
        };
        if !after_bracket.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Markup::Text;
        }
        let name_end = after_bracket
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == ':'))
            .unwrap_or(after_bracket.len());
        let name = after_bracket[..name_end].to_ascii_lowercase();
        // Attributes may hold a quoted `>`; skip them quote-aware.
        let mut quote = None;
        for (offset, c) in after_bracket[name_end..].char_indices() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(open), _) if c == open => quote = None,
                (None, '>') => {
                    let after = &after_bracket[name_end + offset + 1..];
                    return Markup::Tag(Tag { name, closing }, after);
                }
                _ => {}
            }
        }
        // An unterminated tag swallows the rest, as in a browser.
        Markup::Tag(Tag { name, closing }, "")
    }
}

/// The rest after the end tag of `name`; if there is none, the rest after
/// the start tag (so a stray `<nav>` cannot hide the whole page), except for
/// scripts and styles, whose content is never text.
fn skip_element<'a>(after_start: &'a str, name: &str) -> &'a str {
    match find_ignoring_case(after_start, &format!("</{name}")) {
        Some(end) => {
            let close = &after_start[end..];
            close.find('>').map_or("", |gt| &close[gt + 1..])
        }
        None if matches!(name, "script" | "style") => "",
        None => after_start,
    }
}

/// The raw content of the first `name` element.
fn element_content<'a>(html: &'a str, name: &str) -> Option<&'a str> {
    let start = find_ignoring_case(html, &format!("<{name}"))?;
    let after_name = &html[start + name.len() + 1..];
    if !after_name.starts_with(['>', ' ', '\t', '\n', '\r']) {
        return None;
    }
    let content = &after_name[after_name.find('>')? + 1..];
    let end = find_ignoring_case(content, &format!("</{name}")).unwrap_or(content.len());
    Some(&content[..end])
}

/// Byte offset of the first ASCII-case-insensitive match of `needle`.
fn find_ignoring_case(haystack: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

/// Collects text, collapsing whitespace and keeping at most one blank line
/// between blocks.
#[derive(Default)]
struct TextBuilder {
    out: String,
    /// A space is owed before the next word.
    space: bool,
    /// Line breaks owed before the next word (0, 1 or 2).
    breaks: usize,
    /// Inside `<pre>`: whitespace is kept as is.
    preformatted: usize,
}

impl TextBuilder {
    fn push_text(&mut self, text: &str) {
        for c in text.chars() {
            if self.preformatted > 0 {
                self.flush();
                self.out.push(if c == '\u{a0}' { ' ' } else { c });
            } else if c.is_whitespace() {
                self.space = true;
            } else {
                self.flush();
                self.out.push(c);
            }
        }
    }

    /// Writes the owed separator before a word.
    fn flush(&mut self) {
        if self.out.is_empty() {
            self.breaks = 0;
        } else if self.breaks > 0 {
            let trimmed = self.out.trim_end_matches([' ', '\t']).len();
            self.out.truncate(trimmed);
            for _ in 0..self.breaks {
                self.out.push('\n');
            }
            self.breaks = 0;
        } else if self.space && !self.out.ends_with([' ', '\n']) {
            self.out.push(' ');
        }
        self.space = false;
    }

    fn line_break(&mut self, count: usize) {
        self.breaks = self.breaks.max(count);
    }

    fn apply(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
        match name {
            "br" => {
                // Two <br> in a row are a paragraph break.
                if self.breaks >= 1 {
                    self.line_break(2);
                } else {
                    self.line_break(1);
                }
                return;
            }
            "li" if !tag.closing => {
                self.line_break(1);
                self.flush();
                self.out.push_str("- ");
                return;
            }
            "td" | "th" if !tag.closing => {
                self.space = true;
                return;
            }
            "pre" if tag.closing => self.preformatted = self.preformatted.saturating_sub(1),
            "pre" => self.preformatted += 1,
            _ => {}
        }
        if PARAGRAPHS.contains(&name) {
            self.line_break(2);
            if let Some(level) = heading_level(name)
                && !tag.closing
            {
                self.flush();
                self.out.push_str(&"#".repeat(level));
                self.out.push(' ');
            }
        } else if BLOCKS.contains(&name) || name == "li" {
            self.line_break(1);
        }
    }

    fn finish(self) -> String {
        self.out.trim_end().to_owned()
    }
}

fn heading_level(name: &str) -> Option<usize> {
    let digit = name.strip_prefix('h')?;
    match digit {
        "1" | "2" | "3" | "4" | "5" | "6" => digit.parse().ok(),
        _ => None,
    }
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Decodes numeric character references and the common named entities;
/// anything else is left as written.
pub fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // Entity names are short; a `;` further away is not ours.
        let window = &rest.as_bytes()[1..rest.len().min(12)];
        let decoded = window
            .iter()
            .position(|&byte| byte == b';')
            .and_then(|semicolon| Some((decode_entity(&rest[1..=semicolon])?, semicolon)));
        match decoded {
            Some((c, semicolon)) => {
                out.push(c);
                rest = &rest[semicolon + 2..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The character for an entity body (between `&` and `;`).
fn decode_entity(body: &str) -> Option<char> {
    if let Some(number) = body.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return Some(match char::from_u32(code) {
            Some('\0') | None => char::REPLACEMENT_CHARACTER,
            Some(c) => c,
        });
    }
    Some(match body {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{a0}',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "bull" => '•',
        "middot" => '·',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "deg" => '°',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "sect" => '§',
        "times" => '×',
        "divide" => '÷',
        "plusmn" => '±',
        "minus" => '−',
        "larr" => '←',
        "rarr" => '→',
        "eacute" => 'é',
        "egrave" => 'è',
        "aacute" => 'á',
        "agrave" => 'à',
        "ouml" => 'ö',
        "auml" => 'ä',
        "uuml" => 'ü',
        "szlig" => 'ß',
        "ccedil" => 'ç',
        "ntilde" => 'ñ',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(html: &str) -> String {
        reduce(html).text
    }

    #[test]
    fn drops_head_scripts_styles_and_navigation() {
        let page = reduce(
            "<!DOCTYPE html><html><head><title> The &amp; Page </title>\
             <style>body { color: red }</style><script>var a = '<p>no</p>';</script></head>\
             <body><nav><a href=/>Home</a> <a href=/x>X</a></nav>\
             <!-- a <p>comment</p> --><p>Hello <b>world</b>!</p>\
             <SCRIPT type=\"text/javascript\">if (a < b) {}</SCRIPT><p>Bye</p></body></html>",
        );
        assert_eq!(page.title.as_deref(), Some("The & Page"));
        assert_eq!(page.text, "Hello world!\n\nBye");
    }

    #[test]
    fn blocks_become_lines_and_headings_get_marks() {
        let html = "<h1>Title</h1><div>one</div><div>two<br>three<br><br>four</div>\
                    <ul><li>apples</li><li> pears </li></ul><h3>Sub</h3>\
                    <table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>";
        assert_eq!(
            text(html),
            "# Title\n\none\ntwo\nthree\n\nfour\n- apples\n- pears\n\n### Sub\n\na b\n1 2"
        );
    }

    #[test]
    fn collapses_whitespace_but_keeps_pre() {
        assert_eq!(
            text("<p>  lots   of\n\n  space  </p>\n\n\n<p>next</p>"),
            "lots of space\n\nnext"
        );
        assert_eq!(
            text("<p>code:</p><pre>fn main() {\n    run();\n}</pre><p>after</p>"),
            "code:\n\nfn main() {\n    run();\n}\n\nafter"
        );
    }

    #[test]
    fn decodes_entities() {
        assert_eq!(
            decode_entities(
                "a &lt;b&gt; &amp;amp; &#169; &#x1F600; &eacute;&nbsp;x &bogus; & lone"
            ),
            "a <b> &amp; © 😀 é\u{a0}x &bogus; & lone"
        );
        assert_eq!(
            decode_entities("&#0; &#xZZ; &#99999999;"),
            "\u{fffd} &#xZZ; \u{fffd}"
        );
        assert_eq!(text("<p>&nbsp;&nbsp;x&nbsp;&nbsp;y</p>"), "x y");
    }

    #[test]
    fn survives_malformed_markup() {
        assert_eq!(text("a < b and c > d"), "a < b and c > d");
        assert_eq!(text("<p title='a>b'>quoted</p>"), "quoted");
        assert_eq!(
            text("<nav>never closed <p>body</p>"),
            "never closed\n\nbody"
        );
        assert_eq!(text("<p>before<script>unterminated"), "before");
        assert_eq!(text("text <!-- unterminated comment"), "text");
        assert_eq!(text("<p>cut <b"), "cut");
        assert_eq!(text(""), "");
        assert_eq!(reduce("<title></title>x").title, None);
        assert_eq!(text("</p></div>only closers"), "only closers");
    }

    #[test]
    fn title_needs_a_real_title_tag() {
        assert_eq!(reduce("<titles>x</titles>").title, None);
        assert_eq!(
            reduce("<TITLE lang=en>Caps</TITLE>").title.as_deref(),
            Some("Caps")
        );
    }
}
