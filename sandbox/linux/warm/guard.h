/*
 * guard.h - what the compiled launchers share: the Unix-socket guard's arming,
 * its fast path and its supervisor (guardcore.c), for the box per run's launcher
 * (guardinit.c) and the warm box's starter (warmstart.c).
 */

#ifndef GUARD_H
#define GUARD_H

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

/* Who judges what the fast path cannot: the interpreter and entry it is started by. */
struct supervisor {
	const char *python;        /* the interpreter of the supervisor */
	const char *main;          /* its entry, guardmain.py */
	char **guard;              /* N ROOT... M SOCKET..., for the supervisor */
	int guard_len;
	int chan;                  /* a warm run's channel to the host, or -1 */
};

/* The supervising side's state. */
struct state {
	const struct supervisor *sup;
	pid_t child;               /* the command */
	int listener;              /* the guard's listener, or -1 once it has hung up */
	int signals;               /* a signalfd of SIGCHLD */
	sigset_t mask;             /* the signal mask given, for each exec */
	sigset_t chld;             /* SIGCHLD alone, blocked here */
	int ptrace;                /* CAP_SYS_PTRACE kept (to hand the supervisor) */
	int refusing;              /* the supervisor could not start: refuse */
};

/*
 * What a variable holds is freed, or closed, when it goes out of scope, as
 * bubblewrap's utils.h does it: an error path cannot leak it. What is kept is
 * taken out first (steal_pointer, steal_fd), which leaves nothing to free.
 */
#define autofree __attribute__((cleanup(free_pointer)))
#define autofd __attribute__((cleanup(close_fd)))

static inline void free_pointer(void *p)
{
	free(*(void **)p);
}

/* errno kept: a failed call's reason outlives the descriptors closed after it. */
static inline void close_fd(int *fd)
{
	int err = errno;

	if (*fd >= 0)
		close(*fd);
	errno = err;
}

static inline void *steal_pointer(void *p)
{
	void *was = *(void **)p;

	*(void **)p = NULL;
	return was;
}

static inline int steal_fd(int *fd)
{
	int was = *fd;

	*fd = -1;
	return was;
}

void say(const char *a, const char *b, const char *c, const char *d);
long count(const char *s, long max);
int keep_only(int keep);
/* CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER (sandbox/linux/standin.py's OWNER_CAPS). */
#define OWNER_CAPS ((1U << 0) | (1U << 1) | (1U << 3))
int keep_held(uint32_t mask);
int load(const struct sock_fprog *prog);
int take_listener(pid_t pid, int sock);
int arm_command(const struct sock_fprog *guard, int sock, const char **what);
int exit_code(int status);
int supervise(struct state *s);
int warm_main(int argc, char **argv);

#endif
