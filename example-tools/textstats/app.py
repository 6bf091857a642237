"""textstats: numbers about a text or a CSV table, for a model that should
not count by eye.

Tools:
- ``text_stats``: words, sentences, paragraphs, characters, reading time and
  the most frequent words; compares with the previous text of the session.
- ``csv_summary``: per-column type, missing values, distinct values and, for
  numeric columns, min/max/mean/median/standard deviation.

Built with componentize-py (see README.md). Standard-library modules must be
imported here, at the top: only modules imported while building are inside
the component.
"""

import csv
import io
import re
import statistics
from collections import Counter
from typing import Annotated

from wasm_agent_tool import Output, ToolError, Toolkit, host, tool

#: Session-state key of the previous text's numbers.
LAST_KEY = "last_text"

WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")
SENTENCE_END = re.compile(r"[.!?\u2026]+(?=\s|$)|\n\s*\n")

STOPWORDS = frozenset("""
a about after all also am an and any are as at be because been before being
but by can could did do does doing down during each few for from had has have
having he her here hers him his how i if in into is it its itself just me
more most my no nor not now of off on once only or other our ours out over
own same she should so some such than that the their them then there these
they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours
""".split())


def _plural(count, word):
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _reading_time(minutes):
    if minutes < 1:
        return "under a minute"
    whole = round(minutes)
    return f"about {whole} minute{'' if whole == 1 else 's'}"


@tool(read_only=True)
def text_stats(
    text: Annotated[str, "The text to measure (plain text or Markdown)."],
    top: Annotated[int, "How many of the most frequent words to list (0 for none).",
                   {"minimum": 0, "maximum": 100}] = 10,
    include_stopwords: Annotated[bool, "Count words like 'the' and 'of' among the most frequent."] = False,
    words_per_minute: Annotated[int, "Reading speed for the reading-time estimate.",
                                {"minimum": 1}] = 230,
) -> Output:
    """Measure a text: words, sentences, paragraphs, characters, average word
    and sentence length, estimated reading time and the most frequent words.
    Use it instead of counting yourself. Also says how the text differs in
    length from the previous one measured in this session."""
    words = WORD.findall(text)
    lowered = [word.lower() for word in words]
    sentences = [s for s in SENTENCE_END.split(text) if WORD.search(s)]
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    counts = Counter(w for w in lowered if include_stopwords or w not in STOPWORDS)
    minutes = len(words) / words_per_minute

    stats = {
        "words": len(words),
        "unique_words": len(set(lowered)),
        "sentences": len(sentences),
        "paragraphs": len(paragraphs),
        "characters": len(text),
        "characters_without_spaces": sum(1 for c in text if not c.isspace()),
        "average_word_length": round(sum(map(len, words)) / len(words), 2) if words else 0,
        "average_sentence_words": round(len(words) / len(sentences), 1) if sentences else 0,
        "reading_minutes": round(minutes, 2),
        "top_words": [[word, count] for word, count in counts.most_common(top)],
    }

    lines = [
        f"{_plural(stats['words'], 'word')} ({stats['unique_words']:,} distinct), "
        f"{_plural(stats['sentences'], 'sentence')}, "
        f"{_plural(stats['paragraphs'], 'paragraph')}, "
        f"{_plural(stats['characters'], 'character')} "
        f"({stats['characters_without_spaces']:,} without spaces).",
        f"Average word length {stats['average_word_length']} characters; "
        f"average sentence {stats['average_sentence_words']} words.",
        f"Reading time: {_reading_time(minutes)} at {words_per_minute} words per minute.",
    ]
    if stats["top_words"]:
        listed = ", ".join(f"{word} ({count})" for word, count in stats["top_words"])
        lines.append(f"Most frequent words: {listed}.")

    previous = host.state.get(LAST_KEY)
    if isinstance(previous, dict) and "words" in previous:
        change = stats["words"] - previous["words"]
        direction = "more" if change >= 0 else "fewer"
        lines.append(f"Compared with the previous text in this session: "
                     f"{_plural(abs(change), 'word')} {direction} "
                     f"({previous['words']:,} before).")
    host.state.set(LAST_KEY, {key: stats[key] for key in ("words", "sentences", "characters")})
    host.debug(f"measured {stats['words']} words")

    return Output("\n".join(lines)).with_json("text-stats", stats)


