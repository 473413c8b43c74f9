/*
 * warmstart.c - the warm box's starter, compiled: what sandbox/linux/warm/helper.py
 * and sandbox/linux/warm/inbox.py do, with no interpreter to start.
 *
 * SYNOPSIS
 *     guardinit warm FD SOCK PYTHON GUARDMAIN
 *
 * DESCRIPTION
 *     bwrap starts this as the warm box's command, from the session's sealed
 *     memfd (FD, executed as /proc/self/fd/FD and closed here first), with
 *     CAP_SYS_ADMIN, CAP_SETPCAP, CAP_SYS_PTRACE and CAP_NET_ADMIN in the box's
 *     user namespace and no system-call filter of its own. SOCK is its end of
 *     the SOCK_SEQPACKET pair whose other end the host holds
 *     (sandbox/linux/warm/client.py). The messages both ways, and what a run made
 *     ahead is, are those helper.py documents; the host cannot tell the two
 *     starters apart but by their speed (no interpreter's start, about 9 ms,
 *     at each session's open).
 *
 *     A run made ahead: a short-lived child makes a PID namespace and forks the
 *     run's init there, which this process adopts (it is the child subreaper).
 *     The init makes the run's mount and IPC namespaces (and network namespace,
 *     for a box without network), mounts a fresh /proc with the read-only belt
 *     and a fresh /dev/shm, makes itself not dumpable, sets no_new_privs, loads
 *     the session's filter, and forks the command's process ahead too, under
 *     that filter. That process drops every capability (effective, permitted,
 *     inheritable, bounding, ambient), loads the Unix-socket guard's filter (its
 *     listener taken by the init, as guardinit.c takes it), and waits for the
 *     run's request on the run's channel. The init keeps CAP_SYS_PTRACE alone.
 *     So when the request comes, one recvmsg(2) and one execve(2) stand between
 *     it and the command.
 *
 *     The command's process tells the init on a pipe: R when the request came,
 *     E and an errno when it could not be started (said to the host as
 *     "exit exec ERRNO"), S and words when it could not be armed ("exit setup"),
 *     G when the starter was gone as the request came (the init then ends
 *     without a word, and the host knows the box is gone); the pipe's end of
 *     file after R is its exec. The init then says "started",
 *     answers the guard's calls as guardinit.c does (becoming guardmain.py, with
 *     the run's channel, at the first call that needs judgement), and at the
 *     command's end kills and reaps every other process of the run's PID
 *     namespace before it says "exit status N".
 *
 * Plain C and the C library only, linked statically with guardcore.c and
 * guardinit.c (sandbox/linux/initcache.py): no dynamic linker runs in the box's
 * starter or in a run's init.
 */

#include "guard.h"
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

#define MAX_MESSAGE (1 << 17)
#define PROC_FLAGS (MS_NOSUID | MS_NODEV | MS_NOEXEC)

/* One field of a message: its bytes, not NUL-terminated. */
struct field {
	const char *p;
	size_t n;
};

/* A message's fields (see pack() in sandbox/linux/warm/inbox.py). */
struct message {
	struct field *f;
	size_t n;
	char *own;                    /* the bytes they point into, when they are its */
};

/* A message freed when it goes out of scope (see autofree in guard.h). */
#define automessage __attribute__((cleanup(free_message)))

static void free_message(struct message *m)
{
	free(m->f);
	free(m->own);
	m->f = NULL, m->own = NULL, m->n = 0;
}

/* What every run needs, made once from the host's setup message. */
struct box {
	char shm[64];                 /* /dev/shm's mount data */
	char **read_only;             /* procfs entries bound read-only */
	char **nulled;                /* procfs entries covered by /dev/null */
	unsigned long null_flags;
	struct sock_fprog prog;       /* the session's filter */
	struct sock_fprog guard;      /* the Unix-socket guard's (len 0: none) */
	struct supervisor sup;        /* the guard's supervisor (chan set per run) */
	char **roots, **allowed;      /* the guard's writable roots and allowed sockets */
	char counts[2][16];           /* how many of each, in decimal */
	int own_network;              /* each run in a network namespace of its own */
	int life;                     /* read end of a pipe only this process writes */
	sigset_t mask;                /* the signal mask bwrap gave */
};

/* A run being made (an outer child) or made (an init), in this process. */
struct run {
	pid_t pid;
	int making;                   /* the outer child: report and chan are open */
	int report;
	int chan;
	long rid;
	int killed;                   /* the host waits for its end */
};

