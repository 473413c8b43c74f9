"""Real work run bare and boxed through each entry point, compared (issue 41)."""
