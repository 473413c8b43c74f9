"""``harness-sandbox serve``: one session for a harness in any language, over JSON lines.

:mod:`.wire` reads and writes the lines (the limits, the error codes), :mod:`.params`
checks each method's parameters, :mod:`.methods` does what each method asks of the
session (through the same functions as ``audit``, ``run`` and ``hook``), and
:mod:`.server` dispatches requests, runs them on threads and ends the session.
``schema.json`` beside them is the JSON Schema of every message (docs/serve.md).
"""

from pathlib import Path

# The JSON Schema of every message (docs/serve.md); `harness-sandbox serve --schema`
# prints it.
SCHEMA_PATH = Path(__file__).resolve().with_name("schema.json")
