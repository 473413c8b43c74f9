/*
 * guardinit - the launcher of a box per run: its command started under the
 * Unix-socket guard.
 *
 * SYNOPSIS
 *     guardinit FD PYTHON GUARDMAIN PROGRAM N ROOT... M SOCKET... -- CMD [ARG...]
 *
 * DESCRIPTION
 *     bwrap starts this as the box's command (under the session's filter, which
 *     bwrap loads), as the box's PID 1 (--as-pid-1), from a sealed memfd of the
 *     session's (FD, executed as /proc/self/fd/FD and closed here first: the
 *     command never sees it). It keeps the contract of the Python launcher,
 *     sandbox/warm/guarded.py, and costs a box far less than an interpreter's
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
 * THE GUARD'S CALLS
 *     connect(2), sendto(2) with an address, sendmsg(2) and sendmmsg(2) of the
 *     command (and of everything it starts), and bind(2) in a box on the host's
 *     network, wait until this process answers.
 *     Nothing here lets a call go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE is never
 *     used): this fast path only refuses, so a wrong judgement here can stop a
 *     call but never let one through. It answers, with no interpreter:
 *
 *     - a call of another ABI, or one the filter should not have stopped:
 *       EACCES, as the supervisor answers it;
 *     - connect(2) on a Unix socket to a pathname that cannot be opened where
 *       the caller would find it (O_PATH, in its root or working folder): the
 *       open's error, ENOENT for a socket that is not there. That is most
 *       programs' one call: glibc asks nscd's socket at every user lookup
 *       (ls -l, id, git), and the box has no nscd.
 *
 *     Every other call (an address that exists, an abstract address, another
 *     family's, a send) needs the supervisor's judgement, or a call made for
 *     the caller: at the first of them this process becomes the supervisor,
 *     sandbox/warm/guardmain.py, by executing PYTHON with the listener, the
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
 * (sandbox/initcache.py): no dynamic linker runs in this process, so what the
 * environment bwrap gave names for one (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH:
 * the command's, chosen by whoever starts the run) is loaded into the command alone,
 * never into the guard. The supervisor is started with no environment at all.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GUARD_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GUARD_ARCH AUDIT_ARCH_AARCH64
#else
#error "the Unix-socket guard knows x86-64 and arm64 only"
#endif

/* Newer than some C libraries' headers. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
/* Before Linux 5.9 the number had its direction wrong; later kernels take both. */
#define NOTIF_ID_VALID_OLD 0x80082102UL

/* The kernel takes at most 4096 instructions. */
#define PROGRAM_MAX 4096

/* What an exec failure and an unarmed guard exit with. */
#define EXIT_EXEC 1
#define EXIT_ARMING 125

/* The parsed command line. */
struct args {
	int self;                  /* FD: this program's own descriptor */
	const char *python;        /* the interpreter of the supervisor */
	const char *main;          /* its entry, guardmain.py */
	const char *program;       /* the guard's filter, in hex */
	char **guard;              /* N ROOT... M SOCKET..., for the supervisor */
	int guard_len;
	char **command;            /* CMD [ARG...] */
};

/* The supervising side's state. */
struct state {
	const struct args *args;
	pid_t child;               /* the command */
	int listener;              /* the guard's listener, or -1 once it has hung up */
	int signals;               /* a signalfd of SIGCHLD */
	sigset_t mask;             /* the signal mask bwrap gave, for each exec */
	sigset_t chld;             /* SIGCHLD alone, blocked here */
	int ptrace;                /* CAP_SYS_PTRACE kept (to hand the supervisor) */
	int refusing;              /* the supervisor could not start: refuse */
};

/* Say one line on stderr. Write(2) alone: no buffer to flush before an exec. */
static void say(const char *a, const char *b, const char *c, const char *d)
{
	char line[4096];
	int n = snprintf(line, sizeof line, "%s%s%s%s\n", a, b, c, d);

	if (n > (int)sizeof line - 1)
		n = (int)sizeof line - 1, line[n - 1] = '\n';
	if (n > 0 && write(2, line, (size_t)n) < 0)
		return; /* nowhere else to say it */
}

static void exec_failed(const char *command, int err)
{
	say("bwrap: execvp ", command, ": ", strerror(err));
}

static void arming_failed(const char *what, int err)
{
	say("harness-sandbox: the Unix-socket guard could not be armed: ", what, ": ",
	    strerror(err));
}

/* A count in decimal, within [0, max]; -1 for anything else. */
static long count(const char *s, long max)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (errno || end == s || *end || n < 0 || n > max)
		return -1;
	return n;
}

