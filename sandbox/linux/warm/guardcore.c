/*
 * guardcore.c - the Unix-socket guard's parts both launchers use: the arming of a
 * command (its capabilities, the guard's filter, the listener taken from it),
 * the fast path, and the supervisor behind it. guardinit.c says what they do.
 */

#include "guard.h"

/* Say one line on stderr. Write(2) alone: no buffer to flush before an exec. */
void say(const char *a, const char *b, const char *c, const char *d)
{
	char line[4096];
	int n = snprintf(line, sizeof line, "%s%s%s%s\n", a, b, c, d);

	if (n > (int)sizeof line - 1)
		n = (int)sizeof line - 1, line[n - 1] = '\n';
	if (n > 0 && write(2, line, (size_t)n) < 0)
		return; /* nowhere else to say it */
}

/* A count in decimal, within [0, max]; -1 for anything else. */
long count(const char *s, long max)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (errno || end == s || *end || n < 0 || n > max)
		return -1;
	return n;
}

/*
 * Every capability gone from this thread but `keep` (-1: none), when held. The
 * bounding set first, while CAP_SETPCAP (which dropping from it needs) is still
 * held; then the ambient set; then the others at once. A kept capability is
 * made ambient too, so that it survives an exec (the supervisor's).
 */
int keep_only(int keep)
{
	return keep_held(keep < 0 ? 0 : 1U << keep);
}

/* As keep_only, for each capability of `mask` (of the first 32) that is held. */
int keep_held(uint32_t mask)
{
	struct __user_cap_header_struct head = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	uint32_t kept;
	int cap;

	if (syscall(SYS_capget, &head, data) != 0)
		return -1;
	kept = data[0].permitted & mask;
	if (data[0].effective & (1U << CAP_SETPCAP)) {
		for (cap = 0; cap < 64; cap++) {
			if (cap < 32 && kept & (1U << cap))
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
	for (cap = 0; cap < 32; cap++)
		if (kept & (1U << cap) &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0)
			return -1;
	return kept != 0;
}

/* The guard's filter loaded in this thread; its listener's descriptor. */
int load(const struct sock_fprog *prog)
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

/* The child's listener, taken from it; -1 (errno 0 when the child is gone first). */
int take_listener(pid_t pid, int sock)
{
	autofd int pidfd = -1, fd = -1;
	int number;
	ssize_t got = read(sock, &number, sizeof number);

	if (got != sizeof number) {
		errno = got < 0 ? errno : 0;
		return -1;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, number, 0);
	if (fd < 0 || write(sock, "", 1) != 1)
		return -1;
	return steal_fd(&fd);
}

/*
 * The command's side of the arming, in the process that will execute it:
 * every capability dropped and, where there is a guard, its filter loaded. The
 * listener cannot be sent to the parent (SCM_RIGHTS is a sendmsg(2), which the
 * filter just loaded stops until someone listens): its number is written on
 * `sock` instead, and the parent takes the descriptor itself (take_listener);
 * this waits for that, as the listener is close-on-exec and must have another
 * holder first. 0; or -1 and errno, with `*what` the step that failed (NULL
 * when the parent has said why).
 */
int arm_command(const struct sock_fprog *guard, int sock, const char **what)
{
	char ack;

	signal(SIGPIPE, SIG_DFL);
	signal(SIGXFSZ, SIG_DFL);
	*what = "dropping the command's capabilities";
	/* Held only by a box of root's stand-in (sandbox/linux/standin.py): root's
	 * own on the files of the stand-in's range (chown, tar -xp). */
	if (keep_held(OWNER_CAPS) < 0)
		return -1;
	if (guard != NULL) {
		autofd int listener = -1;

		*what = "the guard's filter";
		listener = load(guard);
		if (listener < 0)
			return -1;
		*what = NULL;
		/* The parent holds it too once it answers: closed here at the block's end. */
		if (write(sock, &listener, sizeof listener) != sizeof listener ||
		    read(sock, &ack, 1) != 1)
			return -1;
	}
	close(sock);
	return 0;
}

/* What a wait status says, as bwrap and a shell say it. */
int exit_code(int status)
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
	       nr == SYS_sendmmsg || nr == SYS_bind || nr == SYS_flock || nr == SYS_fcntl;
}

/*
 * The caller's descriptor `number`, taken (pidfd_getfd): the very file the caller
 * named, which no later change of its table swaps for another; -1 when it cannot
 * be had. The pid is the caller's only while it waits: confirm (valid) before any
 * use of what was taken counts.
 */
static int taken(pid_t pid, int number)
{
	autofd int pidfd = -1;

	pidfd = (int)syscall(SYS_pidfd_open, pid, PIDFD_THREAD);
	if (pidfd < 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	return (int)syscall(SYS_pidfd_getfd, pidfd, number, 0);
}

/* A socket's family; -1 when it is none. */
static int domain_of(int sock)
{
	int domain = -1;
	socklen_t size = sizeof domain;

	if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &size) != 0)
		return -1;
	return domain;
}

