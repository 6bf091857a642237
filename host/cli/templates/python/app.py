"""{{name}}: a wasm-agent tool in Python.

Each tool is a decorated function: its type hints and defaults become the
JSON Schema the model sees, its docstring the description. Return a str or
an Output; raise ToolError for a failure the model should read. Only modules
imported here, at build time, are inside the component.
"""

import re
from collections import Counter

from wasm_agent_tool import Output, ToolError, Toolkit, host, tool

WORD = re.compile(r"[^\W_]+")


@tool(read_only=True, idempotent=True)
def word_stats(text: str, top: int = 3) -> Output:
    """Count the words of a text and name the most frequent ones.

    Args:
        text: The text to count.
        top: How many of the most frequent words to name.
    """
    if top < 1:
        raise ToolError("top must be at least 1")
    words = [w.lower() for w in WORD.findall(text)]
    common = Counter(words).most_common(top)
    host.info(f"counted {len(words)} words")
    listing = ", ".join(f"{word} ({count})" for word, count in common) or "none"
    return Output(f"{len(words)} words; most frequent: {listing}").with_json(
        "stats", {"words": len(words), "top": dict(common)}
    )


Tool = Toolkit.export()
