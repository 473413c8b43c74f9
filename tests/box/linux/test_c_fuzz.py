"""The compiled launcher's parsers, fed a few thousand random and mutated inputs: they
never crash, and they refuse what is malformed (issue 39).

What the host sends the C programs in ``sandbox/linux/warm/`` is parsed in a few places: a
message's length-prefixed fields (``unpack``), the warm box's setup (``setup``), a
run's request (``order_head``, ``order_words``), the box per run's command line and
its filter in hex (``parse``, ``decode``); and what they send back is framed by
``send_words``. A test-only driver, built here, includes the sources and runs each
parser on cases read from its stdin, one line of outcome per case; built with
AddressSanitizer and UndefinedBehaviorSanitizer where the compiler has them, so an
overread, an overflow or a leak ends it. Each outcome is compared with a model of
the parser written here from the host's side (``sandbox/linux/warm/inbox.py``'s ``pack``).
The cases are made from a fixed seed: the same every run.

Then the real launcher, built as initcache builds it, is given malformed setups and
command lines, and each is refused with its message and status.
"""

from __future__ import annotations

import os
import random
import re
import socket
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sandbox.linux import initcache
from sandbox.linux.warm.inbox import pack

pytestmark = pytest.mark.skipif(initcache.compiler() is None, reason="needs a C compiler")

WARM = os.path.dirname(initcache.SOURCES[0])
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")

DRIVER = r"""
#define _GNU_SOURCE
#include <sys/resource.h>
/* setup() sets the box's process bound: here, nobody's. */
static int fuzz_setrlimit(int what, const struct rlimit *lim)
{
	(void)what, (void)lim;
	return 0;
}
#define setrlimit(what, lim) fuzz_setrlimit((int)(what), lim)
/* guardinit.c's main, by another name (a function-like macro: not the .main field). */
#define main(...) guardinit_main(__VA_ARGS__)
#include "guardinit.c"
#undef main
#include "warmstart.c"

static void op_unpack(const char *in, size_t len)
{
	struct message m;
	size_t i;

	if (unpack(in, len, &m) != 0)
		return (void)printf("refused\n");
	printf("ok %zu", m.n);
	for (i = 0; i < m.n; i++)
		printf(" %zu", m.f[i].n);
	printf("\n");
	free_message(&m);
}

static void op_setup(const char *in, size_t len)
{
	struct box b;
	struct message m;

	memset(&b, 0, sizeof b);
	if (unpack(in, len, &m) != 0 || setup(&b, &m) != 0)
		printf("refused\n");
	else
		printf("ok %d %d %d %d\n", b.prog.len, b.guard.len, b.sup.guard_len, b.own_network);
	free(b.read_only), free(b.nulled), free(b.roots), free(b.allowed);
	free(b.prog.filter), free(b.guard.filter), free(b.sup.guard);
	free_message(&m);
}

static void op_order(const char *in, size_t len)
{
	struct order o = { 0 };
	struct message m;
	int err = EINVAL;
	size_t e = 0;

	if (unpack(in, len, &m) == 0 && (err = order_head(&m, &o)) == 0)
		err = order_words(&m, &o);
	while (err == 0 && o.envp[e])
		e++;
	if (err != 0)
		printf("refused %d\n", err);
	else
		printf("ok %d %zu %ld\n", o.argc, e, o.path ? (long)strlen(o.path) : -1L);
	free_order(&o);
	free_message(&m);
}

/* The NUL-separated words of `in` (as Python's split), after argv[0]. */
static char **split(const char *in, size_t len, int *argc)
{
	size_t i, n = 2;
	char **argv, *copy = malloc(len + 1);

	memcpy(copy, in, len);
	copy[len] = '\0';
	for (i = 0; i < len; i++)
		n += in[i] == '\0';
	argv = calloc(n + 8, sizeof *argv); /* NULL after the words, 7 at least */
	argv[0] = "guardinit";
	argv[1] = copy;
	*argc = 2;
	for (i = 0; i < len; i++)
		if (copy[i] == '\0')
			argv[(*argc)++] = copy + i + 1;
	return argv;
}

static void op_argv(const char *in, size_t len)
{
	struct args a;
	struct sock_fprog prog = { 0, NULL };
	int argc;
	char **argv = split(in, len, &argc);

	if (parse(argc, argv, &a) != 0 || decode(a.program, &prog) != 0)
		printf("refused\n");
	else
		printf("ok %d %d\n", a.sup.guard_len, prog.len);
	free(prog.filter);
	free(argv[1]);
	free(argv);
}

static void op_words(const char *in, size_t len)
{
	char **w, *got = malloc(1 << 16);
	int argc, sv[2];
	ssize_t n;

	w = split(in, len, &argc);
	socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv);
	send_words(sv[0], -1, w[1], w[2], w[3], w[4], w[5], w[6], NULL);
	n = recv(sv[1], got, 1 << 16, 0);
	close(sv[0]), close(sv[1]);
	op_unpack(got, n < 0 ? 0 : (size_t)n);
	free(got), free(w[1]), free(w);
}

static void (*const ops[128])(const char *, size_t) = {
	['U'] = op_unpack, ['S'] = op_setup, ['R'] = op_order, ['G'] = op_argv, ['W'] = op_words,
};

int main(void)
{
	unsigned char head[5];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fread(head, 1, 5, stdin) == 5) {
		uint32_t len;
		char *in;

		memcpy(&len, head + 1, 4);
		in = malloc(len ? len : 1); /* exactly the case: a byte past it is an overread */
		if (fread(in, 1, len, stdin) != len)
			return 3;
		if (head[0] >= 128 || ops[head[0]] == NULL)
			return 3;
		ops[head[0]](in, len);
		free(in);
	}
	return 0;
}
"""