/*
 * The error of opening `path` (O_PATH, following links as connect(2) does) where
 * the caller would find it, as the supervisor opens it (Caller.opened in
 * sandbox/linux/warm/guardparts.py); 0 when it opens, or cannot be tried.
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

/* What judge() gives for a call it has made and answered itself. */
#define ANSWERED (-1)

/*
 * The call's address (its second argument, `size` bytes) copied into `buf`: 0 when
 * read while the caller still waits in that call (what was read is its own only
 * then); ESRCH when it waits no more; -1 when it cannot be read (the supervisor
 * answers that as the kernel would).
 */
static int copied(int listener, const struct seccomp_notif *n, void *buf, int size)
{
	struct iovec here = { buf, (size_t)size };
	struct iovec there = { (void *)(uintptr_t)n->data.args[1], (size_t)size };

	if (process_vm_readv((pid_t)n->pid, &here, 1, &there, 1, 0) != size)
		return -1;
	return valid(listener, n->id) ? 0 : ESRCH;
}

/*
 * connect(2) on a Unix socket `size` bytes long: ENOENT (or the open's other
 * error) for a pathname that cannot be opened where the caller would find it; 0
 * for everything else, which needs the supervisor.
 */
static int unix_connect(int listener, const struct seccomp_notif *n, int size)
{
	struct sockaddr_un addr;
	char path[sizeof addr.sun_path + 1];
	int got;

	if (size <= (int)offsetof(struct sockaddr_un, sun_path) || size > (int)sizeof addr)
		return 0;
	memset(&addr, 0, sizeof addr);
	got = copied(listener, n, &addr, size);
	if (got != 0)
		return got < 0 ? 0 : got;
	if (addr.sun_family != AF_UNIX || addr.sun_path[0] == '\0')
		return 0; /* another family's (the kernel refuses it), or abstract */
	memcpy(path, addr.sun_path, sizeof addr.sun_path);
	path[sizeof addr.sun_path] = '\0';
	/* A descriptor of the caller's own: the supervisor reads it as the caller's. */
	if (strncmp(path, "/proc/self/", 11) == 0 || strncmp(path, "/proc/thread-self/", 18) == 0)
		return 0;
	return open_error(listener, n, path);
}

/*
 * connect(2) on an Internet socket (AF_INET, AF_INET6) that does not block, made
 * here as the supervisor makes it: on `sock`, the caller's socket itself (taken),
 * with a copy of the address, read once; the caller gets the call's result
 * (EINPROGRESS too), never a CONTINUE, which would have the kernel read the
 * caller's descriptor table and memory again, after the check. No address of
 * these families is the guard's to refuse: the kernel judges the copy as it
 * would the caller's. ANSWERED; or 0 when the supervisor must make it: a socket
 * that blocks (the wait would stop this loop; the supervisor waits in a thread),
 * an address that cannot be read (it answers the error).
 *
 * The socket's O_NONBLOCK is its open file's, which the caller shares: another
 * thread of the caller that clears it (F_SETFL, FIONBIO) between the check and
 * the call makes this connect wait, and with it every guarded call of the run,
 * until the connection is made or fails (TCP gives up in about two minutes). A
 * command can only stall itself so; nothing gets through unchecked.
 */
