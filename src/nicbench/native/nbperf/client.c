// SPDX-License-Identifier: GPL-2.0
/* nbperf client: one process drives all of a host's connections to one
 * server, with one pinned thread per CPU (connections spread round-robin).
 *
 *  1. checks its arguments, the start time and the file descriptor limit;
 *  2. opens the control connection (the test's parameters; a peer speaking
 *     another protocol is caught on its first bytes);
 *  3. the worker threads connect and greet every data connection, then wait
 *     for the start time (CLOCK_REALTIME, absolute);
 *  4. they run until start + duration, each end finishing its connections;
 *  5. the client sends its per-connection totals (DONE), the server answers
 *     with its own (RESULT): the receiver's bytes are the truth, and for TCP
 *     they must equal the sender's byte for byte.
 * Nothing outlives start + duration + grace: the main thread gives up then,
 * and SIGALRM ends the process a few seconds later if anything still blocks.
 */
#include "nbperf.h"

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define TS(ns) (long long)((ns) / NS), (long long)(((ns) % NS) / 1000)

static const char USAGE[] =
	"usage: nbperf client --server HOST --start T --duration S [--port P] [--conns N]\n"
	"         [--threads N] [--cpus LIST] [--proto tcp|udp] [--dir tx|rx|bidir] [--io BYTES]\n"
	"         [--interval S] [--grace S] [--window BYTES] [--sndbuf BYTES] [--rcvbuf BYTES]\n"
	"         [--congestion NAME] [--nodelay] [--mss BYTES] [--busy-poll USEC]\n"
	"         [--send send|sendmsg|zerocopy|sendfile] [--recv copy|trunc] [--rate BITS/S]\n"
	"         [--test ID] [--bind ADDR] [--no-rt-start]\n"
	"  T: CLOCK_REALTIME seconds since the epoch (e.g. 1764000000.25), or +S from now;\n"
	"     at most 60 s ahead.  Sizes take K/M/G (x1024), rates K/M/G (x1000).\n";

struct copts {
	const char *server, *port, *bind, *cpus;
	int threads;
};

static int resolve(const char *host, const char *port, int passive, struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0 }, *res;
	int rc = getaddrinfo(host, port, &hints, &res);

	if (rc)
		return rc;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int want_enum(const char *v, const char *const *names, int n, const char *opt)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v, names[i]))
			return i;
	die(EX_USAGE, "%s %s: unknown value (see nbperf client --help)", opt, v);
}

static uint32_t want_size(const char *opt, const char *v, uint64_t max)
{
	uint64_t x;

	if (parse_size(v, &x) || x > max)
		die(EX_USAGE, "%s %s: want a whole number of bytes up to %llu (K/M/G suffixes allowed)", opt, v,
		    (unsigned long long)max);
	return (uint32_t)x;
}

/* Bounded reads/writes on the control connection before the workers run. */
static int wait_fd(int fd, short ev, int64_t until_ns)
{
	for (;;) {
		int64_t left = until_ns - now_ns();
		struct pollfd p = { .fd = fd, .events = ev };

		if (left <= 0)
			return 0;
		int r = poll(&p, 1, (int)(left / 1000000 + 1));

		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

static int read_full(int fd, uint8_t *b, size_t n, int64_t until_ns, const uint8_t *magic, char *why, size_t whysz)
{
	size_t got = 0;

	while (got < n) {
		if (wait_fd(fd, POLLIN, until_ns) <= 0) {
			snprintf(why, whysz, "no answer from the server in time%s",
				 got ? "" : " (a server that is not nbperf, or a firewall?)");
			return -1;
		}
		ssize_t k = recv(fd, b + got, n - got, MSG_DONTWAIT);

		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0) {
			snprintf(why, whysz, "the server %s%s", k == 0 ? "closed the connection" : strerror(errno),
				 got ? "" : ": is it an nbperf server?");
			return -1;
		}
		got += (size_t)k;
		if (magic && magic_prefix_ok(b, got, magic)) {
			char hex[24] = "";

			for (size_t i = 0; i < got && i < 8; i++)
				snprintf(hex + 2 * i, sizeof(hex) - 2 * i, "%02x", b[i]);
			snprintf(why, whysz, "the server answered bytes %s, not nbperf's handshake: another program "
				 "(an iperf3 server?) listens on that port", hex);
			return -1;
		}
	}
	return 0;
}

static int write_full(int fd, const uint8_t *b, size_t n, int64_t until_ns)
{
	size_t put = 0;

	while (put < n) {
		ssize_t k = send(fd, b + put, n - put, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLOUT, until_ns) <= 0)
				return -1;
			continue;
		}
		if (k <= 0)
			return -1;
		put += (size_t)k;
	}
	return 0;
}