# -- the models: what each parser must answer ----------------------------------------


def unpack(data: bytes) -> list[bytes] | None:
    """inbox.py's unpack, refusing a length that runs past the end."""
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 4:
            return None
        (n,) = struct.unpack_from("=I", data, pos)
        pos += 4
        if n > len(data) - pos:
            return None
        out.append(data[pos:pos + n])
        pos += n
    return out


def unpacked(data: bytes) -> str:
    fields = unpack(data)
    return "refused" if fields is None else " ".join(
        ["ok", str(len(fields)), *(str(len(f)) for f in fields)])


def count(word: bytes, most: int) -> int:
    """guardcore.c's count: strtol's decimal, whole, within [0, most]; else -1."""
    if b"\0" in word or not re.fullmatch(rb"[ \t\n\v\f\r]*[+-]?[0-9]+", word):
        return -1
    n = int(word)
    return n if 0 <= n <= most else -1


def whole_program(data: bytes) -> bool:
    return len(data) % 8 == 0 and len(data) <= 4096 * 8


def setup(data: bytes) -> str:
    f = unpack(data)
    if (f is None or len(f) != 10 or f[0] != b"setup" or b"\0" in f[1] or b"\0" in f[5]
            or not whole_program(f[4]) or (f[6] and not whole_program(f[6]))):
        return "refused"
    paths = sum(1 for p in f[7].split(b"\0") + f[8].split(b"\0") if p) + 2
    return f"ok {len(f[4]) // 8} {len(f[6]) // 8} {paths if f[6] else 0} {int(f[9] == b'net')}"


def order(data: bytes) -> str:
    f = unpack(data)
    if f is None or len(f) < 4 or b"\0" in f[2] or (argc := count(f[3], len(f) - 4)) < 1:
        return "refused 22"
    if any(b"\0" in w for w in f[4:4 + argc]):
        return "refused 22"
    env = [e for e in f[4 + argc:] if b"\0" not in e and b"=" in e]
    paths = [e[5:] for e in env if e.startswith(b"PATH=")]
    return f"ok {argc} {len(env)} {len(paths[-1]) if paths else -1}"


