"""What a hook's or a boxed command's environment loses: the tables, and their rules.

:mod:`sandbox.policy.startenv` applies them to a session's environment, on the host or in the
box.

Provider keys never reach a hook or a boxed command. A host hook in a session with a
sandbox also loses every PATH entry the agent could plant a program in, and every loader
variable (PYTHONPATH, LD_PRELOAD, NODE_OPTIONS, ...: the table at the end) is pruned or
dropped by the same rule; pathguard decides which entries those are, this module only
applies its answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Literal

from pathguard.records import NamedTuple

if TYPE_CHECKING:
    from pathguard.guard import Guard

# Removed from every hook's and every boxed command's environment, together with any name
# ending in _API_KEY. One list, here; tests cover each entry.
PROVIDER_KEYS: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "VERTEX_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "COHERE_API_KEY",
    "CO_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "PERPLEXITY_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
)

_PROVIDER_KEY_SET = frozenset(PROVIDER_KEYS)
_API_KEY_SUFFIX = "_API_KEY"

# Passed through to host hooks untouched, so a notification hook reaches the desktop.
# Nothing removes them; the names are listed so the rule is visible and tested.
DESKTOP_VARS: tuple[str, ...] = (
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
)


def is_provider_key(name: str) -> bool:
    """True for a name that must never reach a hook or a boxed command."""
    return name in _PROVIDER_KEY_SET or name.endswith(_API_KEY_SUFFIX)


def scrub(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without provider keys (the list above and any ``*_API_KEY``)."""
    return {k: v for k, v in env.items() if not is_provider_key(k)}


def drop_names(env: Mapping[str, str], patterns: Sequence[str]) -> dict[str, str]:
    """``env`` without the names ``[sandbox] scrub`` lists (``*`` and ``?`` patterns)."""
    if not patterns:
        return dict(env)
    return {k: v for k, v in env.items() if not any(fnmatchcase(k, p) for p in patterns)}


# -- loader variables: what a host hook's interpreters load code from -------------------
#
# A host hook in a sandboxed session must not load the agent's code through its
# environment any more than through PATH. Each row names a variable (or, ending in
# ``*``, every variable with that prefix), its form, and what loads code through it.
#
# - "list": a ``:``-separated list of folders, pruned exactly as PATH is (empty,
#   relative, untraceable and writable-folder entries go; nothing left, the variable
#   goes);
# - "path": one file or folder code is taken from: the variable goes when it lies in a
#   writable folder, cannot be traced, or is relative (taken from wherever the program
#   runs, and a host hook may go to the project first: ``cd "$(jq -r .cwd)"``);
# - "code": names code to run or a place code is taken from, as a path, a list or an
#   option string: every path-like word in it is checked (``--require=/p/x.js``,
#   ``-I/p/lib``, ``-javaagent:/p/a.jar``), and the variable goes when one lies in a
#   writable folder or cannot be traced.
#
# With no sandbox nothing changes, as for PATH: the agent's commands write anywhere.

LoaderForm = Literal["list", "path", "code"]


class LoaderVar(NamedTuple):
    name: str
    form: LoaderForm
    loads: str