static int control_connect(const struct params *p, int64_t *offset, int64_t *rtt)
{
	char why[300];
	uint8_t b[HELLO_LEN];
	struct hello h = { .kind = K_CONTROL, .p = *p };
	struct ack a;
	char peer[80];
	int fd = socket(G.srv.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	addr_str(&G.srv, peer, sizeof(peer));
	if (fd < 0)
		die(EX_ERR, "socket: %s", strerror(errno));
	if (G.bind_len && bind(fd, (struct sockaddr *)&G.bind_addr, G.bind_len))
		die(EX_USAGE, "--bind: cannot bind to that address here: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&G.srv, G.srv_len) && errno != EINPROGRESS)
		die(EX_ERR, "cannot connect to %s: %s", peer, strerror(errno));
	if (wait_fd(fd, POLLOUT, p->start_ns) <= 0)
		die(EX_ERR, "cannot connect to %s before the start time: no answer", peer);
	int err = 0;
	socklen_t el = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el))
		err = errno;
	if (err)
		die(EX_ERR, "cannot connect to %s: %s%s", peer, strerror(err),
		    err == ECONNREFUSED ? " (is nbperf server running there, on that port?)" : "");
	h.sent_ns = now_ns();
	hello_encode(b, &h);
	if (write_full(fd, b, HELLO_LEN, p->start_ns))
		die(EX_ERR, "cannot send the handshake to %s: %s", peer, strerror(errno));
	if (read_full(fd, b, ACK_LEN, p->start_ns, MAGIC_ACK, why, sizeof(why)))
		die(EX_ERR, "%s: %s", peer, why);
	int64_t now = now_ns();

	ack_decode(b, &a);
	if (a.status) {
		sanitize(a.msg);
		die(EX_ERR, "the server %s refused the test: %s", peer, a.msg);
	}
	*rtt = now - h.sent_ns;
	*offset = a.server_ns - (h.sent_ns + now) / 2;
	return fd;
}

/* ------------------------------------------------------------ the end */