static struct run *runs;
static size_t nruns, capruns;
static pid_t early[64];           /* inits reaped before their outer was */
static size_t nearly;
static long next_rid;
static char broken[512];          /* why no run can be made, or "" */

/* -- messages ------------------------------------------------------------------ */

/*
 * The fields of the message `buf` holds, which they point into (it must outlive
 * them); 0, or -1 when a length runs past its end (then `m` holds none).
 */
static int unpack(const char *buf, size_t len, struct message *m)
{
	size_t pos = 0, cap = 16, got = 0;
	autofree struct field *f = malloc(cap * sizeof *f);

	m->f = NULL, m->n = 0, m->own = NULL;
	if (f == NULL)
		return -1;
	while (pos < len) {
		uint32_t n;

		if (len - pos < sizeof n)
			return -1;
		memcpy(&n, buf + pos, sizeof n);
		pos += sizeof n;
		if (n > len - pos)
			return -1;
		if (got == cap) {
			struct field *more = realloc(f, 2 * cap * sizeof *f);

			if (more == NULL)
				return -1;
			f = more, cap *= 2;
		}
		f[got].p = buf + pos;
		f[got++].n = n;
		pos += n;
	}
	m->f = f, f = NULL; /* the message's now */
	m->n = got;
	return 0;
}

static int is(const struct field *f, const char *word)
{
	return f->n == strlen(word) && memcmp(f->p, word, f->n) == 0;
}

/* A field as a C string (a copy); NULL when it holds a NUL or memory is out. */
static char *text(const struct field *f)
{
	char *s;

	if (memchr(f->p, '\0', f->n) != NULL || (s = malloc(f->n + 1)) == NULL)
		return NULL;
	memcpy(s, f->p, f->n);
	s[f->n] = '\0';
	return s;
}

/*
 * Send the NUL-terminated fields given (NULL ends them) as one message, with
 * `fd` when it is not -1. A host that has gone hears nothing.
 */