LOADER_VARS: tuple[LoaderVar, ...] = (
    LoaderVar("PYTHONPATH", "list", "Python modules, before the standard library"),
    LoaderVar("PERL5LIB", "list", "Perl modules"),
    LoaderVar("PERLLIB", "list", "Perl modules"),
    LoaderVar("RUBYLIB", "list", "Ruby libraries"),
    LoaderVar("NODE_PATH", "list", "Node modules"),
    LoaderVar("LD_LIBRARY_PATH", "list", "shared libraries of every dynamic program"),
    LoaderVar("GCONV_PATH", "list", "glibc character-set modules (iconv)"),
    LoaderVar("GEM_PATH", "list", "Ruby gems"),
    LoaderVar("CLASSPATH", "list", "Java classes"),
    LoaderVar("ERL_LIBS", "list", "Erlang applications"),
    LoaderVar("GUILE_LOAD_PATH", "list", "Guile modules"),
    LoaderVar("R_LIBS", "list", "R packages"),
    LoaderVar("R_LIBS_USER", "list", "R packages"),
    LoaderVar("XDG_CONFIG_DIRS", "list", "configs that name programs (git, ...)"),
    LoaderVar("XDG_CONFIG_HOME", "path", "the user's configs, which name programs (git)"),
    LoaderVar("LD_PRELOAD", "code", "shared libraries loaded into every dynamic program"),
    LoaderVar("LD_AUDIT", "code", "the dynamic linker's audit libraries"),
    LoaderVar("BASH_ENV", "path", "a file bash runs before any script"),
    LoaderVar("ENV", "path", "a file sh runs at start"),
    LoaderVar("ZDOTDIR", "path", "the folder zsh reads .zshenv from, scripts too"),
    LoaderVar("PROMPT_COMMAND", "code", "a command interactive bash runs"),
    LoaderVar("BASH_FUNC_*", "code", "exported bash functions"),
    LoaderVar("PYTHONSTARTUP", "path", "a file interactive Python runs"),
    LoaderVar("PYTHONHOME", "path", "the standard library Python loads"),
    LoaderVar("PYTHONUSERBASE", "path", "user site-packages and their .pth files"),
    LoaderVar("PYTHONPYCACHEPREFIX", "path", "compiled modules Python loads"),
    LoaderVar("VIRTUAL_ENV", "path", "the interpreter uv and other tools run"),
    LoaderVar("PERL5OPT", "code", "options (-M, -I) on every perl"),
    LoaderVar("PERL5DB", "code", "the Perl debugger's code"),
    LoaderVar("RUBYOPT", "code", "options (-r, -I) on every ruby"),
    LoaderVar("GEM_HOME", "path", "where gems are installed and loaded from"),
    LoaderVar("BUNDLE_GEMFILE", "path", "a Gemfile, which is Ruby code"),
    LoaderVar("NODE_OPTIONS", "code", "options (--require, --import) on every node"),
    LoaderVar("JAVA_TOOL_OPTIONS", "code", "options (-javaagent) on every JVM"),
    LoaderVar("_JAVA_OPTIONS", "code", "options (-javaagent) on every JVM"),
    LoaderVar("JDK_JAVA_OPTIONS", "code", "options (-javaagent) on the java launcher"),
    LoaderVar("GIT_EXEC_PATH", "path", "git's own sub-commands"),
    LoaderVar("GIT_TEMPLATE_DIR", "path", "hooks copied into new repositories"),
    LoaderVar("GIT_CONFIG", "path", "a git config file (core.fsmonitor, hooksPath, ...)"),
    LoaderVar("GIT_CONFIG_GLOBAL", "path", "git's global config file"),
    LoaderVar("GIT_CONFIG_SYSTEM", "path", "git's system config file"),
    LoaderVar("GIT_CONFIG_*", "code", "git config values that name programs"),
    LoaderVar("GIT_SSH", "code", "the program git runs for ssh"),
    LoaderVar("GIT_SSH_COMMAND", "code", "the command git runs for ssh"),
    LoaderVar("GIT_ASKPASS", "code", "the program git runs for a password"),
    LoaderVar("SSH_ASKPASS", "code", "the program ssh runs for a password"),
    LoaderVar("GIT_EDITOR", "code", "the editor git runs"),
    LoaderVar("GIT_PAGER", "code", "the pager git runs"),
    LoaderVar("GIT_EXTERNAL_DIFF", "code", "the diff program git runs"),
    LoaderVar("EDITOR", "code", "the editor tools run"),
    LoaderVar("VISUAL", "code", "the editor tools run"),
    LoaderVar("PAGER", "code", "the pager tools run"),
    LoaderVar("SHELL", "code", "the shell tools start"),
    LoaderVar("LUA_PATH", "code", "Lua modules (templates)"),
    LoaderVar("LUA_CPATH", "code", "Lua C modules (templates)"),
    LoaderVar("LUA_INIT", "code", "Lua code (or @file) run at start"),
    LoaderVar("TCLLIBPATH", "code", "Tcl packages"),
    LoaderVar("R_PROFILE_USER", "path", "R code run at start"),
    LoaderVar("PHPRC", "path", "php.ini (auto_prepend_file)"),
    LoaderVar("PHP_INI_SCAN_DIR", "code", "more php.ini files"),
    LoaderVar("DOTNET_STARTUP_HOOKS", "code", ".NET assemblies run at start"),
    LoaderVar("GOFLAGS", "code", "go flags (-toolexec names a program)"),
    LoaderVar("RUSTC_WRAPPER", "code", "a program cargo runs around rustc"),
    LoaderVar("CARGO_HOME", "path", "cargo's config, which names programs"),
    LoaderVar("NPM_CONFIG_USERCONFIG", "path", "npm's config (script-shell, node-options)"),
    LoaderVar("NPM_CONFIG_GLOBALCONFIG", "path", "npm's global config"),
    LoaderVar("NPM_CONFIG_SCRIPT_SHELL", "code", "the shell npm runs scripts with"),
    LoaderVar("NPM_CONFIG_NODE_OPTIONS", "code", "options on the node npm starts"),
    LoaderVar("KUBECONFIG", "list", "kubectl configs (exec credential plugins)"),
    LoaderVar("DOCKER_CONFIG", "path", "docker's config (credential helpers)"),
    LoaderVar("AWS_CONFIG_FILE", "path", "AWS config (credential_process)"),
)