static void thread_list(char *buf, size_t n)
{
	size_t o = 0;

	o += (size_t)snprintf(buf + o, n - o, "[");
	for (int i = 0; i < G.nworkers && o < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s{\"thread\":%d,\"cpu\":%d,\"utime\":%.6f,\"stime\":%.6f}",
				      i ? "," : "", i, G.w[i].cpu, G.w[i].utime, G.w[i].stime);
	if (o < n)
		snprintf(buf + o, n - o, "]");
}

static void minmax(int64_t v, int64_t *lo, int64_t *hi)
{
	if (!v)
		return;
	if (!*lo || v < *lo)
		*lo = v;
	if (!*hi || v > *hi)
		*hi = v;
}

static void end_line(const struct params *p, const char *status, const struct rec *peer)
{
	char test[80], err[500], threads[8192], line[10000];
	int64_t txlo = 0, txhi = 0, rxlo = 0, rxhi = 0;
	uint64_t tx = 0, rx = 0, ptx = 0, prx = 0;
	struct rusage ru;
	int n = 0;

	for (uint32_t i = 0; i < p->conns; i++) {
		minmax(G.conns[i].first_tx_ns, &txlo, &txhi);
		minmax(G.conns[i].first_rx_ns, &rxlo, &rxhi);
		tx += G.conns[i].tx_bytes;
		rx += G.conns[i].rx_bytes;
		if (peer) {
			ptx += peer[i].tx_bytes;
			prx += peer[i].rx_bytes;
		}
	}
	json_str(test, sizeof(test), p->test);
	json_str(err, sizeof(err), G.first_error);
	thread_list(threads, sizeof(threads));
	if (getrusage(RUSAGE_SELF, &ru))
		memset(&ru, 0, sizeof(ru));      /* cannot fail with these arguments: zeros, not garbage */
	n += snprintf(line + n, sizeof(line) - (size_t)n,
		      "{\"event\":\"end\",\"side\":\"client\",\"test\":%s,\"session\":\"%016llx\",\"t\":%lld.%06lld,"
		      "\"status\":\"%s\",\"error\":%s,\"start\":%lld.%06lld,\"conns\":%u", test,
		      (unsigned long long)p->session, TS(now_ns()), status, err, TS(p->start_ns), p->conns);
	/* the achieved start: the first send (or, for a client that only
	 * receives, the first byte) of each connection against --start */
	if (txlo)
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"first_tx_min\":%lld.%06lld,\"first_tx_max\":"
			      "%lld.%06lld,\"start_late_max\":%.6f,\"start_skew\":%.6f", TS(txlo), TS(txhi),
			      (double)(txhi - p->start_ns) / 1e9, (double)(txhi - txlo) / 1e9);
	else
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"first_tx_min\":null,\"first_tx_max\":null,"
			      "\"start_late_max\":null,\"start_skew\":null");
	if (rxlo)
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"first_rx_min\":%lld.%06lld,\"first_rx_max\":"
			      "%lld.%06lld", TS(rxlo), TS(rxhi));
	else
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"first_rx_min\":null,\"first_rx_max\":null");
	n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"tx_bytes\":%llu,\"rx_bytes\":%llu",
		      (unsigned long long)tx, (unsigned long long)rx);
	if (peer)
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"peer_tx_bytes\":%llu,\"peer_rx_bytes\":%llu",
			      (unsigned long long)ptx, (unsigned long long)prx);
	else
		n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"peer_tx_bytes\":null,\"peer_rx_bytes\":null");
	snprintf(line + n, sizeof(line) - (size_t)n, ",\"rt_start\":\"%s\",\"threads\":%s,\"process\":{\"utime\":%.6f,"
		 "\"stime\":%.6f}}\n", rt_start_word(), threads, tv_s(ru.ru_utime.tv_sec, ru.ru_utime.tv_usec),
		 tv_s(ru.ru_stime.tv_sec, ru.ru_stime.tv_usec));
	out_write(line, strlen(line));
}

static int joined;

static void join_workers(void)
{
	if (joined)
		return;
	for (int i = 0; i < G.nworkers; i++) {
		int rc = pthread_join(G.w[i].tid, NULL);

		if (rc)          /* only for a thread that is not ours to join: a bug */
			die(EX_ERR, "pthread_join: %s", strerror(rc));
	}
	joined = 1;
}

static void stop_workers(void)
{
	flag_set(&G.abort_all);
	if (!joined)
		for (int i = 0; i < G.nworkers; i++)
			notify(G.w[i].evfd);
	join_workers();
}

/* An orderly failure: every thread stopped, every socket reset, the final
 * lines printed, one line on stderr. */
static void fail(const struct params *p, int ctl, int code, const char *status, const char *fmt, ...)
	__attribute__((format(printf, 5, 6), noreturn));

static void fail(const struct params *p, int ctl, int code, const char *status, const char *fmt, ...)
{
	va_list ap;
	char msg[400];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	set_error("%s", msg);            /* a worker's earlier error stays first */
	stop_workers();
	if (ctl >= 0) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		/* refused, the close is an orderly one: the server still learns of the end */
		(void)setsockopt(ctl, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		release_fd(ctl);
	}
	end_line(p, status, NULL);
	die(code, "%s", G.first_error);
}

