#!/usr/bin/env bash
# PreToolUse (Bash): block recursive deletes of / and ~. Reads the call as JSON on stdin.
cmd=$(jq -r '.tool_input.command // empty')
if echo "$cmd" | grep -qE 'rm -(rf|fr) +(/|~)( |$)'; then
  echo "Blocked: recursive delete of / or ~" >&2
  exit 2
fi
exit 0
