// SPDX-License-Identifier: GPL-2.0
/* nbperf server: one process per host, one port, any number of clients and
 * tests at once.  The main thread accepts every connection and reads its
 * hello: a control connection opens a session (one client process's test),
 * a data connection names its session and is handed to a worker thread
 * (round-robin, one pinned thread per CPU), which acks it and runs it.  When
 * the client's totals (DONE) have arrived and every data connection of the
 * session has finished, the server checks them against its own and answers
 * with its totals (RESULT).
 *
 * A session fails when its client goes away (control connection closed
 * before DONE), a connection fails, or the deadline passes; the server then
 * resets the session's connections and keeps serving the others.  The server
 * exits at --until (a hard deadline), on SIGTERM/SIGINT, or after --clients
 * sessions ended; non-zero if any session failed.
 */
#include "nbperf.h"

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define TS(ns) (long long)((ns) / NS), (long long)(((ns) % NS) / 1000)

enum { T_LISTEN = 1, T_SIGNAL = 2, T_NOTIFY = 3 };   /* epoll tags; else a pointer, low bit: 1 = session */

static const char USAGE[] =
	"usage: nbperf server (--until T | --lifetime S) [--port P] [--bind ADDR] [--threads N]\n"
	"         [--cpus LIST] [--clients N] [--no-rt-start]\n"
	"  T: CLOCK_REALTIME seconds since the epoch, or +S from now: the server stops then, whatever happens.\n"
	"  --clients N: exit once N client sessions have ended.\n";

struct pend {                    /* an accepted connection whose hello is not complete yet */
	struct pend *next;
	int fd;
	uint8_t buf[HELLO_LEN];
	uint32_t len;
	int64_t t;
	char peer[64];
};

static struct session *sessions;
static struct pend *pends;
static int epfd, sessions_ended, sessions_failed, rejected;
static unsigned next_worker;     /* round-robin; wraps (a signed int would overflow: undefined) */
static int64_t until_ns;

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void line(const char *fmt, ...)
{
	char b[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(b) - 2)
		n = (int)sizeof(b) - 2;
	b[n++] = '\n';
	out_write(b, (size_t)n);
}

static void reject(struct pend *q, const char *why)
{
	char peer[80], reason[300];

	json_str(peer, sizeof(peer), q->peer);
	json_str(reason, sizeof(reason), why);
	line("{\"event\":\"reject\",\"side\":\"server\",\"t\":%lld.%06lld,\"peer\":%s,\"reason\":%s}", TS(now_ns()),
	     peer, reason);
	rejected++;
}

static void pend_drop(struct pend *q, int close_fd)
{
	struct pend **pp = &pends;

	while (*pp && *pp != q)
		pp = &(*pp)->next;
	if (*pp)
		*pp = q->next;
	if (q->fd >= 0) {          /* -1: handed on to a session or a worker */
		/* ENOENT if it was never registered; the close takes it out anyway */
		(void)epoll_ctl(epfd, EPOLL_CTL_DEL, q->fd, NULL);
		if (close_fd)
			release_fd(q->fd);
	}
	free(q);
}