_EXACT = {v.name: v for v in LOADER_VARS if not v.name.endswith("*")}
_PREFIXES = tuple(v for v in LOADER_VARS if v.name.endswith("*"))
# Where one path-like word ends inside an option string or a list.
_WORD_BREAK = re.compile(r"[\s:;,=\"']+")
# git reads GIT_CONFIG_KEY_<n>/GIT_CONFIG_VALUE_<n> up to GIT_CONFIG_COUNT: half a set
# makes git stop, so a dropped member takes the whole set with it.
_GIT_CONFIG_SET = re.compile(r"GIT_CONFIG_(COUNT|KEY_\d+|VALUE_\d+)")


def loader_var(name: str) -> LoaderVar | None:
    """The table's row for ``name``, or None. npm reads ``npm_config_*`` in any case, so
    those rows match as npm does."""
    row = _EXACT.get(name)
    if row is None and name.upper().startswith("NPM_CONFIG_"):
        row = _EXACT.get(name.upper())
    if row is not None:
        return row
    for p in _PREFIXES:
        if name.startswith(p.name[:-1]):
            return p
    return None


def path_words(value: str) -> list[str]:
    """The words of ``value`` that may name a path: split at blanks, quotes and
    ``: ; , =``, a short option's letter dropped (``-I/x`` gives ``/x``), and only
    those with a ``/`` kept (relative ones are taken from ``/``, where host hooks run)."""
    out: list[str] = []
    for word in _WORD_BREAK.split(value):
        if word.startswith("--"):
            continue  # the value, if any, is the next word (split at "=")
        if word.startswith("-"):
            word = word[2:]
        if "/" in word:
            out.append(word)
    return out


def _names_writable(value: str, guard: Guard) -> bool:
    for word in path_words(value):
        verdict = guard.check(word.lstrip("@"), "/", check_hidden=False)
        if not verdict.ok:
            return True
    return False


# Options of code-form variables whose value is a file or module to load: given a name
# that is not absolute, the program finds it from its working folder -- the project, for
# a host hook that changes there as the seed tells it to -- or from a module path.
_LOAD_OPTIONS = ("-I", "-r", "--require", "--import", "--loader", "--experimental-loader",
                 "-javaagent", "-agentpath")
_LOAD_ATTACHED = ("-I", "-r", "-javaagent:", "-agentpath:")


def _untraceable(value: str) -> bool:
    """A code-form value that names code by a relative word: ``--require ./.pnp.cjs``,
    ``--require=./x.js``, ``-Ilib``, ``@args`` (a relative argument file). Where that
    leads depends on the folder the program starts in, so it cannot be checked."""
    words = [w for w in re.split(r"[\s\"']+", value) if w]
    for i, word in enumerate(words):
        opt, eq, val = word.partition("=")
        if opt in _LOAD_OPTIONS and not eq:
            val = words[i + 1] if i + 1 < len(words) else ""
        elif not eq and not word.startswith("--"):
            opt = next((o for o in _LOAD_ATTACHED if word.startswith(o) and word != o), "")
            val = word[len(opt):] if opt else ""
        if opt.rstrip(":") in _LOAD_OPTIONS and val and not val.lstrip("@").startswith("/"):
            return True
        bare = word.lstrip("@")
        if word.startswith("@") and not bare.startswith("/"):
            return True
        if "/" in word and not word.startswith(("/", "-", "@/")) and "=" not in word:
            return True  # a relative path: ./x, lib/x
    return False


def prune_loaders(env: Mapping[str, str], guard: Guard) -> dict[str, str]:
    """``env`` with every loader variable pruned (lists) or dropped (code) as the table
    says, judged by ``guard`` (the host hooks' guard)."""
    from pathguard.argv import prune_path

    out = dict(env)
    dropped_git_set = False
    for name, value in env.items():
        row = loader_var(name)
        if row is None:
            continue
        if row.form == "list":
            pruned = prune_path(value, guard)
            if pruned is None:
                del out[name]
            else:
                out[name] = pruned
        elif (row.form == "path" and not value.startswith("/")) or \
                (row.form == "code" and _untraceable(value)) or \
                _names_writable(value, guard):
            del out[name]
            dropped_git_set = dropped_git_set or bool(_GIT_CONFIG_SET.fullmatch(name))
    if dropped_git_set:
        for name in [n for n in out if _GIT_CONFIG_SET.fullmatch(n)]:
            del out[name]
    return out
