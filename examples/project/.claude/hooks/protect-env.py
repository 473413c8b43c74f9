#!/usr/bin/env python3
"""PreToolUse (Edit|Write): no edits to .env files. Written for Claude Code, with its
tool and field names, which the porting lint points out."""
import json
import sys

data = json.load(sys.stdin)
if data.get("tool_name") in ("Edit", "MultiEdit", "Write"):
    path = data.get("tool_input", {}).get("file_path", "")
    if path.endswith(".env"):
        print("Blocked: .env files hold secrets", file=sys.stderr)
        sys.exit(2)
sys.exit(0)
