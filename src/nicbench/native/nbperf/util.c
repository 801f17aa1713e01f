// SPDX-License-Identifier: GPL-2.0
/* nbperf: clocks, errors, argument parsing, output, socket options. */
#include "nbperf.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct global G = { .lock = PTHREAD_MUTEX_INITIALIZER, .notify_fd = -1, .rt_start = 1 };

/* Without a clock there is no test: every time nbperf prints, every start
 * and deadline comes from it (clock_gettime only fails for a clock this
 * kernel lacks). */
int64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts))
		die(EX_ERR, "clock_gettime(CLOCK_REALTIME): %s", strerror(errno));
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

int64_t mono_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		die(EX_ERR, "clock_gettime(CLOCK_MONOTONIC): %s", strerror(errno));
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

/* Messages are one line: nicbench shows the last stderr line in its errors. */
void sanitize(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r' || *s == '\t')
			*s = ' ';
}

void die(int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sanitize(msg);
	out_drain();
	fprintf(stderr, "nbperf: error: %s\n", msg);
	exit(code);
}

/* The first error wins: later ones are usually its consequences. */
void set_error(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&G.lock);
	if (!G.first_error[0]) {
		va_start(ap, fmt);
		vsnprintf(G.first_error, sizeof(G.first_error), fmt, ap);
		va_end(ap);
		sanitize(G.first_error);
	}
	pthread_mutex_unlock(&G.lock);
}

/* A whole number with an optional binary suffix: K, M, G (x1024). */
int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'K': v <<= 10; end++; break;
	case 'M': v <<= 20; end++; break;
	case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* bits/s with an optional decimal suffix: K, M, G (x1000), as rates are quoted. */
int parse_rate(const char *s, uint64_t *out)
{
	char *end;
	double v;

	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || !isfinite(v) || v < 0)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'K': v *= 1e3; end++; break;
	case 'M': v *= 1e6; end++; break;
	case 'G': v *= 1e9; end++; break;
	default: break;
	}
	if (*end || v > 1e13)
		return -1;
	*out = (uint64_t)llround(v);
	return 0;
}

int parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < 0)
		return -1;
	*out = v;
	return 0;
}

/* CLOCK_REALTIME seconds since the epoch with up to 9 decimals, parsed
 * exactly (a double would round to ~0.2 us); "+S" means S from now. */
int parse_abs_time(const char *s, int64_t *out_ns)
{
	int64_t sec = 0, frac = 0;
	int digits = 0;
	const char *q;

	if (!s || !*s)
		return -1;
	if (*s == '+') {
		double rel;

		if (parse_seconds(s + 1, &rel) || rel > 1e6)
			return -1;
		*out_ns = now_ns() + (int64_t)llround(rel * 1e9);
		return 0;
	}
	for (q = s; isdigit((unsigned char)*q); q++) {
		if (sec > 100000000000ll)
			return -1;
		sec = sec * 10 + (*q - '0');
	}
	if (q == s)
		return -1;
	if (*q == '.') {
		for (q++; isdigit((unsigned char)*q); q++) {
			if (digits < 9) {
				frac = frac * 10 + (*q - '0');
				digits++;
			}
		}
	}
	if (*q)
		return -1;
	for (; digits < 9; digits++)
		frac *= 10;
	*out_ns = sec * NS + frac;
	return 0;
}

/* "0,2,4-7" */
int parse_cpus(const char *s, int *cpus, int max)
{
	int n = 0;
	const char *p = s;

	while (*p) {
		char *end;
		long a = strtol(p, &end, 10), b;

		if (end == p || a < 0 || a >= CPU_SETSIZE)
			return -1;
		b = a;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b >= CPU_SETSIZE)
				return -1;
			p = end;
		}
		for (long c = a; c <= b; c++) {
			if (n == max)
				return -1;
			cpus[n++] = (int)c;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return n;
}

/* The CPUs this process may run on, in order (taskset / cgroups respected). */
int default_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

/* The first CPU of the list this process may not run on, or -1. */
int cpu_not_allowed(const int *cpus, int n)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -1;
	for (int i = 0; i < n; i++)
		if (!CPU_ISSET(cpus[i], &set))
			return cpus[i];
	return -1;
}

/* close() releases the descriptor whatever it returns (Linux), and what
 * nbperf closes -- sockets it is done with, never a file it wrote -- has
 * nothing an error could still report: the result is not looked at. */
void release_fd(int fd)
{
	if (fd >= 0)
		(void)close(fd);
}

void notify(int fd)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* an eventfd only refuses at 2^64-1 pending: nothing to do */
	}
}

void drain_fd(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending */
	}
}