static int parse(int argc, char **argv, struct args *a)
{
	long n, m, at;

	if (argc < 7)
		return -1;
	a->self = (int)count(argv[1], 1 << 20);
	a->python = argv[2];
	a->main = argv[3];
	a->program = argv[4];
	n = count(argv[5], argc);
	if (a->self < 0 || n < 0 || 6 + n >= argc)
		return -1;
	m = count(argv[6 + n], argc);
	at = 7 + n + m;
	if (m < 0 || at + 1 >= argc || strcmp(argv[at], "--") != 0)
		return -1;
	a->guard = argv + 5;
	a->guard_len = (int)(2 + n + m);
	a->command = argv + at + 1;
	return 0;
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
	unsigned char *bytes;

	if (len % 2 || size == 0 || size % sizeof(struct sock_filter) ||
	    size > PROGRAM_MAX * sizeof(struct sock_filter))
		return -1;
	bytes = malloc(size);
	if (bytes == NULL)
		return -1;
	for (i = 0; i < size; i++) {
		int hi = hexdigit(hex[2 * i]), lo = hexdigit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(bytes);
			return -1;
		}
		bytes[i] = (unsigned char)(hi << 4 | lo);
	}
	prog->len = (unsigned short)(size / sizeof(struct sock_filter));
	prog->filter = (struct sock_filter *)bytes;
	return 0;
}

/*
 * Every capability gone from this thread but `keep` (-1: none), when held. The
 * bounding set first, while CAP_SETPCAP (which dropping from it needs) is still
 * held; then the ambient set; then the others at once. A kept capability is
 * made ambient too, so that it survives an exec (the supervisor's).
 */
static int keep_only(int keep)
{
	struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	uint32_t kept;
	int cap;

	if (syscall(SYS_capget, &head, data) != 0)
		return -1;
	kept = keep < 0 ? 0 : data[0].permitted & (1U << keep);
	if (data[0].effective & (1U << CAP_SETPCAP)) {
		for (cap = 0; cap < 64; cap++) {
			if (cap == keep)
				continue;
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
				if (errno == EINVAL)
					break; /* past the kernel's last capability */
				return -1;
			}
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
		return -1;
	memset(data, 0, sizeof data);
	data[0].effective = data[0].permitted = data[0].inheritable = kept;
	if (syscall(SYS_capset, &head, data) != 0)
		return -1;
	if (kept && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, keep, 0, 0) != 0)
		return -1;
	return kept != 0;
}

/* The guard's filter loaded in this thread; its listener's descriptor. */
static int load(const struct sock_fprog *prog)
{
	int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			      SECCOMP_FILTER_FLAG_NEW_LISTENER |
			      SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, prog);

	/*
	 * Before Linux 5.19 a caller's wait could not be made killable only (a
	 * signal then restarts a call the supervisor may already have made).
	 */
	if (fd < 0 && errno == EINVAL)
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				  SECCOMP_FILTER_FLAG_NEW_LISTENER, prog);
	return fd;
}

/*
 * The command's side of the fork: nothing of this process's but what execvp
 * keeps. The listener cannot be sent to the parent (SCM_RIGHTS is a sendmsg(2),
 * which the filter just loaded stops until someone listens): its number is
 * written instead, and the parent takes the descriptor itself (pidfd_getfd);
 * the child waits for that before it executes (the listener is close-on-exec:
 * it must have another holder by then).
 */
static void child(const struct args *a, const struct sock_fprog *prog, int sock,
		  const sigset_t *mask)
{
	int listener;
	char ack;

	signal(SIGPIPE, SIG_DFL);
	signal(SIGXFSZ, SIG_DFL);
	if (keep_only(-1) < 0) {
		arming_failed("dropping the command's capabilities", errno);
		_exit(EXIT_ARMING);
	}
	listener = load(prog);
	if (listener < 0) {
		arming_failed("the guard's filter", errno);
		_exit(EXIT_ARMING);
	}
	if (write(sock, &listener, sizeof listener) != sizeof listener ||
	    read(sock, &ack, 1) != 1)
		_exit(EXIT_ARMING); /* the parent has said why */
	close(listener);
	close(sock);
	sigprocmask(SIG_SETMASK, mask, NULL);
	execvp(a->command[0], a->command);
	exec_failed(a->command[0], errno);
	_exit(EXIT_EXEC);
}

/* The child's listener, taken from it; -1 (errno 0 when the child is gone first). */
static int take_listener(pid_t pid, int sock)
{
	int number, pidfd, fd;
	ssize_t got = read(sock, &number, sizeof number);

	if (got != sizeof number) {
		errno = got < 0 ? errno : 0;
		return -1;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, number, 0);
	close(pidfd);
	if (fd < 0 || write(sock, "", 1) != 1)
		return -1;
	return fd;
}