static void send_ack(int fd, uint32_t status, const char *msg)
{
	uint8_t b[ACK_LEN];
	struct ack a = { .status = status, .server_ns = now_ns() };

	snprintf(a.msg, sizeof(a.msg), "%s", msg ? msg : "");
	ack_encode(b, &a);
	if (send(fd, b, ACK_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* a peer that is gone needs no answer */
	}
}

static void refuse(struct pend *q, const char *why)
{
	send_ack(q->fd, 1, why);
	reject(q, why);
	pend_drop(q, 1);
}

static struct session *find_session(uint64_t id)
{
	for (struct session *s = sessions; s; s = s->next)
		if (s->p.session == id)
			return s;
	return NULL;
}

static void poke_workers(void)
{
	for (int i = 0; i < G.nworkers; i++)
		notify(G.w[i].evfd);
}

/* Called by a worker when one of its data connections finished. */
void session_conn_done(struct conn *c)
{
	struct session *s = c->sess;
	struct rec *r = &s->res[c->index];

	pthread_mutex_lock(&G.lock);
	r->tx_bytes = c->tx_bytes;
	r->rx_bytes = c->rx_bytes;
	r->tx_packets = c->tx_pkts;
	r->rx_packets = c->rx_pkts;
	r->status = c->failed ? 1 : 0;
	s->finished++;
	if (c->failed && !s->err[0])
		snprintf(s->err, sizeof(s->err), "connection %u from %s: %s", c->index, c->peer, c->err);
	pthread_mutex_unlock(&G.lock);
	notify(G.notify_fd);
}

static void session_fail(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void session_fail(struct session *s, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&G.lock);
	if (!s->err[0]) {
		va_start(ap, fmt);
		vsnprintf(s->err, sizeof(s->err), fmt, ap);
		va_end(ap);
		sanitize(s->err);
	}
	pthread_mutex_unlock(&G.lock);
	if (!flag_is(&s->aborted)) {
		flag_set(&s->aborted);
		poke_workers();
	}
}

static void ctl_close(struct session *s, int reset)
{
	if (s->ctl_fd < 0)
		return;
	if (reset) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		/* refused, the close is an orderly one: the client still learns of the end */
		(void)setsockopt(s->ctl_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	(void)epoll_ctl(epfd, EPOLL_CTL_DEL, s->ctl_fd, NULL);     /* the close takes it out anyway */
	release_fd(s->ctl_fd);
	s->ctl_fd = -1;
}

/* RESULT: this server's per-connection totals (the truth for what it received). */
static void send_result(struct session *s, uint32_t status, const char *msg)
{
	size_t n = status ? 0 : s->p.conns, len = SUMHDR_LEN + n * REC_LEN, put = 0;
	uint8_t *b = malloc(len);
	struct timeval tv = { .tv_sec = 2 };
	int fl;

	if (!b || s->ctl_fd < 0) {
		free(b);
		return;
	}
	sumhdr_encode(b, MAGIC_RESULT, status, (uint32_t)n, msg);
	for (size_t i = 0; i < n; i++)
		rec_encode(b + SUMHDR_LEN + i * REC_LEN, &s->res[i]);
	/* bounded blocking write: thousands of records may not fit the buffer at
	 * once.  Without the bound (SO_SNDTIMEO refused) it must not block at all:
	 * a result that does not fit is cut, which the client reports */
	fl = status || setsockopt(s->ctl_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ? MSG_DONTWAIT : 0;
	while (put < len) {
		ssize_t k = send(s->ctl_fd, b + put, len - put, MSG_NOSIGNAL | fl);

		if (k <= 0)
			break;
		put += (size_t)k;
	}
	free(b);
}

static void session_end(struct session *s)
{
	char test[80], peer[80], err[300];
	uint64_t tx = 0, rx = 0, ctx = 0, crx = 0;
	int ok = s->state == SS_OK;

	for (uint32_t i = 0; i < s->p.conns; i++) {
		tx += s->res[i].tx_bytes;
		rx += s->res[i].rx_bytes;
		if (s->client_recs) {
			ctx += s->client_recs[i].tx_bytes;
			crx += s->client_recs[i].rx_bytes;
		}
	}
	json_str(test, sizeof(test), s->p.test);
	json_str(peer, sizeof(peer), s->peer);
	json_str(err, sizeof(err), s->err);
	char client[80] = "\"client_tx_bytes\":null,\"client_rx_bytes\":null";

	if (s->got_done)
		snprintf(client, sizeof(client), "\"client_tx_bytes\":%llu,\"client_rx_bytes\":%llu",
			 (unsigned long long)ctx, (unsigned long long)crx);
	line("{\"event\":\"session_end\",\"side\":\"server\",\"test\":%s,\"session\":\"%016llx\",\"peer\":%s,"
	     "\"t\":%lld.%06lld,\"status\":\"%s\",\"error\":%s,\"conns\":%u,\"connected\":%u,\"tx_bytes\":%llu,"
	     "\"rx_bytes\":%llu,%s}", test, (unsigned long long)s->p.session, peer, TS(now_ns()), ok ? "ok" : "error",
	     err, s->p.conns, s->connected, (unsigned long long)tx, (unsigned long long)rx, client);
	sessions_ended++;
	if (!ok) {
		sessions_failed++;
		set_error("test %s from %s: %s", s->p.test, s->peer, s->err);
	}
}

/* Decide what a session's state allows: finish it well, or fail it. */
static void session_check(struct session *s, int64_t now)
{
	uint32_t finished, connected;
	bool failed;

	if (s->state != SS_ACTIVE)
		return;
	/* a worker writes s->err (session_conn_done) under G.lock: read it so too */
	pthread_mutex_lock(&G.lock);
	failed = s->err[0] != 0;
	pthread_mutex_unlock(&G.lock);
	if (now >= s->deadline_ns && !failed)
		session_fail(s, "not finished by the deadline (start + duration + grace)");
	pthread_mutex_lock(&G.lock);
	finished = s->finished;
	connected = s->connected;
	failed = s->err[0] != 0;
	pthread_mutex_unlock(&G.lock);
	/* once every connection finished, no worker writes s->err any more */
	if (failed || flag_is(&s->aborted)) {
		if (finished < connected)
			return;          /* the workers are still resetting its connections */
		send_result(s, 1, s->err);
		ctl_close(s, 1);
		s->state = SS_FAILED;
		session_end(s);
		return;
	}
	if (!s->got_done || finished < s->p.conns)
		return;
	if (s->done_status) {
		session_fail(s, "the client reported a failed connection");
		session_check(s, now);
		return;
	}
	/* TCP: every byte one end sent, the other received */
	for (uint32_t i = 0; s->p.proto == P_TCP && i < s->p.conns; i++) {
		const struct rec *c = &s->client_recs[i], *m = &s->res[i];

		if ((s->p.dir != D_RX && c->tx_bytes != m->rx_bytes) || (s->p.dir != D_TX && c->rx_bytes != m->tx_bytes)) {
			session_fail(s, "connection %u: bytes disagree (client sent %llu, received %llu; server "
				     "received %llu, sent %llu)", i, (unsigned long long)c->tx_bytes,
				     (unsigned long long)c->rx_bytes, (unsigned long long)m->rx_bytes,
				     (unsigned long long)m->tx_bytes);
			session_check(s, now);
			return;
		}
	}
	send_result(s, 0, "");
	ctl_close(s, 0);
	s->state = SS_OK;
	session_end(s);
}

static void ctl_read(struct session *s)
{
	for (;;) {
		ssize_t k = recv(s->ctl_fd, s->dbuf + s->dlen, s->dneed - s->dlen, MSG_DONTWAIT);

		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k <= 0) {
			session_fail(s, "the client went away before the end of the test (control connection %s): "
				     "killed or aborted?", k == 0 ? "closed" : strerror(errno));
			ctl_close(s, 0);
			return;
		}
		s->dlen += (size_t)k;
		if (magic_prefix_ok(s->dbuf, s->dlen, MAGIC_DONE)) {
			session_fail(s, "garbled totals on the control connection");
			ctl_close(s, 1);
			return;
		}
		if (s->dlen == SUMHDR_LEN && s->dneed == SUMHDR_LEN) {
			uint32_t n;

			sumhdr_decode(s->dbuf, &s->done_status, &n, NULL, 0);
			if (n != s->p.conns) {
				session_fail(s, "the client's totals name %u connections, not %u", n, s->p.conns);
				ctl_close(s, 1);
				return;
			}
			s->dneed = SUMHDR_LEN + (size_t)n * REC_LEN;
			s->dbuf = realloc(s->dbuf, s->dneed);
			if (!s->dbuf)
				die(EX_ERR, "out of memory");
		}
		if (s->dlen == s->dneed && s->dneed > SUMHDR_LEN) {
			for (uint32_t i = 0; i < s->p.conns; i++)
				rec_decode(s->dbuf + SUMHDR_LEN + (size_t)i * REC_LEN, &s->client_recs[i]);
			s->got_done = 1;
			return;
		}
	}
}

static void open_session(struct pend *q, const struct hello *h)
{
	struct session *s;
	int64_t now = now_ns(), end = h->p.start_ns + h->p.duration_ns;
	char why[200], test[80], peer[80];

	if (find_session(h->p.session)) {
		refuse(q, "this session is already open here");
		return;
	}
	if (end < now) {
		snprintf(why, sizeof(why), "the test's end is %.3f s in the past on this server's clock: do the clocks "
			 "agree?", (double)(now - end) / 1e9);
		refuse(q, why);
		return;
	}
	if (h->p.start_ns - now > MAX_AHEAD_NS + 5 * NS) {
		refuse(q, "the start is more than 60 s ahead on this server's clock: do the clocks agree?");
		return;
	}
	if (end + h->p.grace_ns > until_ns) {
		snprintf(why, sizeof(why), "this server stops at %lld.%03lld (--until), before the test's end",
			 (long long)(until_ns / NS), (long long)(until_ns % NS / 1000000));
		refuse(q, why);
		return;
	}
	/* this host's refusals (a congestion control it lacks...) show up now,
	 * on the control connection, before any data connection */
	if (apply_sock_opts(q->fd, &h->p, h->p.dir != D_TX, h->p.proto == P_TCP, why, sizeof(why))) {
		refuse(q, why);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->seen = calloc(h->p.conns, 1)) || !(s->res = calloc(h->p.conns, sizeof(*s->res))) ||
	    !(s->client_recs = calloc(h->p.conns, sizeof(*s->client_recs))) || !(s->dbuf = malloc(SUMHDR_LEN)))
		die(EX_ERR, "out of memory");
	/* the connection's events are the session's from now on */
	struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)(uintptr_t)s | 1 };

	if (epoll_ctl(epfd, EPOLL_CTL_MOD, q->fd, &e)) {
		snprintf(why, sizeof(why), "epoll_ctl: %s", strerror(errno));
		free(s->seen);
		free(s->res);
		free(s->client_recs);
		free(s->dbuf);
		free(s);
		refuse(q, why);
		return;
	}
	atomic_init(&s->aborted, false);
	s->p = h->p;
	s->ctl_fd = q->fd;
	s->dneed = SUMHDR_LEN;
	s->state = SS_ACTIVE;
	s->started_ns = now;
	/* a second beyond the connections' own deadline, so they report their own reason first */
	s->deadline_ns = end + h->p.grace_ns + NS;
	snprintf(s->peer, sizeof(s->peer), "%s", q->peer);
	s->next = sessions;
	sessions = s;
	send_ack(s->ctl_fd, 0, "");
	json_str(test, sizeof(test), s->p.test);
	json_str(peer, sizeof(peer), s->peer);
	line("{\"event\":\"session_start\",\"side\":\"server\",\"test\":%s,\"session\":\"%016llx\",\"peer\":%s,"
	     "\"t\":%lld.%06lld,\"start\":%lld.%06lld,\"duration\":%.6f,\"interval\":%.6f,\"grace\":%.6f,"
	     "\"proto\":\"%s\",\"dir\":\"%s\",\"io\":%u,\"conns\":%u,\"send\":\"%s\",\"recv\":\"%s\",\"rate\":%llu,"
	     "\"sndbuf\":%u,\"rcvbuf\":%u,\"mss\":%u,\"nodelay\":%s,\"congestion\":\"%s\",\"busy_poll\":%u}",
	     test, (unsigned long long)s->p.session, peer, TS(now), TS(s->p.start_ns), s->p.duration_ns / 1e9,
	     s->p.interval_ns / 1e9, s->p.grace_ns / 1e9, proto_name(s->p.proto), dir_name(s->p.dir), s->p.io,
	     s->p.conns, send_name(s->p.send_mode), recv_name(s->p.recv_mode), (unsigned long long)s->p.rate_bps,
	     s->p.sndbuf, s->p.rcvbuf, s->p.mss, s->p.nodelay ? "true" : "false", s->p.cc, s->p.busy_poll);
	q->fd = -1;
	pend_drop(q, 0);
}