/* Output goes through one writer thread: a worker appends whole lines to a
 * queue and goes on, so a reader that is slow (or stopped) can never stall a
 * connection or shift its timing -- the queue grows instead.  A reader that
 * went away (EPIPE) loses the output; the run still ends on time. */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER, dcond = PTHREAD_COND_INITIALIZER;
static char *qbuf;
static size_t qlen, qcap;
static int writer_on, writer_busy;
static pthread_t writer_tid;

static void write_all(const char *s, size_t n)
{
	while (n) {
		ssize_t k = write(STDOUT_FILENO, s, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		s += k;
		n -= (size_t)k;
	}
}

/* Started with every signal blocked (out_start): the main thread takes them. */
static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&qlock);
	for (;;) {
		while (!qlen)
			pthread_cond_wait(&qcond, &qlock);
		char *b = qbuf;
		size_t n = qlen;

		qbuf = NULL;
		qlen = qcap = 0;
		writer_busy = 1;
		pthread_mutex_unlock(&qlock);
		write_all(b, n);
		free(b);
		pthread_mutex_lock(&qlock);
		writer_busy = 0;
		pthread_cond_broadcast(&dcond);
	}
	return NULL;
}

void out_start(void)
{
	sigset_t all, old;
	int rc;

	/* the new thread inherits this thread's mask: every signal blocked */
	sigfillset(&all);
	rc = pthread_sigmask(SIG_BLOCK, &all, &old);
	if (rc)
		die(EX_ERR, "pthread_sigmask: %s", strerror(rc));
	if (pthread_create(&writer_tid, NULL, writer_main, NULL) == 0) {
		/* it never ends; detach only fails for a thread that is not joinable */
		(void)pthread_detach(writer_tid);
		writer_on = 1;
	}
	/* (no writer thread: out_write then writes each line itself, as before out_start) */
	rc = pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		die(EX_ERR, "pthread_sigmask: %s", strerror(rc));
}

void out_write(const char *s, size_t n)
{
	if (!writer_on) {
		pthread_mutex_lock(&qlock);
		write_all(s, n);
		pthread_mutex_unlock(&qlock);
		return;
	}
	pthread_mutex_lock(&qlock);
	if (qlen + n > qcap) {
		size_t cap = (qlen + n) * 2 + 65536;
		char *b = realloc(qbuf, cap);

		if (!b) {
			pthread_mutex_unlock(&qlock);
			die(EX_ERR, "out of memory for output");
		}
		qbuf = b;
		qcap = cap;
	}
	memcpy(qbuf + qlen, s, n);
	qlen += n;
	pthread_cond_signal(&qcond);
	pthread_mutex_unlock(&qlock);
}

/* Everything queued is written: before the last line, the error and exit. */
void out_drain(void)
{
	pthread_mutex_lock(&qlock);
	if (!writer_on) {
		pthread_mutex_unlock(&qlock);
		return;
	}
	while (qlen || writer_busy) {
		pthread_cond_signal(&qcond);
		pthread_cond_wait(&dcond, &qlock);
	}
	pthread_mutex_unlock(&qlock);
}

void wo_printf(struct worker *w, const char *fmt, ...)
{
	va_list ap;
	int need;

	for (;;) {
		size_t room = w->outcap - w->outlen;

		va_start(ap, fmt);
		need = vsnprintf(w->out + w->outlen, room, fmt, ap);
		va_end(ap);
		if (need < 0)
			return;
		if ((size_t)need < room) {
			w->outlen += (size_t)need;
			return;
		}
		w->outcap = (w->outcap + (size_t)need + 1) * 2;
		w->out = realloc(w->out, w->outcap);
		if (!w->out)
			die(EX_ERR, "out of memory for output");
	}
}

void wo_flush(struct worker *w)
{
	if (w->outlen) {
		out_write(w->out, w->outlen);
		w->outlen = 0;
	}
}

double tv_s(long sec, long usec)
{
	return (double)sec + (double)usec / 1e6;
}

/* end.rt_start: SCHED_FIFO around the start off (--no-rt-start), refused by
 * the kernel, or on.  Read after the workers were joined. */
const char *rt_start_word(void)
{
	if (!G.rt_start)
		return "off";
	return atomic_load_explicit(&G.rt_refused, memory_order_relaxed) ? "refused" : "on";
}

const char *dir_name(int d)
{
	return d == D_TX ? "tx" : d == D_RX ? "rx" : "bidir";
}

const char *proto_name(int p)
{
	return p == P_UDP ? "udp" : "tcp";
}

const char *send_name(int s)
{
	static const char *n[] = { "send", "sendmsg", "zerocopy", "sendfile" };

	return s >= 0 && s <= S_SENDFILE ? n[s] : "?";
}