static void send_words(int sock, int fd, ...)
{
	char buf[4096], cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { buf, 0 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	const char *word;
	va_list ap;

	va_start(ap, fd);
	while ((word = va_arg(ap, const char *)) != NULL) {
		uint32_t n = (uint32_t)strlen(word);
		size_t room = sizeof buf - iov.iov_len;

		/* A word's length needs its 4 bytes: with less room left than that, the
		 * words end here (room - sizeof n would wrap and let n through whole). */
		if (room < sizeof n)
			break;
		if (n > room - sizeof n)
			n = (uint32_t)(room - sizeof n);
		memcpy(buf + iov.iov_len, &n, sizeof n);
		memcpy(buf + iov.iov_len + sizeof n, word, n);
		iov.iov_len += sizeof n + n;
	}
	va_end(ap);
	if (fd >= 0) {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof cbuf);
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof cbuf;
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* "what: reason" into `why`; -1, for the caller to return. */
static int failed(char *why, size_t size, const char *what, const char *detail)
{
	snprintf(why, size, "%s%s: %s", what, detail, strerror(errno));
	return -1;
}

/* -- the setup ------------------------------------------------------------------ */

/*
 * The NUL-separated paths of `f`, empty ones left out, and (`existing`) those
 * this kernel lacks, as bwrap's --ro-bind-try leaves them: a NULL-ended list,
 * in one allocation with the paths' bytes (one free(3) frees it all).
 */
static char **paths(const struct field *f, int existing, int *count_out)
{
	size_t slots = f->n + 2, at = 0;
	char **out = malloc(slots * sizeof *out + f->n + 1), *bytes;
	int n = 0;

	if (out == NULL)
		return NULL;
	bytes = (char *)(out + slots);
	memcpy(bytes, f->p, f->n);
	bytes[f->n] = '\0';
	while (at < f->n) {
		char *p = bytes + at;
		size_t len = strlen(p);
		struct stat st;

		if (len && (!existing || stat(p, &st) == 0))
			out[n++] = p;
		at += len + 1;
	}
	out[n] = NULL;
	if (count_out)
		*count_out = n;
	return out;
}

static int bpf(const struct field *f, struct sock_fprog *prog)
{
	if (f->n % sizeof(struct sock_filter) ||
	    f->n > PROGRAM_MAX * sizeof(struct sock_filter))
		return -1;
	prog->len = (unsigned short)(f->n / sizeof(struct sock_filter));
	prog->filter = malloc(f->n ? f->n : 1);
	if (prog->filter == NULL)
		return -1;
	memcpy(prog->filter, f->p, f->n);
	return 0;
}

/* statvfs's flags that a bind's remount must repeat (a user namespace may not
 * clear a flag locked on it, and the atime bits differ), and their mount flags. */
static const struct {
	unsigned long st, ms;
} KEPT[] = {
	{ ST_NOSUID, MS_NOSUID }, { ST_NODEV, MS_NODEV }, { ST_NOEXEC, MS_NOEXEC },
	{ ST_NOATIME, MS_NOATIME }, { ST_NODIRATIME, MS_NODIRATIME },
	{ ST_RELATIME, MS_RELATIME },
};

static unsigned long kept_flags(const char *path)
{
	struct statvfs st;
	unsigned long out = 0;
	size_t i;

	if (statvfs(path, &st) != 0)
		return 0;
	for (i = 0; i < sizeof KEPT / sizeof *KEPT; i++)
		if (st.f_flag & KEPT[i].st)
			out |= KEPT[i].ms;
	return out;
}

/* The guard supervisor's N ROOT... M SOCKET... from two NUL-separated fields: its
 * list points into the box's own. */
static int guard_args(struct box *b, const struct field *roots,
		      const struct field *allowed)
{
	int n, m;
	char **out;

	b->roots = paths(roots, 0, &n);
	b->allowed = paths(allowed, 0, &m);
	if (b->roots == NULL || b->allowed == NULL ||
	    (out = calloc((size_t)(n + m + 3), sizeof *out)) == NULL)
		return -1;
	snprintf(b->counts[0], sizeof b->counts[0], "%d", n);
	snprintf(b->counts[1], sizeof b->counts[1], "%d", m);
	out[0] = b->counts[0];
	memcpy(out + 1, b->roots, (size_t)n * sizeof *out);
	out[1 + n] = b->counts[1];
	memcpy(out + 2 + n, b->allowed, (size_t)m * sizeof *out);
	b->sup.guard = out;
	b->sup.guard_len = n + m + 2;
	return 0;
}

/* The box from the setup message (sandbox/linux/warm/helper.py says its fields). */
static int setup(struct box *b, const struct message *m)
{
	autofree char *size = NULL, *nproc = NULL;
	long long shm;

	errno = EINVAL; /* a field that is not whole, unless a call says otherwise */
	if (m->n != 10 || !is(&m->f[0], "setup") || (size = text(&m->f[1])) == NULL)
		return -1;
	shm = atoll(size);
	snprintf(b->shm, sizeof b->shm, "size=%lld,mode=1777", shm);
	b->read_only = paths(&m->f[2], 1, NULL);
	b->nulled = paths(&m->f[3], 1, NULL);
	if (b->read_only == NULL || b->nulled == NULL)
		return -1;
	errno = EINVAL; /* looking for paths left it as the last one missing said */
	if (bpf(&m->f[4], &b->prog) != 0 || (nproc = text(&m->f[5])) == NULL)
		return -1;
	if (atol(nproc) > 0) {
		struct rlimit lim = { (rlim_t)atol(nproc), (rlim_t)atol(nproc) };

		if (setrlimit(RLIMIT_NPROC, &lim) != 0)
			return -1;
	}
	b->guard.len = 0;
	if (m->f[6].n &&
	    (bpf(&m->f[6], &b->guard) != 0 || guard_args(b, &m->f[7], &m->f[8]) != 0))
		return -1;
	b->own_network = is(&m->f[9], "net");
	/* nodev, as the cold box's binds are: opening a cover fails, "Permission
	 * denied", rather than reading as empty. */
	b->null_flags = kept_flags("/dev/null") | MS_NODEV | MS_NOSUID | MS_NOEXEC;
	return 0;
}

/* -- a run's init ----------------------------------------------------------------- */

static int loopback_up(char *why, size_t size)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;

	if (s < 0)
		return failed(why, size, "the loopback", "");
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	if (rc != 0)
		failed(why, size, "the loopback", "");
	close(s);
	return rc;
}

static int read_only_bind(const char *src, const char *dest, unsigned long flags,
			  char *why, size_t size)
{
	if (mount(src, dest, NULL, MS_BIND | MS_REC, NULL) != 0 ||
	    mount(NULL, dest, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, NULL) != 0)
		return failed(why, size, "mount ", dest);
	return 0;
}

/* The run's own namespaces and mounts. */
static int mounts(const struct box *b, char *why, size_t size)
{
	char **p;

	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | (b->own_network ? CLONE_NEWNET : 0)) != 0)
		return failed(why, size, "unshare", "");
	if (b->own_network && loopback_up(why, size) != 0)
		return -1;
	/* Nothing mounted here may reach the box's other runs. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return failed(why, size, "mount ", "/");
	if (mount("proc", "/proc", "proc", PROC_FLAGS, NULL) != 0)
		return failed(why, size, "mount ", "/proc");
	for (p = b->read_only; *p; p++)
		if (read_only_bind(*p, *p, PROC_FLAGS | kept_flags(*p), why, size) != 0)
			return -1;
	for (p = b->nulled; *p; p++)
		if (read_only_bind("/dev/null", *p, b->null_flags, why, size) != 0)
			return -1;
	if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, b->shm) != 0)
		return failed(why, size, "mount ", "/dev/shm");
	return 0;
}

static void tell(int pipe_fd, char kind, const void *data, size_t size)
{
	char buf[600];

	if (size > sizeof buf - 1)
		size = sizeof buf - 1;
	buf[0] = kind;
	memcpy(buf + 1, data, size);
	if (write(pipe_fd, buf, size + 1) < 0)
		return; /* the init is gone: so is the run */
}