static void data_conn(struct pend *q, const struct hello *h)
{
	struct session *s = find_session(h->p.session);
	struct conn *c;

	if (!s || s->state != SS_ACTIVE || flag_is(&s->aborted)) {
		refuse(q, s ? "this session has ended" : "no such session here (its control connection comes first)");
		return;
	}
	if (h->conn_index >= s->p.conns || s->seen[h->conn_index]) {
		refuse(q, "connection index out of range or repeated");
		return;
	}
	/* from now on the worker's epoll set watches it, not this thread's */
	if (epoll_ctl(epfd, EPOLL_CTL_DEL, q->fd, NULL)) {
		char why[100];

		snprintf(why, sizeof(why), "epoll_ctl: %s", strerror(errno));
		refuse(q, why);
		return;
	}
	c = malloc(sizeof(*c));
	if (!c)
		die(EX_ERR, "out of memory");
	conn_init(c, &s->p, h->conn_index, SIDE_SERVER);
	c->fd = q->fd;
	c->sess = s;
	c->state = CS_NEW;
	c->peer_udp_port = h->udp_port;
	snprintf(c->peer, sizeof(c->peer), "%s", q->peer);
	s->seen[h->conn_index] = 1;
	pthread_mutex_lock(&G.lock);
	s->connected++;
	pthread_mutex_unlock(&G.lock);
	q->fd = -1;
	pend_drop(q, 0);
	worker_handoff(&G.w[next_worker++ % (unsigned)G.nworkers], c);
}