def command_line(data: bytes) -> str:
    argv = [b"guardinit", *data.split(b"\0")]
    argc = len(argv)
    if argc < 7 or count(argv[1], 1 << 20) < 0:
        return "refused"
    n = count(argv[5], argc)
    if n < 0 or 6 + n >= argc:
        return "refused"
    m = count(argv[6 + n], argc)
    at = 7 + n + m
    if m < 0 or at + 1 >= argc or argv[at] != b"--":
        return "refused"
    hexed = argv[4]
    if (len(hexed) % 2 or not hexed or not whole_program(b"\0" * (len(hexed) // 2))
            or not re.fullmatch(rb"[0-9a-fA-F]+", hexed)):
        return "refused"
    return f"ok {2 + n + m} {len(hexed) // 16}"


def sent(data: bytes) -> str:
    """send_words' message: each word whole while there is room in its 4096 bytes, the
    last one that fits cut, none once fewer than its length's 4 bytes are left."""
    fields, used = [], 0
    for word in data.split(b"\0")[:6]:
        room = 4096 - used
        if room < 4:
            break
        fields.append(word[:room - 4])
        used += 4 + len(fields[-1])
    return unpacked(pack(fields))


MODELS: dict[str, Callable[[bytes], str]] = {
    "U": unpacked, "S": setup, "R": order, "G": command_line, "W": sent}


# -- the cases ------------------------------------------------------------------------


def word(rng: random.Random) -> bytes:
    return rng.choice([b"", b"0", b"1", b"2", b"3", b" 2", b"+1", b"-1", b"2x", b"=",
                       b"PATH=/bin", b"A=b", b"99999999999999999999", b"/proc/sys",
                       b"/tmp", b"net", b"--", b"a\0b",
                       bytes(rng.randrange(256) for _ in range(rng.randrange(12)))])


def valid(op: str, rng: random.Random) -> bytes:
    """A well-formed input for ``op``, as the host makes it."""
    paths = b"\0".join(rng.choice([b"/proc/sys", b"/proc/nope", b""]) for _ in range(3))
    prog = b"\x06\0\0\0\0\0\xff\x7f" * rng.randrange(4)
    if op == "S":
        return pack([b"setup", b"%d" % rng.randrange(1 << 30), paths, paths, prog,
                     b"0", prog, paths, paths, rng.choice([b"net", b""])])
    if op == "R":
        argv = [b"sh", b"-c", b"true"][:rng.randrange(1, 4)]
        return pack([b"run", rng.choice([b"tty", b""]), b"/tmp", b"%d" % len(argv), *argv,
                     b"PATH=/usr/bin", b"HOME=/tmp"])
    if op == "G":
        n, m = rng.randrange(3), rng.randrange(3)
        return b"\0".join([b"3", b"/usr/bin/python3", b"/guardmain.py",
                           (prog or b"\0" * 8).hex().encode(), b"%d" % n,
                           *[b"/r"] * n, b"%d" % m, *[b"/s"] * m, b"--", b"true"])
    if op == "W":
        return b"\0".join(b"w" * rng.choice([0, 1, 4, 100, 1000, 4088, 4089, 4092, 5000])
                          for _ in range(rng.randrange(1, 7)))
    return pack([word(rng) for _ in range(rng.randrange(6))])


def mutated(op: str, data: bytes, rng: random.Random) -> bytes:
    """``data`` with one fault: cut short, a byte changed, a length made wrong, a field
    added, lost or given a NUL, or random bytes instead."""
    fields = unpack(data) if op in "USR" else data.split(b"\0")
    kind = rng.randrange(7)
    if kind == 0 and data:
        return data[:rng.randrange(len(data))]
    if kind == 1 and data:
        at = rng.randrange(len(data))
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
    if kind == 2 and op in "USR" and len(data) >= 4:
        n = rng.choice([0, 1, 3, 7, 255, 1 << 16, (1 << 32) - 1, rng.randrange(1 << 32)])
        at = rng.randrange(0, len(data) - 3)
        return data[:at] + struct.pack("=I", n) + data[at + 4:]
    if kind == 6 or fields is None:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
    fields = list(fields)
    at = rng.randrange(len(fields) + 1)
    if kind == 3:
        fields.insert(at, word(rng))
    elif kind == 4 and fields:
        del fields[min(at, len(fields) - 1)]
    elif fields:
        i = min(at, len(fields) - 1)
        fields[i] = fields[i][:1] + b"\0" + fields[i][1:] if kind == 5 else word(rng)
    return pack(fields) if op in "USR" else b"\0".join(fields)


def cases(seed: int, each: int) -> Iterator[tuple[str, bytes]]:
    rng = random.Random(seed)
    for op in MODELS:
        for i in range(each):
            data = valid(op, rng)
            for _ in range(i % 4):  # a quarter whole, the rest with 1 to 3 faults
                data = mutated(op, data, rng)
            yield op, data


def compile_driver(cc: str, folder: Path) -> tuple[Path, dict[str, str]]:
    """The driver, sanitized where the compiler can; and the environment to run it."""
    (folder / "driver.c").write_text(DRIVER)
    (folder / "empty.c").write_text("int main(void) { return 0; }\n")
    probe = subprocess.run([cc, *SANITIZE, "-o", str(folder / "empty"),
                            str(folder / "empty.c")], capture_output=True, check=False)
    sanitize = SANITIZE if probe.returncode == 0 else ()
    env = {"PATH": "/usr/bin:/bin", "UBSAN_OPTIONS": "print_stacktrace=1"}
    if sanitize:
        # LeakSanitizer cannot run under a tracer: the leaks then go unchecked.
        leaks = subprocess.run([str(folder / "empty")], env={
            **env, "ASAN_OPTIONS": "detect_leaks=1"}, capture_output=True, check=False)
        env["ASAN_OPTIONS"] = f"detect_leaks={int(leaks.returncode == 0)}:abort_on_error=0"
    out = folder / "driver"
    r = subprocess.run([cc, "-g", "-O1", *sanitize, "-I", WARM, "-o", str(out),
                        str(folder / "driver.c"), os.path.join(WARM, "guardcore.c")],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    return out, env


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The launcher, built as initcache builds it."""
    cc, folder = initcache.compiler(), tmp_path_factory.mktemp("launcher")
    assert cc is not None
    why = initcache.build(cc, str(folder), str(folder / "guardinit"))
    assert why is None, why
    return str(folder / "guardinit")


# -- the tests ------------------------------------------------------------------------


def test_the_parsers_never_crash_and_answer_as_their_models_on_4000_inputs(
        tmp_path: Path) -> None:
    driver, env = compile_driver(initcache.compiler() or "cc", tmp_path)
    fed = list(cases(seed=39, each=800))
    stdin = b"".join(op.encode() + struct.pack("=I", len(d)) + d for op, d in fed)
    r = subprocess.run([driver], input=stdin, env=env, capture_output=True, timeout=60)
    lines = r.stdout.decode("latin-1").splitlines()
    at = len(lines)
    assert r.returncode == 0, (f"the driver ended ({r.returncode}) at case {at}: "
                               f"{repr(fed[at] if at < len(fed) else '')[:300]}\n"
                               f"{r.stderr.decode(errors='replace')[-4000:]}")
    assert len(lines) == len(fed)
    wrong = [(op, d, got, MODELS[op](d)) for (op, d), got in zip(fed, lines, strict=True)
             if got != MODELS[op](d)]
    assert not wrong, f"{len(wrong)} answers differ from the model's, first: {wrong[0]!r}"
    refused = sum(line.startswith("refused") for line in lines)
    assert 1000 < refused < len(lines) - 1000, "the cases are not half malformed"


SETUP = [b"setup", b"65536", b"", b"", b"\0" * 8, b"0", b"", b"", b"", b""]
UNREAD = "a message it could not read"


@pytest.mark.parametrize(("message", "reason"), [
    (b"\x01", UNREAD),
    (pack(SETUP)[:-3], UNREAD),
    (pack(SETUP) + b"\x09\0\0\0abc", UNREAD),
    (pack(SETUP[:9]), "Invalid argument"),
    (pack([*SETUP, b""]), "Invalid argument"),
    (pack([b"start", *SETUP[1:]]), "Invalid argument"),
    (pack([*SETUP[:4], b"\0" * 7, *SETUP[5:]]), "Invalid argument"),
    (pack([*SETUP[:4], b"\0" * 8 * 4097, *SETUP[5:]]), "Invalid argument"),
    (pack([*SETUP[:5], b"1\0", *SETUP[6:]]), "Invalid argument"),
], ids=["short", "truncated", "a length past the end", "nine fields", "eleven fields", "not a "
        "setup", "part of an instruction", "a filter too long", "a bound with a NUL"])
def test_a_malformed_setup_is_refused_by_the_warm_starter_with_its_message(
        launcher: str, message: bytes, reason: str) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    self_fd = os.open("/dev/null", os.O_RDONLY)
    try:
        ours.send(message)
        r = subprocess.run([launcher, "warm", str(self_fd), str(theirs.fileno()),
                            "/nonexistent/python3", "/nonexistent/guardmain.py"],
                           pass_fds=(self_fd, theirs.fileno()), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30, check=False)
    finally:
        ours.close()
        theirs.close()
        os.close(self_fd)
    assert (r.returncode, r.stderr) == (2, "harness-sandbox: the warm box's starter could "
                                        f"not start: its setup from the host: {reason}\n")


@pytest.mark.parametrize("words", [
    [],
    ["3", "py", "main", "00" * 8, "0", "0", "--"],
    ["3", "py", "main", "00" * 8, "5", "/r", "0", "--", "true"],
    ["3", "py", "main", "00" * 8, "0", "0", "true"],
    ["x", "py", "main", "00" * 8, "0", "0", "--", "true"],
    ["3", "py", "main", "0" * 15, "0", "0", "--", "true"],
    ["3", "py", "main", "zz" * 8, "0", "0", "--", "true"],
    ["3", "py", "main", "00" * 7, "0", "0", "--", "true"],
    ["3", "py", "main", "", "0", "0", "--", "true"],
], ids=["no words", "no command", "more roots than words", "no --", "no descriptor", "odd hex",
        "not hex", "part of an instruction", "no filter"])
def test_a_malformed_command_line_is_refused_by_the_launcher_with_its_usage(
        launcher: str, words: list[str]) -> None:
    r = subprocess.run([launcher, *words], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=30, check=False)
    assert (r.returncode, r.stderr) == (125, "usage: guardinit FD PYTHON GUARDMAIN PROGRAM "
                                        "N ROOT... M SOCKET... -- CMD [ARG...]\n")