static int inet_connect(int listener, const struct seccomp_notif *n, int sock, int size)
{
	struct sockaddr_storage addr;
	int flags = fcntl(sock, F_GETFL), err;

	if (flags < 0 || !(flags & O_NONBLOCK))
		return 0;
	memset(&addr, 0, sizeof addr);
	/* The socket and the address are the caller's only if it still waits. */
	err = copied(listener, n, &addr, size);
	if (err != 0)
		return err < 0 ? 0 : err;
	err = connect(sock, (const struct sockaddr *)&addr, (socklen_t)size) == 0 ? 0 : errno;
	answer(listener, n->id, err);
	return ANSWERED;
}

/*
 * What the fast path answers: an errno (the call fails with it), ANSWERED (made
 * and answered here), or 0 when the call needs the supervisor. Every step that is
 * not sure gives 0.
 */
static int judge(int listener, const struct seccomp_notif *n)
{
	autofd int sock = -1;
	int size = (int)n->data.args[2];

	if (n->data.arch != GUARD_ARCH || !guarded_call(n->data.nr))
		return EACCES;
	if (n->data.nr != SYS_connect || size <= 0 || size > (int)sizeof(struct sockaddr_storage))
		return 0;
	/* The family of the socket itself: the caller cannot change it under the check. */
	sock = taken((pid_t)n->pid, (int)n->data.args[0]);
	if (sock < 0)
		return 0;
	switch (domain_of(sock)) {
	case AF_UNIX:
		return unix_connect(listener, n, size);
	case AF_INET:
	case AF_INET6:
		return inet_connect(listener, n, sock, size);
	default:
		return 0;
	}
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
	const struct supervisor *a = s->sup;
	char listener[16], child[16], chan[16], first[2 * sizeof *n + 1];
	char *argv[10 + a->guard_len];
	char *env[] = { NULL };
	int i = 0, j, err = EPERM;

	snprintf(listener, sizeof listener, "%d", s->listener);
	snprintf(child, sizeof child, "%d", (int)s->child);
	snprintf(chan, sizeof chan, "%d", a->chan);
	hex(first, n, sizeof *n);
	argv[i++] = (char *)a->python;
	argv[i++] = "-I";
	argv[i++] = "-S";
	argv[i++] = (char *)a->main;
	if (a->chan >= 0) {
		/* A warm run's: the supervisor says the run's end to the host. */
		argv[i++] = "--chan";
		argv[i++] = chan;
	}
	argv[i++] = listener;
	argv[i++] = child;
	argv[i++] = first;
	for (j = 0; j < a->guard_len; j++)
		argv[i++] = a->guard[j];
	argv[i] = NULL;
	/*
	 * Only with CAP_SYS_PTRACE to carry through: without it the command could
	 * trace the new program before it makes itself not dumpable again.
	 */
	if (s->ptrace && fcntl(s->listener, F_SETFD, 0) == 0 &&
	    (a->chan < 0 || fcntl(a->chan, F_SETFD, 0) == 0)) {
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
	/* A guard whose supervisor could not start refuses every call, made here or not:
	 * it fails closed, as it did before the fast path made any. */
	err = s->refusing ? EACCES : judge(s->listener, &n);
	if (err == ANSWERED)
		return;
	if (err != 0)
		answer(s->listener, n.id, err);
	else
		become_supervisor(s, &n);
}

/* Until the command ends: its exit code. */
int supervise(struct state *s)
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
