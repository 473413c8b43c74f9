/*
 * guardinit - the launcher of a box per run: its command started under the
 * Unix-socket guard.
 *
 * SYNOPSIS
 *     guardinit FD PYTHON GUARDMAIN PROGRAM N ROOT... M SOCKET... -- CMD [ARG...]
 *     guardinit warm FD SOCK PYTHON GUARDMAIN
 *
 *     The second form is the warm box's starter (warmstart.c); what follows is the
 *     first. The guard's parts both use are in guardcore.c.
 *
 * DESCRIPTION
 *     bwrap starts this as the box's command (under the session's filter, which
 *     bwrap loads), as the box's PID 1 (--as-pid-1), from a sealed memfd of the
 *     session's (FD, executed as /proc/self/fd/FD and closed here first: the
 *     command never sees it). It keeps the contract of the Python launcher,
 *     sandbox/linux/warm/guarded.py, and costs a box far less than an interpreter's
 *     start:
 *
 *     - It is not dumpable (the command can neither trace it nor take its
 *       descriptors), the reaper of every orphan of the run, and no_new_privs.
 *     - It forks the command. The child drops every capability (effective,
 *       permitted, inheritable, bounding, ambient), loads the guard's filter
 *       (PROGRAM, a BPF program in hex compiled on the host) with
 *       SECCOMP_FILTER_FLAG_NEW_LISTENER, lets this process take the listener,
 *       and executes CMD as execvp(3) does (a bare name looked up on the
 *       command's PATH, a file without #! run by /bin/sh), with SIGPIPE and
 *       SIGXFSZ at their defaults and the environment bwrap gave.
 *     - This process keeps CAP_SYS_PTRACE and nothing else: with it the guard
 *       takes the socket of a caller that made itself not dumpable (ssh does).
 *     - It exits as the command did (a signal N as 128+N, as bwrap says it).
 *       Its end ends the box: the kernel kills every process of a PID
 *       namespace whose first process is gone, so no daemon outlives the run.
 *
 *     A command that cannot be executed is said as bwrap says it ("bwrap:
 *     execvp CMD: REASON", status 1); a guard that cannot be armed is said on
 *     one line, status 125, and the command is not started.
 *
 *     Once the guard is armed, just before the command is executed (or its
 *     start refused at the box's process bound), one byte is written to the
 *     descriptor HARNESS_SANDBOX_STARTED_FD names, which is then closed and the
 *     variable taken out of the command's environment: the host's sign that the
 *     box was built (sandbox/linux/started.py). A run that ends without it
 *     is the box's failure, whatever bwrap printed.
 *
 * THE GUARD'S CALLS
 *     connect(2), sendto(2) with an address, sendmsg(2) and sendmmsg(2) of the
 *     command (and of everything it starts), bind(2) in a box on the host's
 *     network, and flock(2) and fcntl(2)'s lock commands (judged by the file
 *     locked: sandbox/linux/warm/guardlocks.py), wait until this process answers.
 *     Nothing here lets a call go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE is never
 *     used): this fast path refuses, or makes one call itself on its own copy of
 *     the caller's socket, which is judged by that copy alone. It answers, with
 *     no interpreter:
 *
 *     - a call of another ABI, or one the filter should not have stopped:
 *       EACCES, as the supervisor answers it;
 *     - connect(2) on a Unix socket to a pathname that cannot be opened where
 *       the caller would find it (O_PATH, in its root or working folder): the
 *       open's error, ENOENT for a socket that is not there. That is most
 *       programs' one call: glibc asks nscd's socket at every user lookup
 *       (ls -l, id, git), and the box has no nscd;
 *     - connect(2) on a non-blocking TCP socket (AF_INET, AF_INET6, read from
 *       the copy taken with pidfd_getfd, so no other thread can swap it): the
 *       address copied, the connect made on the copy, its result answered
 *       (EINPROGRESS included). A blocking one would hold this loop: it goes to
 *       the supervisor. Once the supervisor could not start, every call is
 *       refused here, these too.
 *
 *     Every other call (an address that exists, an abstract address, another
 *     family's, a send) needs the supervisor's judgement, or a call made for
 *     the caller: at the first of them this process becomes the supervisor,
 *     sandbox/linux/warm/guardmain.py, by executing PYTHON with the listener, the
 *     command's pid, that notification (read, not answered) and the roots and
 *     sockets (N ROOT... M SOCKET...: the box's writable folders and the
 *     allowed sockets). From then on it answers everything. It is still PID 1:
 *     outside the guard's filter, not to be signalled from inside the box,
 *     ending the box when it ends. It keeps CAP_SYS_PTRACE through the exec as
 *     an ambient capability, and makes itself not dumpable again first thing
 *     (an exec makes a process dumpable; until then the capability it holds,
 *     which the command does not, keeps the command from tracing it). Where it
 *     cannot be started, every call that needed it is refused (EACCES): never
 *     through unchecked.
 *
 * Plain C and the C library only, linked statically by the system's compiler
 * (sandbox/linux/initcache.py): no dynamic linker runs in this process, so what the
 * environment bwrap gave names for one (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH:
 * the command's, chosen by whoever starts the run) is loaded into the command alone,
 * never into the guard. The supervisor is started with no environment at all.
 */