static int starter_gone(int life)
{
	char c;

	return read(life, &c, 1) == 0;
}

/* The whole request, from the memfd `fd` that holds it (longer than a message may
 * be): 0, or -1. */
static int unpack_big(int fd, struct message *req)
{
	autofree char *whole = NULL;
	struct stat st;

	if (fstat(fd, &st) != 0 || st.st_size < 0 || st.st_size > (1 << 30) ||
	    (whole = malloc((size_t)st.st_size + 1)) == NULL ||
	    pread(fd, whole, (size_t)st.st_size, 0) != st.st_size ||
	    unpack(whole, (size_t)st.st_size, req) != 0)
		return -1;
	req->own = steal_pointer(&whole);
	return 0;
}

/* The run's request (and its three descriptors) on `chan`, read whole: 0, or -1
 * (then `req` holds nothing). */
static int receive(int chan, struct message *req, int fds[4], int *nfds)
{
	autofree char *buf = malloc(MAX_MESSAGE);
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = { buf, MAX_MESSAGE };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			      .msg_controllen = sizeof cbuf };
	struct cmsghdr *c;
	ssize_t got;

	if (buf == NULL)
		return -1;
	while ((got = recvmsg(chan, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (got <= 0)
		return -1;
	*nfds = 0;
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			memcpy(fds, CMSG_DATA(c), (size_t)(n > 4 ? 4 : n) * sizeof(int));
			*nfds = n > 4 ? 4 : n;
		}
	if (unpack(buf, (size_t)got, req) != 0)
		return -1;
	if (req->n && is(&req->f[0], "big") && *nfds == 4) {
		free_message(req);
		if (unpack_big(fds[3], req) != 0)
			return -1;
		close(fds[3]);
		*nfds = 3;
		return 0;
	}
	req->own = steal_pointer(&buf);
	return 0;
}

/* What a run's request asks (run() in sandbox/linux/warm/channel.py):
 * run KIND CWD ARGC ARG... ENV... */
struct order {
	char *cwd;
	int argc;
	char **argv;                  /* NULL-ended */
	char **envp;                  /* NULL-ended: the items that hold a '=' */
	const char *path;             /* the environment's PATH (in envp), or NULL */
};

/* A NULL-ended list of strings, each freed, then the list. */
static void free_strv(char ***p)
{
	char **s;

	if (*p == NULL)
		return;
	for (s = *p; *s; s++)
		free(*s);
	free(*p);
}

static void free_order(struct order *o)
{
	free(o->cwd);
	free_strv(&o->argv);
	free_strv(&o->envp);
	o->cwd = NULL, o->argv = o->envp = NULL, o->path = NULL;
}

/* The request's folder and count of words: 0, or EINVAL when they are not whole
 * (ARGC a decimal from 1 to the fields left). */
static int order_head(const struct message *req, struct order *o)
{
	autofree char *argc = NULL;
	long n;

	if (req->n < 4 || (o->cwd = text(&req->f[2])) == NULL ||
	    (argc = text(&req->f[3])) == NULL || (n = count(argc, (long)(req->n - 4))) < 1)
		return EINVAL;
	o->argc = (int)n;
	return 0;
}

/* The request's words and environment, after its head: 0, ENOMEM, or EINVAL when
 * a word holds a NUL (an item of the environment that does is left out). */
static int order_words(const struct message *req, struct order *o)
{
	size_t i, e = 0, argc = (size_t)o->argc;

	o->argv = calloc(argc + 1, sizeof *o->argv);
	o->envp = calloc(req->n - 4 - argc + 1, sizeof *o->envp);
	if (o->argv == NULL || o->envp == NULL)
		return ENOMEM;
	for (i = 0; i < argc; i++)
		if ((o->argv[i] = text(&req->f[4 + i])) == NULL)
			return EINVAL;
	for (i = 4 + argc; i < req->n; i++) {
		char *item = text(&req->f[i]);

		if (item == NULL || strchr(item, '=') == NULL) {
			free(item);
			continue;
		}
		o->envp[e++] = item;
		if (strncmp(item, "PATH=", 5) == 0)
			o->path = item + 5;
	}
	return 0;
}

/*
 * The command's process: armed, then waiting for the request, then executed
 * as execvp(3) does it with the request's environment (a bare name looked up
 * on that environment's PATH, or the default path; a file without #! run by
 * /bin/sh). Never returns.
 */
static void command(const struct box *b, int chan, int sock, int report)
{
	struct message req;
	struct order o __attribute__((cleanup(free_order))) = { 0 };
	int fds[4], nfds, i, err;
	const char *what;

	/* no_new_privs and the session's filter are the init's, inherited. */
	if (arm_command(b->guard.len ? &b->guard : NULL, sock, &what) != 0) {
		char why[300];

		if (what != NULL) {
			failed(why, sizeof why, what, "");
			tell(report, 'S', why, strlen(why));
		}
		_exit(127);
	}
	if (receive(chan, &req, fds, &nfds) != 0)
		_exit(0); /* the host's end: no run */
	tell(report, 'R', "", 0);
	if (starter_gone(b->life)) {
		/* The box is ending: no run starts in it, and the init ends unheard. */
		tell(report, 'G', "", 0);
		_exit(127);
	}
	err = nfds < 3 ? EINVAL : order_head(&req, &o);
	if (err != 0)
		goto fail;
	if (chdir(o.cwd) != 0) {
		err = errno;
		goto fail;
	}
	/* Out of the way first: one of them may hold a number below 3. */
	for (i = 0; i < 3; i++)
		fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
	for (i = 0; i < 3; i++)
		if (fds[i] < 0 || dup2(fds[i], i) < 0) {
			err = errno;
			goto fail;
		}
	err = order_words(&req, &o);
	if (err != 0)
		goto fail;
	/* execvpe(3) looks on this process's PATH: make it the command's. */
	if (o.path != NULL)
		setenv("PATH", o.path, 1);
	else
		unsetenv("PATH");
	setsid();
	/* A run that asked for a terminal (its request's second field "tty"): the pty
	 * the host made for it, on 0, 1 and 2, is this new session's controlling
	 * terminal (sandbox/process/pty.py). */
	if (req.f[1].n == 3 && memcmp(req.f[1].p, "tty", 3) == 0 &&
	    ioctl(0, TIOCSCTTY, 0) != 0) {
		err = errno;
		goto fail;
	}
	sigprocmask(SIG_SETMASK, &b->mask, NULL);
	execvpe(o.argv[0], o.argv, o.envp);
	err = errno;
fail:
	tell(report, 'E', &err, sizeof err);
	_exit(127);
}

/* Kill every other process of the run's PID namespace and reap each, until none is
 * left (one forked while the kill went round is killed in the next round). */
static void end_all(void)
{
	for (;;) {
		kill(-1, SIGKILL);
		if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
			return;
	}
}

/* A run whose command could not be made ahead (no process at the box's bound):
 * its request is answered as a fork there fails. */
static void unarmed(int chan, int err)
{
	struct message req;
	int fds[4], nfds;
	char n[16];

	keep_only(-1); /* nothing of the init's while it waits */
	if (receive(chan, &req, fds, &nfds) != 0)
		_exit(0);
	snprintf(n, sizeof n, "%d", err);
	send_words(chan, -1, "exit", "exec", n, NULL);
	_exit(127);
}

/*
 * The command's word on `report` until it executes: 0 once it has (after its
 * request came), or the code to end with (said to the host).
 */
static int until_started(int chan, int report, int life)
{
	char buf[600], n[16];
	ssize_t got;
	int requested = 0, err;

	for (;;) {
		got = read(report, buf, sizeof buf - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return requested ? 0 : -1;
		if (buf[0] == 'R') {
			requested = 1;
			/* The starter is this process's parent by now (the host has the run
			 * only once it adopted this init): its death ends the run. Asked
			 * again once that is set (the command asked before it): a starter
			 * that died in between would send no signal. The init's end kills
			 * the command, executed or not. */
			prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
			if (starter_gone(life))
				return 127;
			if (got > 1)
				memmove(buf, buf + 1, (size_t)--got);
			else
				continue;
		}
		if (buf[0] == 'G')
			return 127;
		if (buf[0] == 'E' && got >= 1 + (ssize_t)sizeof err) {
			memcpy(&err, buf + 1, sizeof err);
			snprintf(n, sizeof n, "%d", err);
			send_words(chan, -1, "exit", "exec", n, NULL);
			return 127;
		}
		if (buf[0] == 'S') {
			buf[got] = '\0';
			send_words(chan, -1, "exit", "setup", buf + 1, NULL);
			return 127;
		}
	}
}

/*
 * The run's stderr, taken from the command that has just been executed with it:
 * what the guard must say (its supervisor could not start) then reaches the run's
 * stderr, as a box per run's PID 1 writes to the box's.
 */
static void take_stderr(pid_t child)
{
	int pidfd = (int)syscall(SYS_pidfd_open, child, 0), fd;

	if (pidfd < 0)
		return;
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, 2, 0);
	close(pidfd);
	if (fd >= 0) {
		dup2(fd, 2);
		close(fd);
	}
}

/* The run's PID 1 (see DESCRIPTION); never returns. */
static void init(struct box *b, int chan)
{
	struct state s = { .sup = &b->sup, .listener = -1, .signals = -1 };
	char why[600], n[16];
	int sv[2], report[2], code;

	b->sup.chan = chan;
	if (mounts(b, why, sizeof why) != 0 ||
	    (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 &&
	     failed(why, sizeof why, "prctl", "")) ||
	    (pipe2(report, O_CLOEXEC) != 0 && failed(why, sizeof why, "pipe", "")) ||
	    (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 &&
	     failed(why, sizeof why, "socketpair", ""))) {
		send_words(chan, -1, "exit", "setup", why, NULL);
		_exit(127);
	}
	/* Under the session's filter from here, and so is the command's process: the
	 * kernel checks and compiles it once for both. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &b->prog) != 0) {
		failed(why, sizeof why, "the session's filter", "");
		send_words(chan, -1, "exit", "setup", why, NULL);
		_exit(127);
	}
	sigemptyset(&s.chld);
	sigaddset(&s.chld, SIGCHLD);
	s.mask = b->mask;
	/* Blocked before the fork: a child's end is never missed. */
	sigprocmask(SIG_BLOCK, &s.chld, NULL);
	s.signals = signalfd(-1, &s.chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s.signals < 0) {
		failed(why, sizeof why, "signalfd", "");
		send_words(chan, -1, "exit", "setup", why, NULL);
		_exit(127);
	}
	s.child = fork();
	if (s.child == 0)
		command(b, chan, sv[1], report[1]);
	if (s.child < 0) {
		if (errno == EAGAIN)
			unarmed(chan, EAGAIN);
		failed(why, sizeof why, "the command's process", "");
		send_words(chan, -1, "exit", "setup", why, NULL);
		_exit(127);
	}
	close(sv[1]);
	close(report[1]);
	/* CAP_SYS_PTRACE kept for the guard alone (to take a caller's socket). */
	s.ptrace = keep_only(b->guard.len ? CAP_SYS_PTRACE : -1);
	if (b->guard.len && s.ptrace >= 0)
		s.listener = take_listener(s.child, sv[0]);
	/* No listener and errno 0: the command's process ended unarmed, and says why. */
	if (s.ptrace < 0 || (b->guard.len && s.listener < 0 && errno)) {
		failed(why, sizeof why, "the run's guard", "");
		send_words(chan, -1, "exit", "setup", why, NULL);
		_exit(127);
	}
	close(sv[0]);
	code = until_started(chan, report[0], b->life);
	if (code < 0)
		_exit(0); /* no request: the host gave the run up */
	if (code > 0)
		_exit(code);
	close(report[0]);
	send_words(chan, -1, "started", NULL);
	if (s.listener >= 0)
		take_stderr(s.child);
	code = supervise(&s);
	end_all();
	snprintf(n, sizeof n, "%d", code);
	send_words(chan, -1, "exit", "status", n, NULL);
	_exit(code);
}

/* -- the starter ---------------------------------------------------------------- */

static void close_all_but(int a, int b, int c)
{
	int keep[3] = { a, b, c }, i, j, low = 3;

	/* sorted, then the gaps closed */
	for (i = 0; i < 3; i++)
		for (j = i + 1; j < 3; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];

				keep[i] = keep[j], keep[j] = t;
			}
	for (i = 0; i < 3; i++) {
		if (keep[i] > low && syscall(SYS_close_range, low, keep[i] - 1, 0) != 0)
			for (j = low; j < keep[i]; j++)
				close(j);
		if (keep[i] + 1 > low)
			low = keep[i] + 1;
	}
	if (syscall(SYS_close_range, low, ~0U, 0) != 0)
		for (j = low; j < 1 << 16; j++)
			close(j);
}