static void exchange_totals(const struct params *p, int ctl, int64_t deadline)
{
	size_t n = p->conns, len = SUMHDR_LEN + n * REC_LEN;
	uint8_t *b = malloc(len);
	struct rec *peer = calloc(n, sizeof(*peer));
	char why[300], msg[120];
	uint32_t status, got_n;

	if (!b || !peer)
		die(EX_ERR, "out of memory");
	sumhdr_encode(b, MAGIC_DONE, 0, (uint32_t)n, "");
	for (size_t i = 0; i < n; i++) {
		struct conn *c = &G.conns[i];
		struct rec r = { c->tx_bytes, c->rx_bytes, c->tx_pkts, c->rx_pkts, (uint32_t)c->failed };

		rec_encode(b + SUMHDR_LEN + i * REC_LEN, &r);
	}
	if (write_full(ctl, b, len, deadline))
		fail(p, ctl, EX_ERR, "error", "cannot send the totals to the server: %s", strerror(errno));
	if (read_full(ctl, b, SUMHDR_LEN, deadline, MAGIC_RESULT, why, sizeof(why)))
		fail(p, ctl, EX_ERR, "error", "no result from the server: %s", why);
	sumhdr_decode(b, &status, &got_n, msg, sizeof(msg));
	if (status) {
		sanitize(msg);
		fail(p, ctl, EX_ERR, "error", "the server failed the test: %s", msg);
	}
	if (got_n != n)
		fail(p, ctl, EX_ERR, "error", "the server reported %u connections, not %zu", got_n, n);
	if (read_full(ctl, b + SUMHDR_LEN, n * REC_LEN, deadline, NULL, why, sizeof(why)))
		fail(p, ctl, EX_ERR, "error", "incomplete result from the server: %s", why);
	for (size_t i = 0; i < n; i++)
		rec_decode(b + SUMHDR_LEN + i * REC_LEN, &peer[i]);
	release_fd(ctl);
	/* TCP delivers every byte: both ends must agree exactly (UDP may lose) */
	if (p->proto == P_TCP) {
		for (size_t i = 0; i < n; i++) {
			struct conn *c = &G.conns[i];

			if (p->dir != D_RX && peer[i].rx_bytes != c->tx_bytes)
				fail(p, -1, EX_ERR, "error", "connection %zu: the client sent %llu bytes, the server "
				     "received %llu", i, (unsigned long long)c->tx_bytes,
				     (unsigned long long)peer[i].rx_bytes);
			if (p->dir != D_TX && peer[i].tx_bytes != c->rx_bytes)
				fail(p, -1, EX_ERR, "error", "connection %zu: the server sent %llu bytes, the client "
				     "received %llu", i, (unsigned long long)peer[i].tx_bytes,
				     (unsigned long long)c->rx_bytes);
		}
	}
	end_line(p, "ok", peer);
	free(b);
	free(peer);
}

/* ------------------------------------------------------------ main */