def _number(cell):
    """The cell as a float if it reads as a number (1,234.5 and 12% included)."""
    text = cell.strip().replace(",", "").rstrip("%")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _format(value):
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.4g}" if abs(value) >= 1e6 or abs(value) < 1e-3 else f"{value:,.4f}".rstrip("0")


def _column_summary(name, cells):
    present = [cell for cell in cells if cell.strip()]
    numbers = [number for number in map(_number, present) if number is not None]
    summary = {"name": name, "values": len(present), "missing": len(cells) - len(present),
               "distinct": len(set(present))}
    # A stray "n/a" or typo should not hide the numbers of a numeric column.
    if numbers and len(numbers) >= 0.8 * len(present):
        summary["type"] = "number"
        summary["non_numeric"] = len(present) - len(numbers)
        summary["min"] = min(numbers)
        summary["max"] = max(numbers)
        summary["mean"] = statistics.fmean(numbers)
        summary["median"] = statistics.median(numbers)
        summary["stdev"] = statistics.stdev(numbers) if len(numbers) > 1 else 0.0
        summary["sum"] = sum(numbers)
    else:
        summary["type"] = "text" if present else "empty"
        summary["most_common"] = [[value, count] for value, count in
                                  Counter(present).most_common(3)]
    return summary


def _describe_column(column):
    head = (f"- {column['name'] or '(unnamed)'}: {column['type']}, {column['values']:,} values"
            f", {column['missing']:,} missing, {column['distinct']:,} distinct")
    if column["type"] == "number":
        if column["non_numeric"]:
            head += f" ({column['non_numeric']:,} not numbers, ignored)"
        return (f"{head}; min {_format(column['min'])}, max {_format(column['max'])}, "
                f"mean {_format(column['mean'])}, median {_format(column['median'])}, "
                f"stdev {_format(column['stdev'])}, sum {_format(column['sum'])}")
    if column["type"] == "text":
        common = ", ".join(f"{value!r} ({count})" for value, count in column["most_common"])
        return f"{head}; most common: {common}"
    return head


@tool(read_only=True, idempotent=True)
def csv_summary(
    csv_text: Annotated[str, "The table as CSV (or TSV / semicolon-separated) text."],
    delimiter: Annotated[str | None, "The field separator (one character); detected when "
                         "omitted.", {"minLength": 1, "maxLength": 1}] = None,
    has_header: Annotated[bool, "Whether the first row names the columns."] = True,
) -> Output:
    """Summarise a CSV table column by column: type (number or text), how many
    values are present, missing and distinct, and for numeric columns min,
    max, mean, median, standard deviation and sum; for text columns the most
    common values. Use it to understand a table before answering about it."""
    if not csv_text.strip():
        raise ToolError("the CSV text is empty")
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(csv_text[:4096], delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    try:
        rows = [row for row in csv.reader(io.StringIO(csv_text), delimiter=delimiter) if row]
    except csv.Error as error:
        raise ToolError(f"cannot parse the CSV: {error}") from None

    width = max(len(row) for row in rows)
    header = rows.pop(0) if has_header else []
    header = header + [f"column_{index + 1}" for index in range(len(header), width)]
    columns = [_column_summary(header[index], [row[index] if index < len(row) else ""
                                                 for row in rows])
               for index in range(width)]
    ragged = sum(1 for row in rows if len(row) != width)

    lines = [f"{_plural(len(rows), 'row')} x {_plural(width, 'column')} "
             f"(delimiter {delimiter!r})."]
    if ragged:
        lines.append(f"{_plural(ragged, 'row')} have fewer fields than the widest row.")
    lines.extend(_describe_column(column) for column in columns)
    host.debug(f"summarised {_plural(len(rows), 'row')}, {_plural(width, 'column')}")
    summary = {"rows": len(rows), "columns": columns, "delimiter": delimiter}
    return Output("\n".join(lines)).with_json("csv-summary", summary)


Tool = Toolkit.export()