/*
 * The child that makes a run's PID namespace: forks the run's init there, says
 * its pid (P) and ends, so that the starter adopts the init. A fork refused at
 * the box's process bound is said A, any other failure S.
 */
static void outer(struct box *b, int chan, int report)
{
	pid_t pid;

	sigprocmask(SIG_SETMASK, &b->mask, NULL);
	close_all_but(chan, report, b->life);
	if (unshare(CLONE_NEWPID) != 0) {
		dprintf(report, "Sunshare: %s\n", strerror(errno));
		_exit(0);
	}
	pid = fork();
	if (pid == 0) {
		close(report);
		init(b, chan);
	}
	if (pid < 0)
		dprintf(report, "%sfork: %s\n", errno == EAGAIN ? "A" : "S", strerror(errno));
	else
		dprintf(report, "P%d\n", (int)pid);
	_exit(0);
}

static struct run *add(void)
{
	if (nruns == capruns) {
		size_t cap = capruns ? 2 * capruns : 16;
		struct run *more = realloc(runs, cap * sizeof *runs);

		if (more == NULL)
			return NULL;
		runs = more, capruns = cap;
	}
	memset(&runs[nruns], 0, sizeof runs[nruns]);
	return &runs[nruns++];
}

static void drop(struct run *r)
{
	*r = runs[--nruns];
}