/* What a wait status says, as bwrap and a shell say it. */
static int exit_code(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* Reap whatever has ended; 1 with *code set when the command has. */
static int reap(struct state *s, int *code)
{
	struct signalfd_siginfo info;
	int status;
	pid_t pid;

	while (read(s->signals, &info, sizeof info) == sizeof info)
		; /* drained: waitpid below finds every child that ended */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == s->child) {
			*code = exit_code(status);
			return 1;
		}
	}
	return 0;
}

/* -- the fast path ------------------------------------------------------------ */

static void answer(int listener, uint64_t id, int err)
{
	struct seccomp_notif_resp resp = { .id = id, .val = 0, .error = -err };

	/* A caller gone meanwhile (killed) is no error of ours. */
	ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

/* The caller is still waiting in that call (so its pid is still its own). */
static int valid(int listener, uint64_t id)
{
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0)
		return 1;
	if (errno != ENOTTY && errno != EINVAL)
		return 0;
	return ioctl(listener, NOTIF_ID_VALID_OLD, &id) == 0;
}

static int guarded_call(int nr)
{
	return nr == SYS_connect || nr == SYS_sendto || nr == SYS_sendmsg ||
	       nr == SYS_sendmmsg || nr == SYS_bind;
}

/* The caller's socket's family; -1 when it cannot be had. */
static int domain_of(pid_t pid, int number)
{
	int pidfd, sock, domain = -1;
	socklen_t size = sizeof domain;

	pidfd = (int)syscall(SYS_pidfd_open, pid, PIDFD_THREAD);
	if (pidfd < 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	sock = (int)syscall(SYS_pidfd_getfd, pidfd, number, 0);
	close(pidfd);
	if (sock < 0)
		return -1;
	if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &size) != 0)
		domain = -1;
	close(sock);
	return domain;
}

/*
 * The error of opening `path` (O_PATH, following links as connect(2) does) where
 * the caller would find it, as the supervisor opens it (Caller.opened in
 * sandbox/warm/guardparts.py); 0 when it opens, or cannot be tried.
 */
static int open_error(int listener, const struct seccomp_notif *n, const char *path)
{
	char base[64];
	const char *rest = path + strspn(path, "/");
	int dir, fd, err;

	snprintf(base, sizeof base, "/proc/%u/%s", n->pid, path[0] == '/' ? "root" : "cwd");
	dir = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return 0;
	if (!valid(listener, n->id)) {
		close(dir);
		return ESRCH; /* that pid is no longer the caller */
	}
	fd = openat(dir, *rest ? rest : ".", O_PATH | O_CLOEXEC);
	err = errno;
	close(dir);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return err;
}

/*
 * What the fast path answers: an errno (the call fails with it), or 0 when the
 * call needs the supervisor. Every step that is not sure gives 0.
 */
static int judge(int listener, const struct seccomp_notif *n)
{
	struct sockaddr_un addr;
	char path[sizeof addr.sun_path + 1];
	int size = (int)n->data.args[2];
	struct iovec here = { &addr, 0 }, there = { 0, 0 };

	if (n->data.arch != GUARD_ARCH || !guarded_call(n->data.nr))
		return EACCES;
	if (n->data.nr != SYS_connect || size <= (int)offsetof(struct sockaddr_un, sun_path) ||
	    size > (int)sizeof addr)
		return 0;
	if (domain_of((pid_t)n->pid, (int)n->data.args[0]) != AF_UNIX)
		return 0;
	memset(&addr, 0, sizeof addr);
	here.iov_len = there.iov_len = (size_t)size;
	there.iov_base = (void *)(uintptr_t)n->data.args[1];
	if (process_vm_readv((pid_t)n->pid, &here, 1, &there, 1, 0) != size)
		return 0;
	/* What was read is the caller's only if it is still waiting in that call. */
	if (!valid(listener, n->id))
		return ESRCH;
	if (addr.sun_family != AF_UNIX || addr.sun_path[0] == '\0')
		return 0; /* another family's (the kernel refuses it), or abstract */
	memcpy(path, addr.sun_path, sizeof addr.sun_path);
	path[sizeof addr.sun_path] = '\0';
	/* A descriptor of the caller's own: the supervisor reads it as the caller's. */
	if (strncmp(path, "/proc/self/", 11) == 0 || strncmp(path, "/proc/thread-self/", 18) == 0)
		return 0;
	return open_error(listener, n, path);
}

/* -- the supervisor ----------------------------------------------------------- */

static void hex(char *out, const void *data, size_t size)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = data;
	size_t i;

	for (i = 0; i < size; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * size] = '\0';
}

