"""``harness-sandbox serve``: the JSON-lines session, from Python and from the Node.js example."""