static void pend_read(struct pend *q)
{
	for (;;) {
		ssize_t k = recv(q->fd, q->buf + q->len, HELLO_LEN - q->len, MSG_DONTWAIT);
		char hex[24] = "", why[200];

		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k <= 0) {
			snprintf(why, sizeof(why), "closed before its handshake was complete (%u bytes)", q->len);
			reject(q, why);
			pend_drop(q, 1);
			return;
		}
		q->len += (uint32_t)k;
		if (magic_prefix_ok(q->buf, q->len, MAGIC_HELLO)) {
			for (uint32_t i = 0; i < q->len && i < 8; i++)
				snprintf(hex + 2 * i, sizeof(hex) - 2 * i, "%02x", q->buf[i]);
			snprintf(why, sizeof(why), "not an nbperf client (first bytes %s)", hex);
			reject(q, why);
			pend_drop(q, 1);
			return;
		}
		if (q->len < HELLO_LEN)
			continue;
		struct hello h;
		uint32_t v = hello_version(q->buf);
		const char *bad;

		if (v != PROTO_VERSION) {
			snprintf(why, sizeof(why), "protocol version %u; this server (nbperf %s) speaks %u", v,
				 NBPERF_VERSION, PROTO_VERSION);
			refuse(q, why);
			return;
		}
		hello_decode(q->buf, &h);
		if ((bad = params_check(&h.p))) {
			refuse(q, bad);
			return;
		}
		if (h.kind == K_CONTROL)
			open_session(q, &h);
		else if (h.kind == K_DATA)
			data_conn(q, &h);
		else
			refuse(q, "unknown connection kind");
		return;
	}
}