static void parse(int argc, char **argv, struct params *p, struct copts *o)
{
	static const struct option opts[] = {
		{ "server", required_argument, 0, 'c' }, { "port", required_argument, 0, 'p' },
		{ "start", required_argument, 0, 'S' }, { "duration", required_argument, 0, 't' },
		{ "conns", required_argument, 0, 'P' }, { "threads", required_argument, 0, 'T' },
		{ "cpus", required_argument, 0, 'A' }, { "proto", required_argument, 0, 'u' },
		{ "dir", required_argument, 0, 'd' }, { "io", required_argument, 0, 'l' },
		{ "interval", required_argument, 0, 'i' }, { "grace", required_argument, 0, 'g' },
		{ "window", required_argument, 0, 'w' }, { "sndbuf", required_argument, 0, 'W' },
		{ "rcvbuf", required_argument, 0, 'R' }, { "congestion", required_argument, 0, 'C' },
		{ "nodelay", no_argument, 0, 'N' }, { "mss", required_argument, 0, 'M' },
		{ "busy-poll", required_argument, 0, 'B' }, { "send", required_argument, 0, 's' },
		{ "recv", required_argument, 0, 'r' }, { "rate", required_argument, 0, 'b' },
		{ "test", required_argument, 0, 'n' }, { "bind", required_argument, 0, 'L' },
		{ "no-rt-start", no_argument, 0, 'Z' }, { "help", no_argument, 0, 'h' }, { 0 } };
	static const char *const protos[] = { "tcp", "udp" }, *const dirs[] = { "tx", "rx", "bidir" },
		*const sends[] = { "send", "sendmsg", "zerocopy", "sendfile" }, *const recvs[] = { "copy", "trunc" };
	double duration = 0, interval = 1.0, grace = 2.0;
	const char *start = NULL, *io = NULL;
	uint64_t v;
	int opt, have_duration = 0;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': o->server = optarg; break;
		case 'p': o->port = optarg; break;
		case 'S': start = optarg; break;
		case 't':
			if (parse_seconds(optarg, &duration) || duration <= 0 || duration > MAX_DURATION_S)
				die(EX_USAGE, "--duration %s: want seconds > 0 (at most %.0f)", optarg, MAX_DURATION_S);
			have_duration = 1;
			break;
		case 'P':
			if (parse_size(optarg, &v) || v < 1 || v > MAX_CONNS)
				die(EX_USAGE, "--conns %s: want 1..%d", optarg, MAX_CONNS);
			p->conns = (uint32_t)v;
			break;
		case 'T':
			if (parse_size(optarg, &v) || v < 1 || v > MAX_THREADS)
				die(EX_USAGE, "--threads %s: want 1..%d", optarg, MAX_THREADS);
			o->threads = (int)v;
			break;
		case 'A': o->cpus = optarg; break;
		case 'u': p->proto = (uint8_t)want_enum(optarg, protos, 2, "--proto"); break;
		case 'd': p->dir = (uint8_t)want_enum(optarg, dirs, 3, "--dir"); break;
		case 'l': io = optarg; break;
		case 'i':
			if (parse_seconds(optarg, &interval) || interval < 0.01)
				die(EX_USAGE, "--interval %s: want seconds >= 0.01", optarg);
			break;
		case 'g':
			if (parse_seconds(optarg, &grace) || grace > 60)
				die(EX_USAGE, "--grace %s: want 0..60 seconds", optarg);
			break;
		case 'w': p->sndbuf = p->rcvbuf = want_size("--window", optarg, 1u << 30); break;
		case 'W': p->sndbuf = want_size("--sndbuf", optarg, 1u << 30); break;
		case 'R': p->rcvbuf = want_size("--rcvbuf", optarg, 1u << 30); break;
		case 'C':
			if (!*optarg || strlen(optarg) >= sizeof(p->cc))
				die(EX_USAGE, "--congestion %s: want a name of 1..15 characters", optarg);
			strcpy(p->cc, optarg);
			break;
		case 'N': p->nodelay = 1; break;
		case 'M': p->mss = want_size("--mss", optarg, 65535); break;
		case 'B': p->busy_poll = want_size("--busy-poll", optarg, 1000000); break;
		case 's': p->send_mode = (uint8_t)want_enum(optarg, sends, 4, "--send"); break;
		case 'r': p->recv_mode = (uint8_t)want_enum(optarg, recvs, 2, "--recv"); break;
		case 'b':
			if (parse_rate(optarg, &p->rate_bps))
				die(EX_USAGE, "--rate %s: want bits/s, e.g. 100M", optarg);
			break;
		case 'n':
			if (!*optarg || strlen(optarg) >= sizeof(p->test))
				die(EX_USAGE, "--test %s: want an id of 1..31 characters", optarg);
			strcpy(p->test, optarg);
			break;
		case 'L': o->bind = optarg; break;
		case 'Z': G.rt_start = 0; break;
		case 'h': fputs(USAGE, stdout); exit(EX_OK);
		case ':': die(EX_USAGE, "option %s needs a value (see nbperf client --help)", argv[optind - 1]);
		default: die(EX_USAGE, "unknown option %s (see nbperf client --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(EX_USAGE, "unexpected argument %s (see nbperf client --help)", argv[optind]);
	if (!o->server || !start || !have_duration)
		die(EX_USAGE, "the client needs --server, --start and --duration (see nbperf client --help)");
	if (parse_abs_time(start, &p->start_ns))
		die(EX_USAGE, "--start %s: want CLOCK_REALTIME seconds since the epoch, or +S", start);
	if (io) {
		uint64_t max = p->proto == P_UDP ? MAX_UDP_IO : MAX_IO, min = p->proto == P_UDP ? UDP_HDR : 1;

		if (parse_size(io, &v) || v < min || v > max)
			die(EX_USAGE, "--io %s: want %llu..%llu bytes for %s", io, (unsigned long long)min,
			    (unsigned long long)max, proto_name(p->proto));
		p->io = (uint32_t)v;
	} else {
		p->io = p->proto == P_UDP ? 1472 : 128 * 1024;
	}
	if (p->proto == P_UDP && (p->send_mode == S_ZEROCOPY || p->send_mode == S_SENDFILE))
		die(EX_USAGE, "--send %s is for TCP; UDP sends with sendmmsg", send_name(p->send_mode));
	if (p->proto == P_TCP && p->rate_bps)
		die(EX_USAGE, "--rate paces UDP flows; TCP runs as fast as it can");
	if (p->proto == P_UDP && (p->cc[0] || p->mss || p->nodelay))
		die(EX_USAGE, "--congestion, --mss and --nodelay are TCP options");
	p->duration_ns = (int64_t)(duration * 1e9 + 0.5);
	p->interval_ns = (int64_t)(interval * 1e9 + 0.5);
	p->grace_ns = (int64_t)(grace * 1e9 + 0.5);
}

int cmd_client(int argc, char **argv)
{
	struct params p = { .conns = 1 };
	struct copts o = { .port = "5301" };
	int cpus[MAX_THREADS], ncpus, ctl, sfd;
	int64_t offset, rtt, deadline;
	uint64_t soft, hard, need;
	char why[300];

	G.side = SIDE_CLIENT;
	parse(argc, argv, &p, &o);

	int64_t now = now_ns();

	if (p.start_ns <= now)
		die(EX_USAGE, "--start is %.3f s in the past: give a time ahead (the connections are made before it)",
		    (double)(now - p.start_ns) / 1e9);
	if (p.start_ns - now > MAX_AHEAD_NS)
		die(EX_USAGE, "--start is %.1f s ahead: at most %lld s", (double)(p.start_ns - now) / 1e9,
		    MAX_AHEAD_NS / NS);
	if (!p.test[0])
		strcpy(p.test, "nbperf");
	if (getrandom(&p.session, sizeof(p.session), 0) != sizeof(p.session))
		p.session = (uint64_t)now ^ ((uint64_t)getpid() << 32);

	ncpus = o.cpus ? parse_cpus(o.cpus, cpus, MAX_THREADS) : default_cpus(cpus, MAX_THREADS);
	if (ncpus <= 0)
		die(EX_USAGE, "--cpus %s: want CPU numbers like 0,1 or 0-3", o.cpus ? o.cpus : "(affinity)");
	if (ncpus > 0 && cpu_not_allowed(cpus, ncpus) >= 0)
		die(EX_USAGE, "--cpus: CPU %d is not online or not allowed for this process", cpu_not_allowed(cpus, ncpus));
	if (!o.threads)
		o.threads = ncpus;
	if ((uint32_t)o.threads > p.conns)
		o.threads = (int)p.conns;     /* a thread without connections would only idle */

	/* every connection is a descriptor (two for UDP), plus epoll, eventfd and
	 * memfd per thread, the control connection and stdio */
	need = (uint64_t)p.conns * (p.proto == P_UDP ? 2 : 1) + 3ull * (uint64_t)o.threads + 16;
	if (raise_nofile(need, &soft, &hard))
		die(EX_USAGE, "%u connections need %llu file descriptors; the limit is %llu (hard %llu): raise it, "
		    "e.g. ulimit -n %llu", p.conns, (unsigned long long)need, (unsigned long long)soft,
		    (unsigned long long)hard, (unsigned long long)need);

	int rc = resolve(o.server, o.port, 0, &G.srv, &G.srv_len);

	if (rc)
		die(EX_USAGE, "--server %s --port %s: %s", o.server, o.port, gai_strerror(rc));
	if (o.bind) {
		rc = resolve(o.bind, "0", 1, &G.bind_addr, &G.bind_len);
		if (rc)
			die(EX_USAGE, "--bind %s: %s", o.bind, gai_strerror(rc));
		if (G.bind_addr.ss_family != G.srv.ss_family)
			die(EX_USAGE, "--bind %s and --server %s are of different address families", o.bind, o.server);
	}
	/* options this host refuses (an unknown congestion control...) are
	 * usage errors, found before anything is connected */
	int probe = socket(G.srv.ss_family, p.proto == P_UDP ? SOCK_DGRAM : SOCK_STREAM, 0);

	if (probe < 0 || apply_sock_opts(probe, &p, 1, p.proto == P_TCP, why, sizeof(why)))
		die(EX_USAGE, "%s", probe < 0 ? strerror(errno) : why);
	release_fd(probe);

	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		die(EX_ERR, "cannot ignore SIGPIPE: %s", strerror(errno));
	out_start();
	sigset_t sigs;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	/* blocked, they are read from sfd: a stop is an orderly failure (fail()) */
	if (sigprocmask(SIG_BLOCK, &sigs, NULL))
		die(EX_ERR, "sigprocmask: %s", strerror(errno));
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		die(EX_ERR, "signalfd: %s", strerror(errno));
	deadline = p.start_ns + p.duration_ns + p.grace_ns;
	hard_deadline_alarm(deadline);

	ctl = control_connect(&p, &offset, &rtt);

	G.notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (G.notify_fd < 0)
		die(EX_ERR, "cannot create an eventfd: %s", strerror(errno));
	G.conns = calloc(p.conns, sizeof(*G.conns));
	G.nworkers = o.threads;
	G.w = calloc((size_t)o.threads, sizeof(*G.w));
	if (!G.conns || !G.w)
		die(EX_ERR, "out of memory");
	for (int i = 0; i < o.threads; i++)
		worker_init(&G.w[i], i, cpus[i % ncpus], SIDE_CLIENT);
	for (uint32_t i = 0; i < p.conns; i++) {
		conn_init(&G.conns[i], &p, i, SIDE_CLIENT);
		worker_add(&G.w[i % (uint32_t)o.threads], &G.conns[i]);
	}
	for (int i = 0; i < o.threads; i++) {
		rc = worker_start(&G.w[i]);
		if (rc) {
			G.nworkers = i;
			fail(&p, ctl, EX_USAGE, "error", "cannot start thread %d on CPU %d (%s): is that CPU online and "
			     "allowed?", i, G.w[i].cpu, strerror(rc));
		}
	}

	/* ready: every connection greeted before the start time */
	int ready_printed = 0;

	for (;;) {
		struct pollfd pf[3] = { { sfd, POLLIN, 0 }, { G.notify_fd, POLLIN, 0 }, { ctl, POLLIN, 0 } };
		int all_ready = 1, all_done = 1;

		for (int i = 0; i < G.nworkers; i++) {
			all_ready &= flag_is(&G.w[i].ready);
			all_done &= flag_is(&G.w[i].done);
		}
		if (flag_is(&G.abort_all))
			fail(&p, ctl, EX_ERR, "error", "%s", G.first_error);
		now = now_ns();
		if (!ready_printed && all_ready) {
			char test[80], cpul[1024];
			size_t cl = 0;

			for (int i = 0; i < G.nworkers; i++) {
				struct conn *c;

				for (int j = 0; j < G.w[i].n; j++) {
					c = G.w[i].c[j];
					if (c->clock_rtt_ns && c->clock_rtt_ns < rtt) {
						rtt = c->clock_rtt_ns;
						offset = c->clock_offset_ns;
					}
				}
				cl += (size_t)snprintf(cpul + cl, sizeof(cpul) - cl, "%s%d", i ? "," : "", G.w[i].cpu);
				if (cl >= sizeof(cpul))
					break;
			}
			json_str(test, sizeof(test), p.test);
			char line[2048];

			snprintf(line, sizeof(line),
				 "{\"event\":\"ready\",\"side\":\"client\",\"version\":\"%s\",\"test\":%s,"
				 "\"session\":\"%016llx\",\"t\":%lld.%06lld,\"start\":%lld.%06lld,\"duration\":%.6f,"
				 "\"interval\":%.6f,\"grace\":%.6f,\"proto\":\"%s\",\"dir\":\"%s\",\"io\":%u,\"conns\":%u,"
				 "\"threads\":%d,\"cpus\":[%s],\"server\":\"%s\",\"port\":%s,\"send\":\"%s\","
				 "\"recv\":\"%s\",\"rate\":%llu,\"sndbuf\":%u,\"rcvbuf\":%u,\"mss\":%u,\"nodelay\":%s,"
				 "\"congestion\":\"%s\",\"busy_poll\":%u,\"fd_limit\":%llu,\"clock_offset\":%.6f,"
				 "\"clock_rtt\":%.6f}\n", NBPERF_VERSION, test, (unsigned long long)p.session, TS(now),
				 TS(p.start_ns), p.duration_ns / 1e9, p.interval_ns / 1e9, p.grace_ns / 1e9,
				 proto_name(p.proto), dir_name(p.dir), p.io, p.conns, G.nworkers, cpul, o.server, o.port,
				 send_name(p.send_mode), recv_name(p.recv_mode), (unsigned long long)p.rate_bps, p.sndbuf,
				 p.rcvbuf, p.mss, p.nodelay ? "true" : "false", p.cc, p.busy_poll,
				 (unsigned long long)soft, offset / 1e9, rtt / 1e9);
			out_write(line, strlen(line));
			ready_printed = 1;
		}
		if (!ready_printed && now >= p.start_ns) {
			int ready = 0;

			for (int i = 0; i < G.nworkers; i++)
				ready += atomic_load_explicit(&G.w[i].nready, memory_order_relaxed);
			fail(&p, ctl, EX_ERR, "error", "only %d of %u connections were ready at the start time: start "
			     "further ahead", ready, p.conns);
		}
		if (all_done)
			break;
		if (now >= deadline) {
			/* each worker counts its finished connections (its own, so no
			 * other thread reads a connection's state while it runs) */
			int open = (int)p.conns;

			for (int i = 0; i < G.nworkers; i++)
				open -= atomic_load_explicit(&G.w[i].nfinished, memory_order_relaxed);
			fail(&p, ctl, EX_ERR, "error", "%d of %u connections still open at the hard deadline (start + "
			     "duration + grace)", open, p.conns);
		}
		int64_t until = ready_printed ? deadline : p.start_ns;
		int r = poll(pf, 3, (int)((until - now) / 1000000 + 1));

		if (r < 0 && errno != EINTR)
			fail(&p, ctl, EX_ERR, "error", "poll: %s", strerror(errno));
		if (pf[0].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				fail(&p, ctl, EX_STOPPED, "stopped", "stopped by SIG%s before the end of the test",
				     sigabbrev_np((int)si.ssi_signo));
		}
		if (pf[1].revents)
			drain_fd(G.notify_fd);
		if (pf[2].revents) {
			/* the server speaks on the control connection before our DONE only
			 * to fail the test, or it is gone */
			uint8_t b[SUMHDR_LEN];
			char msg[120] = "";
			uint32_t st, n;
			ssize_t k = recv(ctl, b, 1, MSG_PEEK | MSG_DONTWAIT);

			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
				fail(&p, ctl, EX_ERR, "error", "the server went away during the test (control connection %s): "
				     "killed or stopped?", k == 0 ? "closed" : strerror(errno));
			if (k > 0 && read_full(ctl, b, SUMHDR_LEN, now_ns() + NS / 10, MAGIC_RESULT, why, sizeof(why)) == 0) {
				sumhdr_decode(b, &st, &n, msg, sizeof(msg));
				sanitize(msg);
				fail(&p, ctl, EX_ERR, "error", "the server failed the test: %s", msg);
			}
			if (k > 0)
				fail(&p, ctl, EX_ERR, "error", "the server said something unexpected during the test: %s", why);
		}
	}
	join_workers();
	exchange_totals(&p, ctl, deadline + NS);
	out_drain();
	return EX_OK;
}
