#!/bin/sh
# PreToolUse hook, meant to run on the host (sandbox = false): say that a tool is called.
# A desktop notification where notify-send works; otherwise a line appended to
# $HARNESS_SANDBOX_NOTIFY_LOG, else ~/.local/state/harness-sandbox/notify.log.
# When HARNESS_SANDBOX_NOTIFY_LOG is set the line is always written there, so a script
# can read what was notified.
#
# A host hook runs from / and, in a session with a sandbox, with a PATH that lost every
# folder the agent can write; it may have no PATH at all. The system folders are safe.
: "${PATH:=/usr/bin:/bin}"
export PATH

input=$(cat)
field() {
  printf '%s' "$input" | sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p"
}
event=$(field hook_event_name)
tool=$(field tool_name)
cwd=$(field cwd)
what=${tool:-${event:-a hook event}}
message="harness: $what in ${cwd:-?}"

notified=no
if command -v notify-send >/dev/null 2>&1 &&
  notify-send --app-name=harness "harness" "$what in ${cwd:-?}" 2>/dev/null; then
  notified=yes
fi

if [ -n "${HARNESS_SANDBOX_NOTIFY_LOG:-}" ]; then
  log=$HARNESS_SANDBOX_NOTIFY_LOG
elif [ "$notified" = yes ]; then
  exit 0
elif [ -n "${HOME:-}" ]; then
  log=$HOME/.local/state/harness-sandbox/notify.log
else
  echo "notify: no desktop notifications and no HOME for the log" >&2
  exit 1
fi

mkdir -p "$(dirname "$log")" || exit 1
printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$message" >>"$log" || exit 1
exit 0