#include "guard.h"

/* The parsed command line. */
struct args {
	int self;                  /* FD: this program's own descriptor */
	const char *program;       /* the guard's filter, in hex */
	struct supervisor sup;     /* PYTHON, GUARDMAIN, N ROOT... M SOCKET... */
	char **command;            /* CMD [ARG...] */
	int started;               /* HARNESS_SANDBOX_STARTED_FD's pipe, or -1 */
	int tty;                   /* HARNESS_SANDBOX_TTY: stdin is the run's terminal */
};

/* The host's pipe that learns the box reached its command (sandbox/backends/
 * started.py): its number taken out of the environment, so the command never
 * sees it. -1 when the host gave none. */
static int started_fd(void)
{
	const char *v = getenv("HARNESS_SANDBOX_STARTED_FD");
	long fd = v == NULL ? -1 : count(v, 1 << 20);

	unsetenv("HARNESS_SANDBOX_STARTED_FD");
	return fd < 0 ? -1 : (int)fd;
}

/* The box is built and the guard armed: tell the host, once, and close it. */
static void tell_started(int fd)
{
	static const char one = 1;

	if (fd < 0)
		return;
	while (write(fd, &one, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

static void arming_failed(const char *what, int err)
{
	say("harness-sandbox: the Unix-socket guard could not be armed: ", what, ": ",
	    strerror(err));
}

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The guard's filter from its hex; 0, or -1 when it is no whole program. */
static int decode(const char *hex, struct sock_fprog *prog)
{
	size_t len = strlen(hex), size = len / 2, i;
	autofree unsigned char *bytes = NULL;

	if (len % 2 || size == 0 || size % sizeof(struct sock_filter) ||
	    size > PROGRAM_MAX * sizeof(struct sock_filter))
		return -1;
	bytes = malloc(size);
	if (bytes == NULL)
		return -1;
	for (i = 0; i < size; i++) {
		int hi = hexdigit(hex[2 * i]), lo = hexdigit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		bytes[i] = (unsigned char)(hi << 4 | lo);
	}
	prog->len = (unsigned short)(size / sizeof(struct sock_filter));
	prog->filter = steal_pointer(&bytes);
	return 0;
}

static void exec_failed(const char *command, int err)
{
	say("bwrap: execvp ", command, ": ", strerror(err));
}

static int parse(int argc, char **argv, struct args *a)
{
	long n, m, at;

	if (argc < 7)
		return -1;
	a->self = (int)count(argv[1], 1 << 20);
	a->sup.python = argv[2];
	a->sup.main = argv[3];
	a->program = argv[4];
	n = count(argv[5], argc);
	if (a->self < 0 || n < 0 || 6 + n >= argc)
		return -1;
	m = count(argv[6 + n], argc);
	at = 7 + n + m;
	if (m < 0 || at + 1 >= argc || strcmp(argv[at], "--") != 0)
		return -1;
	a->sup.guard = argv + 5;
	a->sup.guard_len = (int)(2 + n + m);
	a->sup.chan = -1;
	a->command = argv + at + 1;
	return 0;
}

/* The command's side of the fork: armed (arm_command), then executed with
 * nothing of this process's but what execvp keeps. */
static void child(const struct args *a, const struct sock_fprog *prog, int sock,
		  const sigset_t *mask)
{
	const char *what;

	if (arm_command(prog, sock, &what) != 0) {
		if (what != NULL)
			arming_failed(what, errno);
		_exit(EXIT_ARMING);
	}
	sigprocmask(SIG_SETMASK, mask, NULL);
	tell_started(a->started);
	/* A run that asked for a terminal: the pty the host made for it (stdin, stdout
	 * and stderr) is the controlling terminal of a session the command leads
	 * (sandbox/process/pty.py). */
	if (a->tty && (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) != 0)) {
		exec_failed(a->command[0], errno);
		_exit(EXIT_EXEC);
	}
	execvp(a->command[0], a->command);
	exec_failed(a->command[0], errno);
	_exit(EXIT_EXEC);
}

/* This process made the box's init: 0, or -1 said. */
static int init_self(void)
{
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 ||
	    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		say("bwrap: the Unix-socket guard could not be set up", "", "", "");
		return -1;
	}
	return 0;
}

/* The command forked and its listener taken: 0, or the exit code to end with. */
static int start(struct state *s, const struct args *a, const struct sock_fprog *prog)
{
	int sv[2], status;

	sigemptyset(&s->chld);
	sigaddset(&s->chld, SIGCHLD);
	/* Blocked before the fork: a child's end is never missed. */
	if (sigprocmask(SIG_BLOCK, &s->chld, &s->mask) != 0 ||
	    (s->signals = signalfd(-1, &s->chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		arming_failed("its descriptors", errno);
		return EXIT_ARMING;
	}
	s->child = fork();
	if (s->child < 0) {
		/* No process at the box's process bound: the command's start refused
		 * (the box itself was built). */
		int err = errno;

		tell_started(a->started);
		exec_failed(a->command[0], err);
		return EXIT_EXEC;
	}
	if (s->child == 0)
		child(a, prog, sv[1], &s->mask);
	close(sv[1]);
	if (a->started >= 0)
		close(a->started); /* the command's side tells */
	s->ptrace = keep_only(CAP_SYS_PTRACE);
	if (s->ptrace < 0) {
		arming_failed("narrowing its capabilities", errno);
		return EXIT_ARMING;
	}
	s->listener = take_listener(s->child, sv[0]);
	if (s->listener < 0 && errno != 0) {
		arming_failed("taking its listener", errno);
		return EXIT_ARMING;
	}
	close(sv[0]);
	if (s->listener < 0) {
		/* The child ended before it was armed, and said why. */
		while (waitpid(s->child, &status, 0) < 0 && errno == EINTR)
			;
		return exit_code(status);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct args a;
	struct sock_fprog prog;
	struct state s = { .sup = &a.sup, .listener = -1, .signals = -1 };
	int code;

	if (argc > 1 && strcmp(argv[1], "warm") == 0)
		return warm_main(argc, argv); /* the warm box's starter: warmstart.c */
	if (parse(argc, argv, &a) != 0 || decode(a.program, &prog) != 0) {
		say("usage: guardinit FD PYTHON GUARDMAIN PROGRAM N ROOT... M SOCKET... ",
		    "-- CMD [ARG...]", "", "");
		return EXIT_ARMING;
	}
	close(a.self);
	a.started = started_fd();
	a.tty = getenv("HARNESS_SANDBOX_TTY") != NULL;
	unsetenv("HARNESS_SANDBOX_TTY");
	if (init_self() != 0)
		return EXIT_EXEC;
	code = start(&s, &a, &prog);
	if (code != 0 || s.listener < 0)
		return code;
	return supervise(&s);
}
