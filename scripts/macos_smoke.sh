#!/usr/bin/env bash
# Real tools through the real CLI in the macOS box, as a user would run them; one line
# per check ("ok - ..." / "not ok - ..."), exit 1 if any failed. macOS only: run by
# .github/workflows/macos.yml. The tree lives under /private/tmp, which the box may not
# write, so a failed defence shows up as a file where there should be none.
set -u

if [ "$(uname -s)" != "Darwin" ]; then
    echo "macos_smoke: this is $(uname -s), not macOS; nothing to do" >&2
    exit 2
fi

HS=${HS:-$(command -v harness-sandbox)}
PY=${PY:-$(command -v python3)}
base=$(cd "$(mktemp -d /private/tmp/hs-smoke.XXXXXX)" && pwd -P)
trap 'rm -rf "$base"' EXIT
failed=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; failed=1; }
check() { # check "what" command...
    local what=$1; shift
    if "$@" >"$base/out" 2>"$base/err"; then ok "$what"; else
        bad "$what"; sed 's/^/    /' "$base/out" "$base/err"; fi
}
refused() { # refused "what" command...: must fail
    local what=$1; shift
    if "$@" >"$base/out" 2>"$base/err"; then bad "$what (it was allowed)"; else ok "$what"; fi
}

project=$base/project
mkdir -p "$project" "$base/home/harness" "$base/secret" "$base/run"
echo "the-secret" >"$base/secret/key"
git init -q "$project"
cat >"$project/.git/hooks/pre-commit" <<EOF
#!/bin/sh
# A hook-driven tool: python over the staged names, a temp file.
"$PY" -c 'import subprocess, tempfile
names = subprocess.run(["git", "diff", "--cached", "--name-only"], capture_output=True,
                       text=True, check=True).stdout.split()
tempfile.NamedTemporaryFile(delete=False).write(b"x")
open("hook-ran.txt", "w").write(" ".join(names))'
EOF
chmod +x "$project/.git/hooks/pre-commit"

# A host service on a Unix socket, as docker.sock or an ssh-agent: one not allowed, one
# allowed. Each answers "hello" and notes every connection in a file.
serve() { # serve SOCKET LOG
    "$PY" - "$1" "$2" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("connected\n")
    c.sendall(b"hello\n")
    c.close()
EOF
}
serve "$base/run/shut.sock" "$base/shut.log"; shut_pid=$!
serve "$base/run/open.sock" "$base/open.log"; open_pid=$!
trap 'kill $shut_pid $open_pid 2>/dev/null; rm -rf "$base"' EXIT
sleep 1

cat >"$base/home/harness/config.toml" <<EOF
[sandbox]
hidden = ["$base/secret"]
network = true
allow_unix_sockets = ["$base/run/open.sock"]
EOF
export HARNESS_HOME=$base/home/harness
box() { "$HS" run --project "$project" -- "$@" </dev/null; }
connect='import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(6).decode(), end="")'

check "git add and commit in the box, the project's hook-driven tool runs" \
    box /bin/sh -c 'echo hi > a.txt && git add a.txt &&
        git -c user.name=t -c user.email=t@example.com commit -qm smoke'
check "  the hook ran and the commit is there" \
    /bin/sh -c "test \"\$(cat '$project/hook-ran.txt')\" = a.txt &&
        test \"\$(git -C '$project' log --format=%s)\" = smoke"
check "git init, add, commit of a new repository in the box" \
    box /bin/sh -c 'git init -q fresh && cd fresh && echo x > f && git add f &&
        git -c user.name=t -c user.email=t@example.com commit -qm one'
check "python3 -c" box "$PY" -c 'import json, ssl, sqlite3; print("py")'
check "a pseudo-terminal (script)" box /usr/bin/script -q /dev/null /bin/echo pty
check "a pseudo-terminal (pty.openpty)" box "$PY" -c \
    'import os, pty, termios; m, s = pty.openpty(); termios.tcgetattr(s); os.write(s, b"x")'
if command -v node >/dev/null; then
    check "node -e, os.networkInterfaces()" box "$(command -v node)" -e \
        'const os = require("os"); if (!Object.keys(os.networkInterfaces()).length) process.exit(1)'
else
    echo "ok - node -e # SKIP node is not installed here"
fi
refused "a write to a hidden folder is refused" box /bin/sh -c "echo x > '$base/secret/new'"
check "  and nothing was written" test ! -e "$base/secret/new"
refused "a read of a hidden folder is refused" box /bin/cat "$base/secret/key"
refused "a host Unix socket not allowed stays shut with the network on" \
    box "$PY" -c "$connect" "$base/run/shut.sock"
check "  and the service saw no connection" test ! -e "$base/shut.log"
check "an allowed Unix socket is reached with the network on" \
    box "$PY" -c "$connect" "$base/run/open.sock"
check "  and the service saw it" test -s "$base/open.log"
check "SSH_AUTH_SOCK naming a shut socket does not reach the box" /bin/sh -c \
    "SSH_AUTH_SOCK='$base/run/shut.sock' '$HS' run --project '$project' -- /usr/bin/env </dev/null |
        (! grep -q SSH_AUTH_SOCK)"
refused "creating .git/HOOKS/pre-commit is refused" \
    box /bin/sh -c 'echo "touch PWNED" > .git/HOOKS/pre-commit'
git -C "$project" -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m host \
    >/dev/null 2>&1
check "  and host git runs no planted hook" test ! -e "$project/PWNED"
refused "a write to /tmp is refused (the decision: TMPDIR is the box's own)" \
    box /bin/sh -c "echo x > /private/tmp/hs-smoke-escape-$$"
check "  and nothing was written" test ! -e "/private/tmp/hs-smoke-escape-$$"
check "a write to \$TMPDIR works" box /bin/sh -c 'echo x > "$TMPDIR/t" && test -s "$TMPDIR/t"'
/usr/bin/sandbox-exec -p "(version 1)(allow default)" "$HS" run --project "$project" -- \
    /usr/bin/true </dev/null >"$base/out" 2>"$base/err"
if [ $? -eq 125 ] && grep -q "already runs inside a macOS sandbox" "$base/err"; then
    ok "a harness already inside Seatbelt refuses to start (exit 125)"
else
    bad "a harness already inside Seatbelt refuses to start (exit 125)"; cat "$base/err"
fi

exit $failed