static struct run *find(pid_t pid)
{
	size_t i;

	for (i = 0; i < nruns; i++)
		if (runs[i].pid == pid)
			return &runs[i];
	return NULL;
}

static void make(struct box *b, int sock)
{
	int report[2], sv[2];
	char n[16];
	struct run *r;
	pid_t pid;

	if (broken[0]) {
		send_words(sock, -1, "broken", broken, NULL);
		return;
	}
	if (pipe2(report, O_CLOEXEC) != 0)
		goto refused;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		close(report[0]), close(report[1]);
		goto refused;
	}
	pid = fork();
	if (pid == 0)
		outer(b, sv[1], report[1]);
	close(report[1]);
	close(sv[1]);
	if (pid < 0 || (r = add()) == NULL) {
		close(report[0]), close(sv[0]);
		goto refused;
	}
	r->pid = pid, r->making = 1, r->report = report[0], r->chan = sv[0];
	return;
refused:
	snprintf(n, sizeof n, "%d", errno ? errno : EAGAIN);
	send_words(sock, -1, "nospare", n, NULL);
}

/* The outer child ended: the run's init waits for its request, and the host gets
 * its channel; or the namespace could not be made. */
static void made(struct run *r, int sock)
{
	char buf[4096], rid[24], *line, *why = NULL;
	ssize_t got = read(r->report, buf, sizeof buf - 1);
	int again = 0;
	pid_t init = 0;
	size_t i;

	close(r->report);
	buf[got > 0 ? got : 0] = '\0';
	for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == 'P')
			init = (pid_t)atoi(line + 1);
		else if (line[0] == 'S' && why == NULL)
			why = line + 1;
		else if (line[0] == 'A')
			again = 1;
	}
	if (init > 0) {
		snprintf(rid, sizeof rid, "%ld", ++next_rid);
		send_words(sock, r->chan, "spare", rid, NULL);
		close(r->chan);
		r->making = 0, r->pid = init, r->rid = next_rid;
		for (i = 0; i < nearly; i++)
			if (early[i] == init) {
				/* Ended already: the host reads what it said. */
				early[i] = early[--nearly];
				drop(r);
				break;
			}
		return;
	}
	close(r->chan);
	drop(r);
	if (why == NULL && again) {
		/* No process at the box's bound: the run asked for fails as a fork there
		 * does, and the box stays whole. */
		snprintf(rid, sizeof rid, "%d", EAGAIN);
		send_words(sock, -1, "nospare", rid, NULL);
		return;
	}
	snprintf(broken, sizeof broken, "%s", why ? why : "a run's namespace could not be made");
	send_words(sock, -1, "broken", broken, NULL);
}