const char *recv_name(int r)
{
	return r == R_TRUNC ? "trunc" : "copy";
}

void json_str(char *dst, size_t n, const char *s)
{
	size_t o = 0;

	if (n < 3)
		return;
	dst[o++] = '"';
	for (; *s && o + 8 < n; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			dst[o++] = '\\';
			dst[o++] = (char)ch;
		} else if (ch < 0x20) {
			o += (size_t)snprintf(dst + o, n - o, "\\u%04x", ch);
		} else {
			dst[o++] = (char)ch;
		}
	}
	dst[o++] = '"';
	dst[o] = 0;
}

/* Raise the soft RLIMIT_NOFILE to cover `need` if the hard limit allows. */
int raise_nofile(uint64_t need, uint64_t *soft, uint64_t *hard)
{
	struct rlimit rl;

	*soft = *hard = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -1;
	if (rl.rlim_cur < need && rl.rlim_max >= need) {
		rl.rlim_cur = need;
		/* a refusal shows in the limit read back */
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		if (getrlimit(RLIMIT_NOFILE, &rl))
			return -1;
	}
	*soft = rl.rlim_cur;
	*hard = rl.rlim_max;
	return rl.rlim_cur >= need ? 0 : -1;
}

int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void addr_str(const struct sockaddr_storage *ss, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;

		if (!inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip)))
			snprintf(ip, sizeof(ip), "?");
		port = ntohs(a->sin_port);
		snprintf(buf, n, "%s:%d", ip, port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;

		if (!inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip)))
			snprintf(ip, sizeof(ip), "?");
		port = ntohs(a->sin6_port);
		/* an IPv4 client of a dual-stack listener: show it as IPv4 */
		if (!strncmp(ip, "::ffff:", 7) && strchr(ip + 7, '.'))
			snprintf(buf, n, "%s:%d", ip + 7, port);
		else
			snprintf(buf, n, "[%s]:%d", ip, port);
	} else {
		snprintf(buf, n, "?");
	}
}

static int opt_int(int fd, int level, int name, int val, const char *what, char *why, size_t whysz)
{
	if (setsockopt(fd, level, name, &val, sizeof(val)) == 0)
		return 0;
	snprintf(why, whysz, "%s %d refused: %s", what, val, strerror(errno));
	return -1;
}

/* The test's socket options, on a TCP connection (tcp = 1) or a UDP socket. */
int apply_sock_opts(int fd, const struct params *p, int will_send, int tcp, char *why, size_t whysz)
{
	if (p->sndbuf && opt_int(fd, SOL_SOCKET, SO_SNDBUF, (int)p->sndbuf, "SO_SNDBUF", why, whysz))
		return -1;
	if (p->rcvbuf && opt_int(fd, SOL_SOCKET, SO_RCVBUF, (int)p->rcvbuf, "SO_RCVBUF", why, whysz))
		return -1;
	if (p->busy_poll && opt_int(fd, SOL_SOCKET, SO_BUSY_POLL, (int)p->busy_poll, "SO_BUSY_POLL", why, whysz))
		return -1;
	if (!tcp)
		return 0;
	if (p->nodelay && opt_int(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY", why, whysz))
		return -1;
	if (p->mss && opt_int(fd, IPPROTO_TCP, TCP_MAXSEG, (int)p->mss, "TCP_MAXSEG", why, whysz))
		return -1;
	if (p->cc[0] && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, p->cc, strlen(p->cc))) {
		snprintf(why, whysz, "TCP_CONGESTION %s refused: %s (see net.ipv4.tcp_available_congestion_control)",
			 p->cc, strerror(errno));
		return -1;
	}
	if (will_send && p->send_mode == S_ZEROCOPY &&
	    opt_int(fd, SOL_SOCKET, SO_ZEROCOPY, 1, "SO_ZEROCOPY", why, whysz))
		return -1;
	return 0;
}

static void last_resort(int sig)
{
	static const char msg[] = "nbperf: error: still running past the hard deadline: exiting\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing more can be done */
	}
	_exit(EX_ERR);
}

/* If anything ever blocks the orderly end, SIGALRM ends the process a few
 * seconds after the hard deadline: the engine cannot outlive it. */
void hard_deadline_alarm(int64_t deadline_ns)
{
	int64_t left = deadline_ns - now_ns();
	unsigned s = left > 0 ? (unsigned)(left / NS) + 1 + LAST_RESORT_S : LAST_RESORT_S;

	if (signal(SIGALRM, last_resort) == SIG_ERR)
		die(EX_ERR, "cannot catch SIGALRM: %s", strerror(errno));
	alarm(s);                    /* returns the previous alarm's seconds: there was none */
}
