# Shared set-up for scripts/demo, scripts/test and scripts/bench: install what is
# missing, then make sure .venv holds the package. Sourced, not run.
set -euo pipefail

HS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HS_VENV="$HS_ROOT/.venv"
# HS_USE_VENV=DIR: use that prepared environment and install nothing (the test suite
# runs the demo this way, from whichever environment runs the tests).
if [ -n "${HS_USE_VENV:-}" ]; then HS_VENV=$HS_USE_VENV; fi

hs_say() { printf 'setup: %s\n' "$*" >&2; }

# System packages: bubblewrap (the Linux box), libseccomp2 (the box's system-call filter,
# loaded by pyseccomp), libcap-dev, gcc and the Python headers (python-prctl compiles
# against them), the static C library and the kernel's headers (the box per run's
# launcher, sandbox/linux/warm/guardinit.c, is built with them), python3-venv, git (the tests
# commit in a box), jq, util-linux's nsenter, curl and openssl (the network tests), and
# docker.io (the tests in containers).
hs_system_packages() {
    [ "$(uname -s)" = Linux ] || return 0
    local missing=()
    command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
    { /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null; } | grep -q 'libseccomp\.so\.2' ||
        missing+=(libseccomp2)
    [ -e /usr/include/sys/capability.h ] || missing+=(libcap-dev)
    command -v gcc >/dev/null 2>&1 || missing+=(gcc)
    [ -e /usr/include/linux/seccomp.h ] || missing+=(linux-libc-dev)
    compgen -G '/usr/lib/*/libc.a' >/dev/null || [ -e /usr/lib/libc.a ] ||
        [ -e /usr/lib64/libc.a ] || missing+=(libc6-dev)
    command -v git >/dev/null 2>&1 || missing+=(git)
    # nsenter: a box started by root (and a box with many binds) starts through it.
    [ -x /usr/bin/nsenter ] || [ -x /bin/nsenter ] || missing+=(util-linux)
    # curl and openssl: the network tests' clients in the box, and their TLS origin's
    # certificate.
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    # jq: the Claude Code example hooks (examples/project/.claude) and their tests use it.
    command -v jq >/dev/null 2>&1 || missing+=(jq)
    # node: the example harness on `serve` (examples/node-harness) and its test use it.
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    # npm: the Node.js client (clients/node) is packed and its typescript installed.
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    # dockerd and docker: the tests of the box inside containers start a private
    # engine of their own (tests/helpers/docker_engine.py). Only root's pass runs it, so
    # it is installed where this can install, and not asked of anyone else.
    if ! [ -x /usr/sbin/dockerd ] && ! [ -x /usr/bin/dockerd ] &&
        { [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }; }; then
        missing+=(docker.io)
    fi
    if [ -x /usr/bin/python3 ]; then
        # Debian and Ubuntu keep ensurepip (which venv needs) in python3-venv.
        if command -v dpkg-query >/dev/null 2>&1; then
            dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'ok installed' ||
                missing+=(python3-venv)
        else
            /usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
        fi
        local inc
        inc=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
        [ -e "$inc/Python.h" ] || missing+=(python3-dev)
    else
        missing+=(python3 python3-venv python3-dev)
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        hs_say "missing: ${missing[*]}; install them with your package manager and run this again."
        return 1
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            hs_say "missing: ${missing[*]}; run: sudo apt-get install ${missing[*]}"
            return 1
        fi
    fi
    hs_say "installing ${missing[*]} with apt-get"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The system interpreter, not a per-user build: the unprivileged test run must reach it.
hs_python() {
    if [ -x /usr/bin/python3 ]; then echo /usr/bin/python3; else command -v python3; fi
}

# hs_venv DIR SRC: a virtual environment in DIR with the package from SRC installed
# (editable, with the test and dev extras). Re-installs when pyproject.toml changes.
hs_venv() {
    local dir=$1 src=$2 stamp
    # Bump the suffix when the way the venv is built changes. The launcher is copied
    # into the venv at install: a changed one is installed again.
    stamp="$(cksum < "$src/pyproject.toml") $(cksum < "$src/bin/harness-sandbox") v2"
    if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.hs-stamp" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    hs_say "preparing $dir"
    rm -rf "$dir"
    local log
    log=$(mktemp)
    # compat: a plain path entry rather than an import hook, which costs every start
    # of the CLI several milliseconds.
    if ! { "$(hs_python)" -m venv "$dir" &&
           "$dir/bin/python" -m pip install --disable-pip-version-check --upgrade \
               pip setuptools wheel &&
           "$dir/bin/python" -m pip install --disable-pip-version-check \
               --config-settings editable_mode=compat -e "$src[test,dev]"; } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        hs_say "could not prepare $dir (the pip output is above)"
        return 1
    fi
    rm -f "$log"
    echo "$stamp" > "$dir/.hs-stamp"
}

# Byte-compile the package, so that a first start (and every start where
# PYTHONDONTWRITEBYTECODE is set) does not compile it from source.
hs_compile() {
    "$1/bin/python" -m compileall -q "$2/sandbox" "$2/pathguard" "$2/launchers" >/dev/null
}

# The Node.js client's devDependencies (typescript, for its type tests), from its lock.
hs_node_client() {
    local dir="$HS_ROOT/clients/node"
    [ -e "$dir/node_modules/typescript/bin/tsc" ] && return 0
    command -v npm >/dev/null 2>&1 || return 0
    hs_say "installing clients/node's devDependencies (npm ci)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
}

hs_setup() {
    [ -n "${HS_USE_VENV:-}" ] && return 0
    hs_system_packages
    hs_venv "$HS_VENV" "$HS_ROOT"
    hs_compile "$HS_VENV" "$HS_ROOT"
    hs_node_client
}
