"""What each command's ``--help`` ends with: its exit statuses and one example, as
docs/cli.md gives them."""

from __future__ import annotations

# Usage errors of ``run`` and ``hook`` (an unknown option, a missing command or event
# field): 125, the toolkit's own failure, which a harness cannot take for the command's
# status (``run``) or for a hook's answer (``hook``).
EXIT_USAGE = 125

EPILOGS: dict[str, str] = {
    "audit": """exit: 0 every hook may run; 1 one or more refused (or an openHarness file
not trusted); 2 the config could not be loaded.

example:
  harness-sandbox audit --project ~/proj --json""",
    "banner": """exit: 0; 2 the config could not be loaded.

example:
  harness-sandbox banner --project ~/proj""",
    "run": """exit: the command's status; 124 timed out; 125 the box could not be built, the
config or a path it names is unusable, or the options are wrong (a usage error); 126
not executable; 127 not found; 128+N killed by signal N; 130 cancelled (Ctrl-C).

example:
  harness-sandbox run --project ~/proj --timeout 600 -- make test""",
    "hook": """EVENT: PreToolUse or UserPromptSubmit; with --openharness, one of its 17 events
(such as preToolUse).

exit: 0 not blocked; 1 blocked or interrupted; 2 the config cannot be loaded, the box
cannot be built, or a hook file lies where the agent could change it; 125 the options
are wrong (a usage error).

example:
  harness-sandbox hook PreToolUse --tool bash --input '{"command": "git push -f"}' --json""",
    "trust": """exit: 0 done; 1 --revoke of a file that was not trusted; 2 the file, the config
or the store cannot be used.

example:
  harness-sandbox trust --openharness ~/proj/.oh/config.yaml""",
    "doctor": """exit: 0 the box works here; 1 it does not.

example:
  harness-sandbox doctor --json""",
    "import": """exit: 0 converted; 1 --write refused; 2 a file cannot be read, or there is
nothing to import.

example:
  harness-sandbox import claude --project ~/proj""",
    "serve": """exit: 0 when the session has ended cleanly, whatever ended it (close, stdin's
end, stdout's reader gone, SIGTERM or SIGHUP, the parent's exit).

example:
  harness-sandbox serve --project ~/proj --no-hooks   (then JSON lines: docs/serve.md)""",
}