static void accept_all(int lfd)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return;
			if (errno == EMFILE || errno == ENFILE) {
				struct rlimit rl;

				if (getrlimit(RLIMIT_NOFILE, &rl))
					set_error("out of file descriptors: raise the server's limit (ulimit -n)");
				else
					set_error("out of file descriptors (limit %llu): raise the server's limit "
						  "(ulimit -n)", (unsigned long long)rl.rlim_cur);
				flag_set(&G.stop);
				return;
			}
			set_error("accept: %s", strerror(errno));
			flag_set(&G.stop);
			return;
		}
		struct pend *q = calloc(1, sizeof(*q));

		if (!q)
			die(EX_ERR, "out of memory");
		q->fd = fd;
		q->t = now_ns();
		addr_str(&ss, q->peer, sizeof(q->peer));
		q->next = pends;
		pends = q;
		struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)(uintptr_t)q };

		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e)) {
			char why[100];

			snprintf(why, sizeof(why), "cannot watch the connection (epoll_ctl: %s)", strerror(errno));
			reject(q, why);
			pend_drop(q, 1);
		}
	}
}

static int listen_on(const char *bind_addr, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res;
	const char *host = bind_addr ? bind_addr : "::";
	int rc = getaddrinfo(host, port, &hints, &res), fd, one = 1, zero = 0;

	if (rc && !bind_addr)          /* no IPv6 here: IPv4 only */
		rc = getaddrinfo(host = "0.0.0.0", port, &hints, &res);
	if (rc)
		die(EX_USAGE, "--bind %s --port %s: %s", host, port, gai_strerror(rc));
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 && !bind_addr) {
		freeaddrinfo(res);
		if (getaddrinfo(host = "0.0.0.0", port, &hints, &res))
			die(EX_ERR, "cannot resolve 0.0.0.0");
		fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	}
	if (fd < 0)
		die(EX_ERR, "socket: %s", strerror(errno));
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		die(EX_ERR, "SO_REUSEADDR refused: %s", strerror(errno));
	if (res->ai_family == AF_INET6 && !bind_addr &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)))    /* IPv4 clients too */
		die(EX_ERR, "IPV6_V6ONLY 0 refused: %s (give --bind 0.0.0.0 for IPv4 only)", strerror(errno));
	if (bind(fd, res->ai_addr, res->ai_addrlen))
		die(errno == EADDRNOTAVAIL ? EX_USAGE : EX_ERR, "cannot listen on %s port %s: %s%s", host, port,
		    strerror(errno), errno == EADDRINUSE ? " (another server, nbperf or iperf3, has that port?)" : "");
	if (listen(fd, 4096))
		die(EX_ERR, "listen: %s", strerror(errno));
	freeaddrinfo(res);
	return fd;
}