static void reap(int sock)
{
	char rid[24];
	struct run *r;
	pid_t pid;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
		r = find(pid);
		if (r == NULL) {
			if (nearly < sizeof early / sizeof *early)
				early[nearly++] = pid;
			else if (!broken[0])
				/* A run could then keep a pid reused by another: no more. */
				snprintf(broken, sizeof broken, "%s",
					 "too many runs ended before they were made");
			continue;
		}
		if (r->making) {
			made(r, sock);
			continue;
		}
		if (r->killed) {
			snprintf(rid, sizeof rid, "%ld", r->rid);
			send_words(sock, -1, "ended", rid, NULL);
		}
		drop(r);
	}
}

/* One request from the host; 0 at the host's end. */
static int request(struct box *b, int sock, char *buf)
{
	automessage struct message m = { NULL, 0, NULL };
	ssize_t got = recv(sock, buf, MAX_MESSAGE, 0);
	size_t i;

	if (got < 0 && errno == EINTR)
		return 1;
	if (got <= 0 || unpack(buf, (size_t)got, &m) != 0)
		return 0;
	if (m.n && is(&m.f[0], "more")) {
		make(b, sock);
	} else if (m.n > 1 && is(&m.f[0], "kill")) {
		char *rid = text(&m.f[1]);
		long want = rid ? atol(rid) : -1;

		for (i = 0; i < nruns; i++)
			if (!runs[i].making && runs[i].rid == want)
				break;
		if (i == nruns) {
			send_words(sock, -1, "ended", rid ? rid : "", NULL);
		} else {
			/* The init: its end kills the rest of its namespace first. */
			runs[i].killed = 1;
			kill(runs[i].pid, SIGKILL);
		}
		free(rid);
	}
	return 1;
}