/*
 * Become the supervisor (see THE GUARD'S CALLS), with `n` its first call. Back
 * here only when it could not be executed: then refuse from now on.
 */
static void become_supervisor(struct state *s, const struct seccomp_notif *n)
{
	const struct args *a = s->args;
	char listener[16], child[16], first[2 * sizeof *n + 1];
	char *argv[8 + a->guard_len];
	char *env[] = { NULL };
	int i, err = EPERM;

	snprintf(listener, sizeof listener, "%d", s->listener);
	snprintf(child, sizeof child, "%d", (int)s->child);
	hex(first, n, sizeof *n);
	argv[0] = (char *)a->python;
	argv[1] = "-I";
	argv[2] = "-S";
	argv[3] = (char *)a->main;
	argv[4] = listener;
	argv[5] = child;
	argv[6] = first;
	for (i = 0; i < a->guard_len; i++)
		argv[7 + i] = a->guard[i];
	argv[7 + a->guard_len] = NULL;
	/*
	 * Only with CAP_SYS_PTRACE to carry through: without it the command could
	 * trace the new program before it makes itself not dumpable again.
	 */
	if (s->ptrace && fcntl(s->listener, F_SETFD, 0) == 0) {
		struct sigaction ignore = { .sa_handler = SIG_IGN }, was;

		/*
		 * SIGINT ignored through the exec: an interpreter that starts with
		 * it at the default takes it as KeyboardInterrupt until the
		 * supervisor sets it back, and a command could end its own guard,
		 * and so its box, by sending it then.
		 */
		sigaction(SIGINT, &ignore, &was);
		sigprocmask(SIG_SETMASK, &s->mask, NULL);
		/* No environment: nothing of the command's reaches the interpreter. */
		execve(a->python, argv, env);
		err = errno;
		sigprocmask(SIG_BLOCK, &s->chld, NULL);
		sigaction(SIGINT, &was, NULL);
		fcntl(s->listener, F_SETFD, FD_CLOEXEC);
	}
	say("harness-sandbox: the Unix-socket guard's supervisor could not start (",
	    strerror(err), "): ", "each call it would judge is refused");
	s->refusing = 1;
	answer(s->listener, n->id, EACCES);
}

/* One call stopped by the guard, answered here or by the supervisor. */
static void one(struct state *s)
{
	struct seccomp_notif n;
	int err;

	memset(&n, 0, sizeof n);
	if (ioctl(s->listener, SECCOMP_IOCTL_NOTIF_RECV, &n) != 0) {
		if (errno == ENOENT || errno == EINTR)
			return; /* a caller killed before its call was read */
		/* Every call still stopped, and every later one, fails (ENOSYS). */
		close(s->listener);
		s->listener = -1;
		return;
	}
	err = judge(s->listener, &n);
	if (err == 0 && s->refusing)
		err = EACCES;
	if (err != 0)
		answer(s->listener, n.id, err);
	else
		become_supervisor(s, &n);
}

/* Until the command ends: its exit code. */
static int supervise(struct state *s)
{
	struct pollfd p[2] = { { s->signals, POLLIN, 0 }, { s->listener, POLLIN, 0 } };
	int code;

	for (;;) {
		if (poll(p, s->listener < 0 ? 1 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			say("harness-sandbox: the Unix-socket guard: poll: ", strerror(errno), "", "");
			return EXIT_ARMING;
		}
		if (p[0].revents && reap(s, &code))
			return code;
		if (s->listener < 0)
			continue;
		if (p[1].revents & POLLIN)
			one(s);
		else if (p[1].revents) {
			/* No process is under the filter any more: none can be again. */
			close(s->listener);
			s->listener = -1;
		}
	}
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
static int start(struct state *s, const struct sock_fprog *prog)
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
		/* No process at the box's process bound: the command's start refused. */
		exec_failed(s->args->command[0], errno);
		return EXIT_EXEC;
	}
	if (s->child == 0)
		child(s->args, prog, sv[1], &s->mask);
	close(sv[1]);
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
	struct state s = { .args = &a, .listener = -1, .signals = -1 };
	int code;

	if (parse(argc, argv, &a) != 0 || decode(a.program, &prog) != 0) {
		say("usage: guardinit FD PYTHON GUARDMAIN PROGRAM N ROOT... M SOCKET... ",
		    "-- CMD [ARG...]", "", "");
		return EXIT_ARMING;
	}
	close(a.self);
	if (init_self() != 0)
		return EXIT_EXEC;
	code = start(&s, &prog);
	if (code != 0 || s.listener < 0)
		return code;
	return supervise(&s);
}