static void end_line(const char *status)
{
	char err[500], threads[8192], b[10000];
	size_t o = 0;
	struct rusage ru;

	o += (size_t)snprintf(threads + o, sizeof(threads) - o, "[");
	for (int i = 0; i < G.nworkers && o < sizeof(threads); i++)
		o += (size_t)snprintf(threads + o, sizeof(threads) - o,
				      "%s{\"thread\":%d,\"cpu\":%d,\"utime\":%.6f,\"stime\":%.6f}", i ? "," : "", i,
				      G.w[i].cpu, G.w[i].utime, G.w[i].stime);
	if (o < sizeof(threads))
		snprintf(threads + o, sizeof(threads) - o, "]");
	json_str(err, sizeof(err), G.first_error);
	if (getrusage(RUSAGE_SELF, &ru))
		memset(&ru, 0, sizeof(ru));      /* cannot fail with these arguments: zeros, not garbage */
	snprintf(b, sizeof(b), "{\"event\":\"end\",\"side\":\"server\",\"t\":%lld.%06lld,\"status\":\"%s\","
		 "\"error\":%s,\"sessions\":%d,\"failed\":%d,\"rejected\":%d,\"rt_start\":\"%s\",\"threads\":%s,"
		 "\"process\":{\"utime\":%.6f,\"stime\":%.6f}}\n", TS(now_ns()), status, err, sessions_ended,
		 sessions_failed, rejected, rt_start_word(), threads, tv_s(ru.ru_utime.tv_sec, ru.ru_utime.tv_usec),
		 tv_s(ru.ru_stime.tv_sec, ru.ru_stime.tv_usec));
	out_write(b, strlen(b));
}