/* The starter could not start: said on the box's stderr, which the host reports
 * with the box's end. */
static int starting_failed(const char *what)
{
	say("harness-sandbox: the warm box's starter could not start: ", what, ": ",
	    errno ? strerror(errno) : "a message it could not read");
	return 2;
}

/* 0, 1 and 2 open, so that no descriptor of a run gets one of their numbers. */
static void standard_open(void)
{
	int fd;

	for (fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0) {
			/* The lowest free number, so `fd` itself: moved only if it is not. */
			int null = open("/dev/null", O_RDWR);

			if (null >= 0 && null != fd) {
				dup2(null, fd);
				close(null);
			}
		}
}

int warm_main(int argc, char **argv)
{
	static struct box b;
	automessage struct message m = { NULL, 0, NULL };
	struct pollfd p[2];
	autofree char *buf = malloc(MAX_MESSAGE);
	int self, sock, life[2];
	sigset_t chld;
	ssize_t got;
	size_t i;

	if (argc != 6 || buf == NULL || (self = (int)count(argv[2], 1 << 20)) < 0 ||
	    (sock = (int)count(argv[3], 1 << 20)) < 0) {
		say("usage: guardinit warm FD SOCK PYTHON GUARDMAIN", "", "", "");
		return 2;
	}
	close(self);
	standard_open();
	signal(SIGPIPE, SIG_IGN);
	b.sup.python = argv[4];
	b.sup.main = argv[5];
	b.sup.chan = -1;
	errno = 0;
	got = recv(sock, buf, MAX_MESSAGE, 0);
	if (got <= 0 || unpack(buf, (size_t)got, &m) != 0 || setup(&b, &m) != 0)
		return starting_failed("its setup from the host");
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 || pipe2(life, O_CLOEXEC) != 0)
		return starting_failed("becoming the box's reaper");
	/* life[1] is held open here only (close-on-exec, and closed in each outer
	 * child): each run reads life[0] to know this process lives. */
	b.life = life[0];
	fcntl(b.life, F_SETFL, O_NONBLOCK);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &b.mask);
	p[0].fd = sock, p[0].events = POLLIN;
	p[1].fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK), p[1].events = POLLIN;
	if (p[1].fd < 0)
		return starting_failed("signalfd");
	send_words(sock, -1, "ready", NULL);
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents) {
			struct signalfd_siginfo info;

			while (read(p[1].fd, &info, sizeof info) == sizeof info)
				;
			reap(sock);
		}
		if (p[0].revents && !request(&b, sock, buf))
			break;
	}
	for (i = 0; i < nruns; i++)
		kill(runs[i].pid, SIGKILL);
	return 0;
}
