#!/bin/sh
# PreToolUse hook: refuse a force-push.
# The call arrives as one line of JSON on stdin. Exit 2 blocks the call and stderr is the
# reason the model reads; exit 0 is no objection.
#
# This matches the raw JSON as text: enough for a guardrail, easy to route around
# (git push origin +main, a script that pushes). Hooks are not a security boundary.
input=$(cat)
case "$input" in
  *"git push"*"--force"* | *"git push"*" -f"*)
    echo "force-push is not allowed here" >&2
    exit 2
    ;;
esac
exit 0