int cmd_server(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, 0, 'p' }, { "bind", required_argument, 0, 'B' },
		{ "threads", required_argument, 0, 'T' }, { "cpus", required_argument, 0, 'A' },
		{ "until", required_argument, 0, 'U' }, { "lifetime", required_argument, 0, 'L' },
		{ "clients", required_argument, 0, 'n' }, { "no-rt-start", no_argument, 0, 'Z' },
		{ "help", no_argument, 0, 'h' }, { 0 } };
	const char *port = "5301", *bind_addr = NULL, *cpus_s = NULL;
	int threads = 0, cpus[MAX_THREADS], ncpus, opt, lfd, sfd, want_clients = 0, stopped_by = 0;
	uint64_t v, soft, hard;
	double life;

	G.side = SIDE_SERVER;
	until_ns = 0;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p': port = optarg; break;
		case 'B': bind_addr = optarg; break;
		case 'T':
			if (parse_size(optarg, &v) || v < 1 || v > MAX_THREADS)
				die(EX_USAGE, "--threads %s: want 1..%d", optarg, MAX_THREADS);
			threads = (int)v;
			break;
		case 'A': cpus_s = optarg; break;
		case 'U':
			if (parse_abs_time(optarg, &until_ns))
				die(EX_USAGE, "--until %s: want CLOCK_REALTIME seconds since the epoch, or +S", optarg);
			break;
		case 'L':
			if (parse_seconds(optarg, &life) || life <= 0 || life > MAX_DURATION_S)
				die(EX_USAGE, "--lifetime %s: want seconds > 0", optarg);
			until_ns = now_ns() + (int64_t)(life * 1e9);
			break;
		case 'n':
			if (parse_size(optarg, &v) || v < 1 || v > 1000000)
				die(EX_USAGE, "--clients %s: want a count >= 1", optarg);
			want_clients = (int)v;
			break;
		case 'Z': G.rt_start = 0; break;
		case 'h': fputs(USAGE, stdout); exit(EX_OK);
		case ':': die(EX_USAGE, "option %s needs a value (see nbperf server --help)", argv[optind - 1]);
		default: die(EX_USAGE, "unknown option %s (see nbperf server --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(EX_USAGE, "unexpected argument %s (see nbperf server --help)", argv[optind]);
	if (!until_ns)
		die(EX_USAGE, "the server needs a hard deadline: --until T or --lifetime S");
	if (until_ns <= now_ns())
		die(EX_USAGE, "--until is %.3f s in the past", (double)(now_ns() - until_ns) / 1e9);
	ncpus = cpus_s ? parse_cpus(cpus_s, cpus, MAX_THREADS) : default_cpus(cpus, MAX_THREADS);
	if (ncpus <= 0)
		die(EX_USAGE, "--cpus %s: want CPU numbers like 0,1 or 0-3", cpus_s ? cpus_s : "(affinity)");
	if (ncpus > 0 && cpu_not_allowed(cpus, ncpus) >= 0)
		die(EX_USAGE, "--cpus: CPU %d is not online or not allowed for this process", cpu_not_allowed(cpus, ncpus));
	if (!threads)
		threads = ncpus;
	/* as many connections as the hard limit allows; clients are told if that is too few */
	raise_nofile(UINT64_MAX >> 1, &soft, &hard);
	if (soft < hard) {
		struct rlimit rl = { hard, hard };

		(void)setrlimit(RLIMIT_NOFILE, &rl);     /* a refusal shows in the limit read back */
		raise_nofile(hard, &soft, &hard);
	}
	lfd = listen_on(bind_addr, port);

	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die(EX_ERR, "cannot ignore SIGPIPE: %s", strerror(errno));
	out_start();
	sigset_t sigs;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	/* blocked, they are read from sfd: a stop is orderly (every session told) */
	if (sigprocmask(SIG_BLOCK, &sigs, NULL))
		die(EX_ERR, "sigprocmask: %s", strerror(errno));
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	hard_deadline_alarm(until_ns);

	G.notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	G.nworkers = threads;
	G.w = calloc((size_t)threads, sizeof(*G.w));
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!G.w || G.notify_fd < 0 || epfd < 0 || sfd < 0)
		die(EX_ERR, "cannot set up: %s", strerror(errno));
	/* registered before any worker runs: a refusal leaves nothing to stop */
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = T_LISTEN };
	int fail = epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &e);

	e.data.u64 = T_SIGNAL;
	fail = fail || epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &e);
	e.data.u64 = T_NOTIFY;
	fail = fail || epoll_ctl(epfd, EPOLL_CTL_ADD, G.notify_fd, &e);
	if (fail)
		die(EX_ERR, "cannot set up: epoll_ctl: %s", strerror(errno));
	for (int i = 0; i < threads; i++) {
		int rc;

		worker_init(&G.w[i], i, cpus[i % ncpus], SIDE_SERVER);
		rc = worker_start(&G.w[i]);
		if (rc) {
			flag_set(&G.stop);
			for (int j = 0; j < i; j++) {
				notify(G.w[j].evfd);
				(void)pthread_join(G.w[j].tid, NULL);    /* on the way out: nothing to read of them */
			}
			die(EX_USAGE, "cannot start thread %d on CPU %d (%s): is that CPU online and allowed?", i,
			    G.w[i].cpu, strerror(rc));
		}
	}

	{
		char cpul[1024];
		size_t cl = 0;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char where[80];

		for (int i = 0; i < threads && cl < sizeof(cpul); i++)
			cl += (size_t)snprintf(cpul + cl, sizeof(cpul) - cl, "%s%d", i ? "," : "", G.w[i].cpu);
		if (getsockname(lfd, (struct sockaddr *)&ss, &sl))
			die(EX_ERR, "getsockname: %s", strerror(errno));
		addr_str(&ss, where, sizeof(where));
		line("{\"event\":\"listening\",\"side\":\"server\",\"version\":\"%s\",\"t\":%lld.%06lld,\"address\":\"%s\","
		     "\"port\":%s,\"threads\":%d,\"cpus\":[%s],\"until\":%lld.%06lld,\"clients\":%d,\"fd_limit\":%llu}",
		     NBPERF_VERSION, TS(now_ns()), where, port, threads, cpul, TS(until_ns), want_clients,
		     (unsigned long long)soft);
	}

	while (!flag_is(&G.stop)) {
		struct epoll_event evs[64];
		int64_t now = now_ns(), next = until_ns;

		if (now >= until_ns) {
			stopped_by = -1;
			break;
		}
		for (struct session *s = sessions; s; s = s->next) {
			session_check(s, now);
			if (s->state == SS_ACTIVE && s->deadline_ns < next)
				next = s->deadline_ns;
		}
		for (struct pend *q = pends, *nx; q; q = nx) {
			nx = q->next;
			if (now - q->t >= HELLO_TIMEOUT_NS) {
				reject(q, "no complete handshake within 5 s");
				pend_drop(q, 1);
			} else if (q->t + HELLO_TIMEOUT_NS < next) {
				next = q->t + HELLO_TIMEOUT_NS;
			}
		}
		if (want_clients && sessions_ended >= want_clients)
			break;
		int64_t wait = next - now_ns();
		struct timespec ts = { .tv_sec = wait > 0 ? wait / NS : 0, .tv_nsec = wait > 0 ? wait % NS : 0 };
		int n = epoll_pwait2(epfd, evs, 64, &ts, NULL);

		if (n < 0 && errno != EINTR)
			die(EX_ERR, "epoll_pwait2: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64;

			if (tag == T_LISTEN) {
				accept_all(lfd);
			} else if (tag == T_SIGNAL) {
				struct signalfd_siginfo si;

				if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
					stopped_by = (int)si.ssi_signo;
					flag_set(&G.stop);
				}
			} else if (tag == T_NOTIFY) {
				drain_fd(G.notify_fd);
			} else if (tag & 1) {
				struct session *s = (struct session *)(uintptr_t)(tag & ~1ull);

				if (s->ctl_fd >= 0 && s->state == SS_ACTIVE)
					ctl_read(s);
			} else {
				pend_read((struct pend *)(uintptr_t)tag);
			}
		}
	}
	/* leave: reset whatever still runs, let the workers report, then fail
	 * the sessions that were cut */
	int active = 0;

	for (struct session *s = sessions; s; s = s->next) {
		if (s->state != SS_ACTIVE)
			continue;
		active++;
		/* the reason comes first: the resets that follow are its consequences */
		pthread_mutex_lock(&G.lock);
		if (!s->err[0])
			snprintf(s->err, sizeof(s->err), "the server stopped (%s%s) before the end of the test",
				 stopped_by > 0 ? "SIG" : "", stopped_by > 0 ? sigabbrev_np(stopped_by) :
				 stopped_by < 0 ? "--until reached" : "an error");
		pthread_mutex_unlock(&G.lock);
	}
	flag_set(&G.stop);
	poke_workers();
	for (int i = 0; i < G.nworkers; i++) {
		int rc = pthread_join(G.w[i].tid, NULL);

		if (rc)          /* only for a thread that is not ours to join: a bug */
			die(EX_ERR, "pthread_join: %s", strerror(rc));
	}
	for (struct session *s = sessions; s; s = s->next) {
		if (s->state != SS_ACTIVE)
			continue;
		flag_set(&s->aborted);
		session_check(s, now_ns());
	}
	while (pends)
		pend_drop(pends, 1);
	release_fd(lfd);
	if (!G.first_error[0] && want_clients && sessions_ended < want_clients && stopped_by < 0)
		set_error("only %d of %d clients ended their tests before --until", sessions_ended, want_clients);
	if (G.first_error[0]) {
		end_line(active && stopped_by > 0 ? "stopped" : "error");
		die(active && stopped_by > 0 ? EX_STOPPED : EX_ERR, "%s", G.first_error);
	}
	end_line("ok");
	out_drain();
	return EX_OK;
}
