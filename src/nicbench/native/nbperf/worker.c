// SPDX-License-Identifier: GPL-2.0
/* nbperf worker threads: one pinned thread drives many connections through
 * one epoll set -- handshakes (client side), the start at an absolute time,
 * sending, receiving, interval reports, the end, and the hard deadline.
 *
 * A TCP connection ends in both directions by FIN: the sending end shuts its
 * side down at the end time; an end that does not send shuts down once it has
 * read the peer's FIN.  The connection is finished when it has both shut down
 * and seen the peer's FIN (and every MSG_ZEROCOPY completion arrived), so
 * each end's totals are final when it reports them.  A UDP flow's TCP
 * connection carries the sender's totals (a FIN record) after its last
 * datagram; the receiver then waits for stragglers (UDP_DRAIN_NS at most) and
 * counts what is missing as lost.
 */
#include "nbperf.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#define TAG_UDP 1ull
#define BUDGET 16                /* I/O calls per connection per wakeup: fair among a thread's connections */
#define MAX_EVENTS 128
#define FIRST_SEND 1024u       /* bytes: each connection's first write */
#define PRECISE_NS (2ll * 1000000ll)   /* sleep the last 2 ms before a start with clock_nanosleep */

#define TS(ns) (long long)((ns) / NS), (long long)(((ns) % NS) / 1000)   /* "%lld.%06lld" */

static const char *side_name(int side)
{
	return side == SIDE_SERVER ? "server" : "client";
}

void conn_init(struct conn *c, const struct params *p, uint32_t index, int side)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->ufd = -1;
	c->index = index;
	c->p = p;
	c->sending = side == SIDE_CLIENT ? p->dir != D_RX : p->dir != D_TX;
	c->receiving = side == SIDE_CLIENT ? p->dir != D_TX : p->dir != D_RX;
	c->end_ns = p->start_ns + p->duration_ns;
	c->deadline_ns = c->end_ns + p->grace_ns;
	c->next_report_ns = p->start_ns + p->interval_ns;
	c->t0_ns = p->start_ns;
}

void worker_init(struct worker *w, int index, int cpu, int side)
{
	memset(w, 0, sizeof(*w));
	w->index = index;
	w->cpu = cpu;
	w->side = side;
	w->memfd = -1;
	w->next_timer = 0;
	w->poked = 1;
	pthread_mutex_init(&w->inlock, NULL);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->epfd < 0 || w->evfd < 0)
		die(EX_ERR, "cannot create epoll/eventfd: %s", strerror(errno));
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = 0 };

	epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &e);
	w->outcap = 1 << 16;
	w->out = malloc(w->outcap);
	w->mm = calloc(UDP_BATCH, sizeof(*w->mm));
	w->iov = calloc(2 * UDP_BATCH, sizeof(*w->iov));
	w->hdrs = calloc(UDP_BATCH, UDP_HDR);
	w->cmsgs = calloc(UDP_BATCH, CMSG_SPACE(sizeof(struct timespec)));
	if (!w->out || !w->mm || !w->iov || !w->hdrs || !w->cmsgs)
		die(EX_ERR, "out of memory");
}

/* Send and receive buffers, shared by the thread's connections: the bytes
 * sent carry no meaning, and a received copy is only ever overwritten. */
static void worker_buffers(struct worker *w, size_t size)
{
	w->sbuf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	w->rbuf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w->sbuf == MAP_FAILED || w->rbuf == MAP_FAILED)
		die(EX_ERR, "cannot map %zu-byte buffers: %s", size, strerror(errno));
	for (size_t i = 0; i < size; i++)
		w->sbuf[i] = (uint8_t)(i * 131 + 7);
}

/* sendfile's source: a memory file holding (at least) `size` bytes of the
 * send buffer; it grows when a connection with a larger io comes. */
static int worker_memfd(struct worker *w, size_t size)
{
	if (w->memfd < 0) {
		w->memfd = memfd_create("nbperf", MFD_CLOEXEC);
		w->memfd_size = 0;
		if (w->memfd < 0)
			return -1;
	}
	while (w->memfd_size < size) {
		ssize_t k = pwrite(w->memfd, w->sbuf + w->memfd_size, size - w->memfd_size, (off_t)w->memfd_size);

		if (k <= 0)
			return -1;
		w->memfd_size += (size_t)k;
	}
	return w->memfd;
}

/* Whatever a connection's first send needs is made before the start, at the
 * handshake: a sendfile connection's memory file filled at its first send held
 * the thread (a 512 KiB fill: starts up to 5.7 ms apart at 512K in the seed 000
 * replay, 0.2-0.4 ms once filled here).  -1 with `why` when it cannot be made:
 * the server refuses the connection with it, the client fails it. */
static int send_ready(struct worker *w, struct conn *c, char *why, size_t n)
{
	if (c->sending && c->p->proto == P_TCP && c->p->send_mode == S_SENDFILE &&
	    worker_memfd(w, c->p->io) < 0) {
		snprintf(why, n, "cannot make sendfile's memory file: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void ep_set(struct worker *w, struct conn *c, int udp, uint32_t ev)
{
	uint32_t *cur = udp ? &c->uevents : &c->events;
	int fd = udp ? c->ufd : c->fd;
	struct epoll_event e = { .events = ev, .data.u64 = (uint64_t)(uintptr_t)c | (udp ? TAG_UDP : 0) };

	if (fd < 0 || *cur == ev)
		return;
	epoll_ctl(w->epfd, EPOLL_CTL_MOD, fd, &e);
	*cur = ev;
}

static void ep_add(struct worker *w, struct conn *c, int udp, uint32_t ev)
{
	int fd = udp ? c->ufd : c->fd;
	struct epoll_event e = { .events = ev, .data.u64 = (uint64_t)(uintptr_t)c | (udp ? TAG_UDP : 0) };

	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &e))
		die(EX_ERR, "epoll_ctl: %s", strerror(errno));
	if (udp)
		c->uevents = ev;
	else
		c->events = ev;
}

void worker_add(struct worker *w, struct conn *c)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->c = realloc(w->c, (size_t)w->cap * sizeof(*w->c));
		if (!w->c)
			die(EX_ERR, "out of memory");
	}
	c->w = w;
	w->c[w->n++] = c;
}

void worker_handoff(struct worker *w, struct conn *c)
{
	pthread_mutex_lock(&w->inlock);
	if (w->nin == w->capin) {
		w->capin = w->capin ? w->capin * 2 : 64;
		w->inbox = realloc(w->inbox, (size_t)w->capin * sizeof(*w->inbox));
		if (!w->inbox)
			die(EX_ERR, "out of memory");
	}
	w->inbox[w->nin++] = c;
	pthread_mutex_unlock(&w->inlock);
	notify(w->evfd);
}

/* ------------------------------------------------------------ reports */

static void session_hex(const struct conn *c, char *buf, size_t n)
{
	snprintf(buf, n, "%016llx", (unsigned long long)c->p->session);
}

static int tcp_info_of(const struct conn *c, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	return c->fd >= 0 && getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, ti, &len) == 0 ? 0 : -1;
}

/* The peer's FIN has been received: it took one sequence number, which
 * tcpi_bytes_received counts as a byte.  States of the kernel's
 * include/net/tcp_states.h: TIME_WAIT 6, CLOSE_WAIT 8, LAST_ACK 9, CLOSING 11;
 * CLOSE (7) is also where a closed connection ends up once both FINs are
 * acknowledged (measured), but an aborted one too: there, only if this end
 * has read the end of the stream. */
static int fin_received(const struct tcp_info *ti, const struct conn *c)
{
	unsigned st = ti->tcpi_state;

	return st == 6 || st == 8 || st == 9 || st == 11 || (st == 7 && c->eof);
}

static uint64_t udp_lost_now(const struct conn *c)
{
	return c->max_seq_plus1 > c->rx_pkts ? c->max_seq_plus1 - c->rx_pkts : 0;
}

static void thread_line(struct worker *w, int64_t t)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	w->utime = tv_s(ru.ru_utime.tv_sec, ru.ru_utime.tv_usec);
	w->stime = tv_s(ru.ru_stime.tv_sec, ru.ru_stime.tv_usec);
	wo_printf(w, "{\"event\":\"thread\",\"side\":\"%s\",\"thread\":%d,\"cpu\":%d,\"t\":%lld.%06lld,"
		  "\"utime\":%.6f,\"stime\":%.6f,\"conns\":%d}\n", side_name(w->side), w->index, w->cpu, TS(t),
		  w->utime, w->stime, w->n);
}

static void report_interval(struct worker *w, struct conn *c, int64_t t1)
{
	char test[80], sess[20];
	struct tcp_info ti;

	json_str(test, sizeof(test), c->p->test);
	session_hex(c, sess, sizeof(sess));
	wo_printf(w, "{\"event\":\"interval\",\"side\":\"%s\",\"test\":%s,\"session\":\"%s\",\"conn\":%u,"
		  "\"thread\":%d,\"t0\":%lld.%06lld,\"t1\":%lld.%06lld,\"tx_bytes\":%llu,\"rx_bytes\":%llu",
		  side_name(w->side), test, sess, c->index, w->index, TS(c->t0_ns), TS(t1),
		  (unsigned long long)(c->tx_bytes - c->tx_mark), (unsigned long long)(c->rx_bytes - c->rx_mark));
	if (c->p->proto == P_TCP) {
		if (tcp_info_of(c, &ti) == 0) {
			wo_printf(w, ",\"tcp\":{\"total_retrans\":%u,\"retrans\":%u,\"rtt_us\":%u,\"rttvar_us\":%u,"
				  "\"snd_cwnd\":%u,\"snd_mss\":%u,\"delivery_rate\":%llu", ti.tcpi_total_retrans,
				  ti.tcpi_total_retrans - c->retrans_mark, ti.tcpi_rtt, ti.tcpi_rttvar, ti.tcpi_snd_cwnd,
				  ti.tcpi_snd_mss, (unsigned long long)ti.tcpi_delivery_rate);
			c->retrans_mark = ti.tcpi_total_retrans;
			/* the bytes the kernel received in order in this interval: when they
			 * arrived, not when this thread got to read them (a starved reader's
			 * backlog would move bytes across interval and window edges) */
			uint64_t got = ti.tcpi_bytes_received - (fin_received(&ti, c) ? 1 : 0);

			if (got >= c->kin_mark) {
				wo_printf(w, ",\"kernel_rx_bytes\":%llu", (unsigned long long)(got - c->kin_mark));
				c->kin_mark = got;
			}
			wo_printf(w, "}");
		}
	} else {
		uint64_t lost = udp_lost_now(c);

		wo_printf(w, ",\"udp\":{\"tx_packets\":%llu,\"rx_packets\":%llu,\"lost\":%lld,\"out_of_order\":%llu,"
			  "\"jitter_us\":%.3f}", (unsigned long long)(c->tx_pkts - c->txp_mark),
			  (unsigned long long)(c->rx_pkts - c->rxp_mark), (long long)(lost - c->lost_mark),
			  (unsigned long long)(c->ooo - c->ooo_mark), c->jitter_ns / 1e3);
		c->lost_mark = lost;
	}
	wo_printf(w, "}\n");
	c->tx_mark = c->tx_bytes;
	c->rx_mark = c->rx_bytes;
	c->txp_mark = c->tx_pkts;
	c->rxp_mark = c->rx_pkts;
	c->ooo_mark = c->ooo;
	c->t0_ns = t1;
}

static void ts_or_null(struct worker *w, const char *key, int64_t ns)
{
	if (ns)
		wo_printf(w, ",\"%s\":%lld.%06lld", key, TS(ns));
	else
		wo_printf(w, ",\"%s\":null", key);
}

static void conn_end_line(struct worker *w, struct conn *c, const char *status)
{
	char test[80], sess[20], err[300], peer[80];
	struct tcp_info ti;

	json_str(test, sizeof(test), c->p->test);
	json_str(err, sizeof(err), c->err);
	json_str(peer, sizeof(peer), c->peer);
	session_hex(c, sess, sizeof(sess));
	wo_printf(w, "{\"event\":\"conn_end\",\"side\":\"%s\",\"test\":%s,\"session\":\"%s\",\"conn\":%u,"
		  "\"thread\":%d,\"peer\":%s,\"status\":\"%s\",\"error\":%s,\"start\":%lld.%06lld",
		  side_name(w->side), test, sess, c->index, w->index, peer, status, err, TS(c->p->start_ns));
	ts_or_null(w, "first_tx", c->first_tx_ns);
	ts_or_null(w, "first_rx", c->first_rx_ns);
	ts_or_null(w, "end", c->finish_ns);
	wo_printf(w, ",\"tx_bytes\":%llu,\"rx_bytes\":%llu", (unsigned long long)c->tx_bytes,
		  (unsigned long long)c->rx_bytes);
	if (c->p->proto == P_TCP && tcp_info_of(c, &ti) == 0)
		wo_printf(w, ",\"tcp\":{\"total_retrans\":%u,\"rtt_us\":%u,\"rttvar_us\":%u,\"snd_cwnd\":%u,"
			  "\"snd_mss\":%u,\"delivery_rate\":%llu}", ti.tcpi_total_retrans, ti.tcpi_rtt, ti.tcpi_rttvar,
			  ti.tcpi_snd_cwnd, ti.tcpi_snd_mss, (unsigned long long)ti.tcpi_delivery_rate);
	if (c->p->send_mode == S_ZEROCOPY && c->sending)
		wo_printf(w, ",\"zerocopy\":{\"sends\":%llu,\"completed\":%llu,\"copied\":%llu}",
			  (unsigned long long)c->zc_sends, (unsigned long long)c->zc_done,
			  (unsigned long long)c->zc_copied);
	if (c->p->proto == P_UDP) {
		wo_printf(w, ",\"udp\":{\"tx_packets\":%llu,\"rx_packets\":%llu", (unsigned long long)c->tx_pkts,
			  (unsigned long long)c->rx_pkts);
		if (c->receiving && c->got_fin)
			wo_printf(w, ",\"peer_tx_packets\":%llu,\"lost\":%lld", (unsigned long long)c->peer_tx_pkts,
				  (long long)(c->peer_tx_pkts - c->rx_pkts));
		else
			wo_printf(w, ",\"peer_tx_packets\":null,\"lost\":null");
		wo_printf(w, ",\"out_of_order\":%llu,\"jitter_us\":%.3f,\"bad\":%llu}", (unsigned long long)c->ooo,
			  c->jitter_ns / 1e3, (unsigned long long)c->bad);
	}
	wo_printf(w, "}\n");
}

/* ------------------------------------------------------------ ending */

static void close_fds(struct worker *w, struct conn *c, int reset)
{
	if (c->fd >= 0) {
		if (reset) {
			/* an abrupt end: RST tells the peer at once, and nothing lingers */
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };

			setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	if (c->ufd >= 0) {
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
		close(c->ufd);
		c->ufd = -1;
	}
}

static void conn_finish(struct worker *w, struct conn *c, const char *status, int reset)
{
	int64_t now = now_ns();

	if (c->state == CS_FINISHED)
		return;
	c->finish_ns = now;
	if (c->state == CS_RUNNING && now > c->t0_ns)
		report_interval(w, c, now);
	conn_end_line(w, c, status);
	close_fds(w, c, reset);
	c->state = CS_FINISHED;
	if (w->side == SIDE_SERVER) {
		session_conn_done(c);
	} else if (++w->nfinished == w->n) {
		w->done = 1;
		notify(G.notify_fd);
	}
}

static void conn_fail(struct worker *w, struct conn *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void conn_fail(struct worker *w, struct conn *c, const char *fmt, ...)
{
	va_list ap;

	if (c->state == CS_FINISHED)
		return;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	sanitize(c->err);
	c->failed = 1;
	if (w->side == SIDE_CLIENT) {
		set_error("connection %u to %s: %s", c->index, c->peer, c->err);
		G.abort_all = 1;
		notify(G.notify_fd);
	}
	conn_finish(w, c, "error", 1);
}

static void maybe_finish(struct worker *w, struct conn *c)
{
	if (c->state != CS_RUNNING)
		return;
	if (!c->wr_closed || !c->eof || c->zc_done < c->zc_sends)
		return;
	if (c->p->proto == P_UDP && c->receiving && !c->recv_done)
		return;
	conn_finish(w, c, "ok", 0);
}

static void shut_wr(struct worker *w, struct conn *c)
{
	if (c->wr_closed)
		return;
	if (shutdown(c->fd, SHUT_WR) && errno != ENOTCONN) {
		conn_fail(w, c, "shutdown failed: %s", strerror(errno));
		return;
	}
	c->wr_closed = 1;
}

static void stop_sending(struct worker *w, struct conn *c)
{
	c->send_stopped = 1;
	if (c->p->proto == P_UDP) {
		uint8_t fin[FIN_LEN];

		ep_set(w, c, 1, c->receiving ? EPOLLIN : 0);
		fin_encode(fin, c->tx_pkts, c->tx_bytes);
		/* the flow's TCP connection is idle: 32 bytes always fit */
		if (send(c->fd, fin, FIN_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) != FIN_LEN) {
			conn_fail(w, c, "cannot send the flow's totals: %s", strerror(errno));
			return;
		}
	} else {
		ep_set(w, c, 0, c->events & ~(uint32_t)EPOLLOUT);
	}
	shut_wr(w, c);
}

/* ------------------------------------------------------------ TCP data */

static void on_eof(struct worker *w, struct conn *c)
{
	c->eof = 1;
	if (c->p->proto == P_UDP) {
		/* nothing more comes on the flow's TCP connection, and once both
		 * sides are shut down EPOLLHUP would fire on every wait */
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		c->events = 0;
	} else {
		ep_set(w, c, 0, c->events & ~(uint32_t)(EPOLLIN | EPOLLRDHUP));
	}
	if (c->state != CS_RUNNING) {
		/* A UDP flow's receiver sends nothing on its TCP connection and shuts
		 * it down at its own start (conn_start): that FIN may reach this end
		 * before this thread is woken for the same start (a busy CPU, another
		 * host's clock).  Only a peer that was to send has ended too early;
		 * a receiver that dies is seen on the control connection. */
		if (c->p->proto == P_UDP && !c->receiving)
			return;
		conn_fail(w, c, "the peer closed the connection before the start time");
		return;
	}
	if (!c->sending && c->p->proto == P_TCP)
		shut_wr(w, c);
}

static void tcp_recv(struct worker *w, struct conn *c)
{
	int trunc = c->p->recv_mode == R_TRUNC;
	size_t io = c->p->io;

	for (int i = 0; i < BUDGET; i++) {
		ssize_t n = trunc ? recv(c->fd, NULL, io, MSG_DONTWAIT | MSG_TRUNC) :
			    recv(c->fd, w->rbuf, io, MSG_DONTWAIT);

		if (n > 0) {
			if (!c->first_rx_ns)
				c->first_rx_ns = now_ns();
			c->rx_bytes += (uint64_t)n;
			continue;
		}
		if (n == 0) {
			on_eof(w, c);
			return;
		}
		if (errno == EAGAIN)
			return;
		if (errno == EINTR)
			continue;
		conn_fail(w, c, "receive failed: %s%s", strerror(errno),
			  errno == ECONNRESET ? " (the peer was killed or aborted?)" : "");
		return;
	}
}

static int zc_reap(struct worker *w, struct conn *c)
{
	int got = 0;

	for (;;) {
		char control[256];
		struct msghdr m = { .msg_control = control, .msg_controllen = sizeof(control) };

		if (recvmsg(c->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			break;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			struct sock_extended_err *ee;

			if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
			      (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
				continue;
			ee = (struct sock_extended_err *)CMSG_DATA(cm);
			if (ee->ee_origin != SO_EE_ORIGIN_ZEROCOPY) {
				conn_fail(w, c, "socket error: %s", strerror((int)ee->ee_errno));
				return -1;
			}
			uint32_t k = ee->ee_data - ee->ee_info + 1;

			c->zc_done += k;
			if (ee->ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
				c->zc_copied += k;
			got = 1;
		}
	}
	if (got && c->zc_blocked) {
		c->zc_blocked = 0;
		if (!c->send_stopped)
			ep_set(w, c, 0, c->events | EPOLLOUT);
	}
	return got;
}

static void tcp_send(struct worker *w, struct conn *c, int budget, size_t io)
{
	int mode = c->p->send_mode, fdin = -1;
	struct iovec iov = { .iov_base = w->sbuf, .iov_len = io };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (mode == S_SENDFILE) {
		fdin = worker_memfd(w, c->p->io);
		if (fdin < 0) {
			conn_fail(w, c, "cannot make sendfile's memory file: %s", strerror(errno));
			return;
		}
	}
	for (int i = 0; i < budget; i++) {
		int64_t t = now_ns();
		ssize_t n;

		if (t >= c->end_ns) {
			stop_sending(w, c);
			return;
		}
		if (!c->first_tx_ns)
			c->first_tx_ns = t;
		switch (mode) {
		case S_SENDMSG: n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL); break;
		case S_ZEROCOPY: n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL | MSG_ZEROCOPY); break;
		case S_SENDFILE: {
			off_t off = 0;

			n = sendfile(c->fd, fdin, &off, io);
			break;
		}
		default: n = send(c->fd, w->sbuf, io, MSG_DONTWAIT | MSG_NOSIGNAL); break;
		}
		if (n > 0) {
			c->tx_bytes += (uint64_t)n;
			if (mode == S_ZEROCOPY)
				c->zc_sends++;
			continue;
		}
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ENOBUFS && mode == S_ZEROCOPY) {
			/* out of option memory for pending completions: reap, else wait for them */
			if (zc_reap(w, c) > 0)
				continue;
			c->zc_blocked = 1;
			ep_set(w, c, 0, c->events & ~(uint32_t)EPOLLOUT);
			return;
		}
		conn_fail(w, c, "send failed: %s%s", n == 0 ? "sent nothing" : strerror(errno),
			  errno == ECONNRESET || errno == EPIPE ? " (the peer was killed or aborted?)" : "");
		return;
	}
}

/* ------------------------------------------------------------ UDP data */

static void udp_send(struct worker *w, struct conn *c, int64_t now)
{
	const struct params *p = c->p;
	uint64_t due;
	double gap_ns = p->rate_bps ? (double)p->io * 8e9 / (double)p->rate_bps : 0;

	if (now >= c->end_ns) {
		stop_sending(w, c);
		return;
	}
	if (p->rate_bps) {
		uint64_t by_now = (uint64_t)((double)(now - p->start_ns) / gap_ns) + 1;

		due = by_now > c->tx_pkts ? by_now - c->tx_pkts : 0;
		if (due > 4 * UDP_BATCH)
			due = 4 * UDP_BATCH;      /* behind: catch up over several turns */
	} else {
		due = (uint64_t)BUDGET * UDP_BATCH;
	}
	while (due) {
		unsigned k = due < UDP_BATCH ? (unsigned)due : UDP_BATCH;
		int64_t t = now_ns();

		if (!c->first_tx_ns)
			c->first_tx_ns = t;
		for (unsigned j = 0; j < k; j++) {
			uint8_t *h = w->hdrs + (size_t)j * UDP_HDR;
			uint32_t magic = htobe32(UDP_MAGIC);
			uint64_t seq = htobe64(c->seq + j), sess = htobe64(p->session), tx = htobe64((uint64_t)t);

			memcpy(h, &magic, 4);
			memset(h + 4, 0, 4);
			memcpy(h + 8, &seq, 8);
			memcpy(h + 16, &tx, 8);
			memcpy(h + 24, &sess, 8);
			w->iov[2 * j] = (struct iovec){ h, UDP_HDR };
			w->iov[2 * j + 1] = (struct iovec){ w->sbuf, p->io - UDP_HDR };
			memset(&w->mm[j], 0, sizeof(w->mm[j]));
			w->mm[j].msg_hdr.msg_iov = &w->iov[2 * j];
			w->mm[j].msg_hdr.msg_iovlen = 2;
		}
		int n = sendmmsg(c->ufd, w->mm, k, MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) {
				/* the socket or device queue is full: not loss, just later */
				if (!p->rate_bps)
					return;
				c->udp_next_ns = now_ns() + 50000;
				return;
			}
			conn_fail(w, c, "UDP send failed: %s%s", strerror(errno),
				  errno == ECONNREFUSED ? " (the peer's port is closed: was it killed?)" : "");
			return;
		}
		c->tx_pkts += (uint64_t)n;
		c->seq += (uint64_t)n;
		c->tx_bytes += (uint64_t)n * p->io;
		due -= (uint64_t)n;
		if ((unsigned)n < k)
			break;
	}
	if (p->rate_bps)
		c->udp_next_ns = p->start_ns + (int64_t)((double)c->tx_pkts * gap_ns);
}

static void udp_recv_done(struct worker *w, struct conn *c)
{
	c->recv_done = 1;
	ep_set(w, c, 1, 0);
	if (!c->sending)
		shut_wr(w, c);
}

static void udp_recv(struct worker *w, struct conn *c)
{
	int trunc = c->p->recv_mode == R_TRUNC;
	size_t cms = CMSG_SPACE(sizeof(struct timespec));

	for (int i = 0; i < BUDGET; i++) {
		for (unsigned j = 0; j < UDP_BATCH; j++) {
			w->iov[2 * j] = (struct iovec){ w->hdrs + (size_t)j * UDP_HDR, UDP_HDR };
			w->iov[2 * j + 1] = (struct iovec){ w->rbuf, c->p->io };
			memset(&w->mm[j], 0, sizeof(w->mm[j]));
			w->mm[j].msg_hdr.msg_iov = &w->iov[2 * j];
			w->mm[j].msg_hdr.msg_iovlen = trunc ? 1 : 2;     /* MSG_TRUNC: the header only, no payload copy */
			w->mm[j].msg_hdr.msg_control = w->cmsgs + j * cms;
			w->mm[j].msg_hdr.msg_controllen = cms;
		}
		int n = recvmmsg(c->ufd, w->mm, UDP_BATCH, MSG_DONTWAIT | (trunc ? MSG_TRUNC : 0), NULL);

		if (n < 0) {
			if (errno == EAGAIN)
				return;
			if (errno == EINTR || errno == ECONNREFUSED)
				continue;    /* a stale ICMP error of our own sends; the flow's TCP connection tells */
			conn_fail(w, c, "UDP receive failed: %s", strerror(errno));
			return;
		}
		int64_t fallback = now_ns();

		for (int j = 0; j < n; j++) {
			const uint8_t *h = w->hdrs + (size_t)j * UDP_HDR;
			uint32_t magic;
			uint64_t seq, sess;
			int64_t sent, arrived = fallback, transit;
			struct msghdr *mh = &w->mm[j].msg_hdr;

			memcpy(&magic, h, 4);
			memcpy(&sess, h + 24, 8);
			if (w->mm[j].msg_len < UDP_HDR || be32toh(magic) != UDP_MAGIC || be64toh(sess) != c->p->session) {
				c->bad++;
				continue;
			}
			memcpy(&seq, h + 8, 8);
			memcpy(&sent, h + 16, 8);
			seq = be64toh(seq);
			sent = (int64_t)be64toh((uint64_t)sent);
			for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
				if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
					struct timespec ts;

					memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
					arrived = (int64_t)ts.tv_sec * NS + ts.tv_nsec;
				}
			}
			if (!c->first_rx_ns)
				c->first_rx_ns = arrived;
			c->rx_pkts++;
			c->rx_bytes += w->mm[j].msg_len;
			if (seq >= c->max_seq_plus1)
				c->max_seq_plus1 = seq + 1;
			else
				c->ooo++;
			/* RFC 3550 6.4.1: J += (|D(i-1,i)| - J) / 16, D from the transit times
			 * (a constant clock offset between the ends cancels out) */
			transit = arrived - sent;
			if (c->have_transit) {
				double d = (double)(transit - c->prev_transit);

				c->jitter_ns += ((d < 0 ? -d : d) - c->jitter_ns) / 16.0;
			}
			c->prev_transit = transit;
			c->have_transit = 1;
		}
	}
}

/* The flow's TCP connection after the handshake: the peer's FIN record (if it
 * sends), then its FIN. */
static void udp_ctl_read(struct worker *w, struct conn *c)
{
	for (;;) {
		uint8_t tmp[64];
		ssize_t n = recv(c->fd, tmp, sizeof(tmp), MSG_DONTWAIT);

		if (n == 0) {
			if (c->receiving && !c->got_fin) {
				conn_fail(w, c, "the peer closed the flow without its totals (killed or aborted?)");
				return;
			}
			on_eof(w, c);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN)
				return;
			if (errno == EINTR)
				continue;
			conn_fail(w, c, "the flow's TCP connection failed: %s", strerror(errno));
			return;
		}
		if (c->got_fin || !c->receiving || c->hlen + (size_t)n > FIN_LEN) {
			conn_fail(w, c, "unexpected bytes on the flow's TCP connection");
			return;
		}
		memcpy(c->hbuf + c->hlen, tmp, (size_t)n);
		c->hlen += (uint32_t)n;
		if (magic_prefix_ok(c->hbuf, c->hlen, MAGIC_FIN)) {
			conn_fail(w, c, "garbled totals on the flow's TCP connection");
			return;
		}
		if (c->hlen == FIN_LEN) {
			fin_decode(c->hbuf, &c->peer_tx_pkts, &c->peer_tx_bytes);
			c->got_fin = 1;
			c->fin_ns = now_ns();
			udp_recv(w, c);          /* what is queued already */
			if (c->rx_pkts >= c->peer_tx_pkts)
				udp_recv_done(w, c);
			w->next_timer = 0;       /* the drain deadline is a new timer */
		}
	}
}

/* ------------------------------------------------------------ handshake (client) */

static void client_connected(struct worker *w, struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);
	uint8_t b[HELLO_LEN];
	struct hello h = { .kind = K_DATA, .conn_index = c->index, .p = *c->p };

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err) {
		conn_fail(w, c, "cannot connect: %s", strerror(err));
		return;
	}
	if (c->ufd >= 0) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		getsockname(c->ufd, (struct sockaddr *)&ss, &sl);
		h.udp_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
					  ((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	h.sent_ns = c->hello_sent_ns = now_ns();
	hello_encode(b, &h);
	if (send(c->fd, b, HELLO_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) != HELLO_LEN) {
		conn_fail(w, c, "cannot send the handshake: %s", strerror(errno));
		return;
	}
	c->state = CS_WAIT_ACK;
	ep_set(w, c, 0, EPOLLIN);
}

static void hexdump(char *dst, size_t n, const uint8_t *b, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && i < 8 && o + 3 < n; i++)
		o += (size_t)snprintf(dst + o, n - o, "%02x", b[i]);
	if (n)
		dst[o < n ? o : n - 1] = 0;
}

static void client_read_ack(struct worker *w, struct conn *c)
{
	ssize_t n = recv(c->fd, c->hbuf + c->hlen, ACK_LEN - c->hlen, MSG_DONTWAIT);
	char hex[24], why[200];
	struct ack a;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_fail(w, c, "the server %s during the handshake: is it an nbperf server?",
			  n == 0 ? "closed the connection" : strerror(errno));
		return;
	}
	c->hlen += (uint32_t)n;
	if (magic_prefix_ok(c->hbuf, c->hlen, MAGIC_ACK)) {
		hexdump(hex, sizeof(hex), c->hbuf, c->hlen);
		conn_fail(w, c, "the server answered bytes %s, not nbperf's handshake: another program "
			  "(an iperf3 server?) listens on that port", hex);
		return;
	}
	if (c->hlen < ACK_LEN)
		return;
	ack_decode(c->hbuf, &a);
	c->hlen = 0;
	if (a.status) {
		sanitize(a.msg);
		conn_fail(w, c, "the server refused the connection: %s", a.msg);
		return;
	}
	int64_t now = now_ns();

	c->clock_rtt_ns = now - c->hello_sent_ns;
	c->clock_offset_ns = a.server_ns - (c->hello_sent_ns + now) / 2;
	if (c->ufd >= 0) {
		struct sockaddr_storage ss = G.srv;

		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = htons(a.udp_port);
		else
			((struct sockaddr_in6 *)&ss)->sin6_port = htons(a.udp_port);
		if (connect(c->ufd, (struct sockaddr *)&ss, G.srv_len)) {
			conn_fail(w, c, "cannot connect the UDP socket: %s", strerror(errno));
			return;
		}
		ep_add(w, c, 1, c->receiving ? EPOLLIN : 0);
	}
	c->state = CS_READY;
	if (send_ready(w, c, why, sizeof(why))) {
		conn_fail(w, c, "%s", why);
		return;
	}
	c->kin_mark = ACK_LEN;       /* the server's handshake: the only bytes before the data */
	ep_set(w, c, 0, EPOLLIN | EPOLLRDHUP);
	if (++w->nready == w->n) {
		w->ready = 1;
		notify(G.notify_fd);
	}
}

static void client_open(struct worker *w, struct conn *c)
{
	const struct params *p = c->p;
	char why[200];
	int type = p->proto == P_UDP ? SOCK_DGRAM : SOCK_STREAM;

	addr_str(&G.srv, c->peer, sizeof(c->peer));
	c->fd = socket(G.srv.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		conn_fail(w, c, "socket: %s", strerror(errno));
		return;
	}
	if (p->proto == P_TCP && apply_sock_opts(c->fd, p, c->sending, 1, why, sizeof(why))) {
		conn_fail(w, c, "%s", why);
		return;
	}
	if (G.bind_len && bind(c->fd, (struct sockaddr *)&G.bind_addr, G.bind_len)) {
		conn_fail(w, c, "cannot bind to the --bind address: %s", strerror(errno));
		return;
	}
	if (p->proto == P_UDP) {
		int one = 1;

		(void)type;
		c->ufd = socket(G.srv.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->ufd < 0 || apply_sock_opts(c->ufd, p, c->sending, 0, why, sizeof(why))) {
			conn_fail(w, c, "UDP socket: %s", c->ufd < 0 ? strerror(errno) : why);
			return;
		}
		setsockopt(c->ufd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
		struct sockaddr_storage any = G.bind_len ? G.bind_addr : (struct sockaddr_storage){ 0 };
		socklen_t al = G.bind_len ? G.bind_len : G.srv_len;

		any.ss_family = G.srv.ss_family;
		if (any.ss_family == AF_INET)
			((struct sockaddr_in *)&any)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&any)->sin6_port = 0;
		if (bind(c->ufd, (struct sockaddr *)&any, al)) {
			conn_fail(w, c, "cannot bind the UDP socket: %s", strerror(errno));
			return;
		}
	}
	if (connect(c->fd, (struct sockaddr *)&G.srv, G.srv_len) && errno != EINPROGRESS) {
		conn_fail(w, c, "cannot connect: %s", strerror(errno));
		return;
	}
	c->state = CS_CONNECTING;
	ep_add(w, c, 0, EPOLLOUT);
}

/* ------------------------------------------------------------ handshake (server) */

/* A data connection the accept thread handed over (hello already read):
 * socket options, the UDP socket if any, then the ack. */
static void server_setup(struct worker *w, struct conn *c)
{
	char why[200] = "";
	uint8_t b[ACK_LEN];
	struct ack a = { .thread = (uint32_t)w->index };
	const struct params *p = c->p;
	int one = 1;

	worker_add(w, c);
	if (apply_sock_opts(c->fd, p, c->sending, p->proto == P_TCP, why, sizeof(why)))
		goto refuse;
	if (p->proto == P_UDP) {
		struct sockaddr_storage local, peer;
		socklen_t ll = sizeof(local), pl = sizeof(peer);

		getsockname(c->fd, (struct sockaddr *)&local, &ll);
		getpeername(c->fd, (struct sockaddr *)&peer, &pl);
		if (local.ss_family == AF_INET) {
			((struct sockaddr_in *)&local)->sin_port = 0;
			((struct sockaddr_in *)&peer)->sin_port = htons(c->peer_udp_port);
		} else {
			((struct sockaddr_in6 *)&local)->sin6_port = 0;
			((struct sockaddr_in6 *)&peer)->sin6_port = htons(c->peer_udp_port);
		}
		c->ufd = socket(local.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->ufd < 0 || apply_sock_opts(c->ufd, p, c->sending, 0, why, sizeof(why)) ||
		    bind(c->ufd, (struct sockaddr *)&local, ll) || connect(c->ufd, (struct sockaddr *)&peer, pl)) {
			if (!why[0])
				snprintf(why, sizeof(why), "UDP socket: %s", strerror(errno));
			goto refuse;
		}
		setsockopt(c->ufd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
		getsockname(c->ufd, (struct sockaddr *)&local, &ll);
		a.udp_port = ntohs(local.ss_family == AF_INET ? ((struct sockaddr_in *)&local)->sin_port :
				   ((struct sockaddr_in6 *)&local)->sin6_port);
		ep_add(w, c, 1, c->receiving ? EPOLLIN : 0);
	}
	if (send_ready(w, c, why, sizeof(why)))
		goto refuse;
	a.server_ns = now_ns();
	ack_encode(b, &a);
	if (send(c->fd, b, ACK_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) != ACK_LEN) {
		c->state = CS_READY;
		conn_fail(w, c, "cannot send the handshake: %s", strerror(errno));
		return;
	}
	c->state = CS_READY;
	c->kin_mark = HELLO_LEN;     /* the client's hello: the only bytes before the data */
	ep_add(w, c, 0, EPOLLIN | EPOLLRDHUP);
	w->next_timer = 0;
	return;
refuse:
	a.status = 1;
	snprintf(a.msg, sizeof(a.msg), "%s", why);
	a.server_ns = now_ns();
	ack_encode(b, &a);
	if (send(c->fd, b, ACK_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the failure below is what counts */
	}
	c->state = CS_READY;
	conn_fail(w, c, "%s", why);
}

/* ------------------------------------------------------------ the loop */

static void conn_start(struct worker *w, struct conn *c)
{
	c->state = CS_RUNNING;
	if (!c->sending) {
		c->send_stopped = 1;
		if (c->p->proto == P_UDP)
			shut_wr(w, c);    /* nothing to send: no totals to announce */
		return;
	}
	if (c->p->proto == P_TCP) {
		/* one short send right away: with many connections per thread,
		 * waiting for epoll to reach each one would spread the starts over
		 * many ms; and a short one (at most FIRST_SEND bytes) lets every
		 * connection of every thread on this CPU have its first byte out
		 * before any of them does a whole io's work */
		tcp_send(w, c, 1, c->p->io < FIRST_SEND ? c->p->io : FIRST_SEND);
		if (c->state == CS_RUNNING && !c->send_stopped && !c->zc_blocked)
			ep_set(w, c, 0, c->events | EPOLLOUT);
	}
	else if (!c->p->rate_bps)
		ep_set(w, c, 1, c->uevents | EPOLLOUT);
	else
		c->udp_next_ns = c->p->start_ns;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Starts, ends, interval boundaries, UDP pacing and drains, deadlines. */
static void timers(struct worker *w, int64_t now)
{
	int64_t next = INT64_MAX;
	int reported = 0, running = 0;

	for (int i = 0; i < w->n; i++) {
		struct conn *c = w->c[i];

		if (c->state == CS_FINISHED)
			continue;
		if (c->state == CS_READY && now >= c->p->start_ns)
			conn_start(w, c);
		if (c->state == CS_RUNNING) {
			if (c->sending && !c->send_stopped && now >= c->end_ns)
				stop_sending(w, c);
			if (c->state == CS_RUNNING && now >= c->next_report_ns) {
				report_interval(w, c, now_ns());
				reported = 1;
				while (c->next_report_ns <= now)
					c->next_report_ns += c->p->interval_ns;
			}
			if (c->p->proto == P_UDP && c->sending && !c->send_stopped && c->p->rate_bps &&
			    now >= c->udp_next_ns)
				udp_send(w, c, now);
			if (c->p->proto == P_UDP && c->receiving && c->got_fin && !c->recv_done &&
			    now >= c->fin_ns + UDP_DRAIN_NS)
				udp_recv_done(w, c);
			maybe_finish(w, c);
		}
		if (c->state != CS_FINISHED && now >= c->deadline_ns)
			conn_fail(w, c, "not finished by the deadline (start + duration + grace): the peer stalled, "
				  "or the link drains too slowly for --grace");
		if (c->state == CS_FINISHED)
			continue;
		next = min64(next, c->deadline_ns);
		if (c->state < CS_RUNNING) {
			next = min64(next, c->p->start_ns);
			continue;
		}
		running++;
		next = min64(next, c->next_report_ns);
		if (c->sending && !c->send_stopped) {
			next = min64(next, c->end_ns);
			if (c->p->proto == P_UDP && c->p->rate_bps)
				next = min64(next, c->udp_next_ns);
		}
		if (c->got_fin && !c->recv_done)
			next = min64(next, c->fin_ns + UDP_DRAIN_NS);
	}
	if (reported)
		thread_line(w, now_ns());
	w->nrunning = running;
	w->next_timer = next;
}

static void abort_conns(struct worker *w, const char *why)
{
	for (int i = 0; i < w->n; i++) {
		struct conn *c = w->c[i];

		if (c->state != CS_FINISHED && (w->side == SIDE_CLIENT || (c->sess && c->sess->aborted) || G.stop)) {
			if (!c->err[0])
				snprintf(c->err, sizeof(c->err), "%s", why);
			conn_finish(w, c, "aborted", 1);
		}
	}
}

static void take_inbox(struct worker *w)
{
	struct conn **got;
	int n;

	pthread_mutex_lock(&w->inlock);
	got = w->inbox;
	n = w->nin;
	w->inbox = NULL;
	w->nin = w->capin = 0;
	pthread_mutex_unlock(&w->inlock);
	for (int i = 0; i < n; i++)
		server_setup(w, got[i]);
	free(got);
}

/* Server: drop finished connections (their results are in the session). */
static void compact(struct worker *w)
{
	int j = 0;

	for (int i = 0; i < w->n; i++) {
		if (w->c[i]->state == CS_FINISHED)
			free(w->c[i]);
		else
			w->c[j++] = w->c[i];
	}
	w->n = j;
}

static void dispatch(struct worker *w, struct epoll_event *ev)
{
	struct conn *c = (struct conn *)(uintptr_t)(ev->data.u64 & ~TAG_UDP);
	int udp = (int)(ev->data.u64 & TAG_UDP);
	uint32_t e = ev->events;

	if (c->state == CS_FINISHED)
		return;
	if (udp) {
		if (e & EPOLLERR) {
			int err = 0;
			socklen_t len = sizeof(err);

			getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len);
			if (err && err != ECONNREFUSED) {
				conn_fail(w, c, "UDP socket error: %s", strerror(err));
				return;
			}
		}
		if ((e & EPOLLIN) && c->receiving && !c->recv_done)
			udp_recv(w, c);
		if (c->state == CS_RUNNING && (e & EPOLLOUT) && c->sending && !c->send_stopped)
			udp_send(w, c, now_ns());
		if (c->got_fin && !c->recv_done && c->rx_pkts >= c->peer_tx_pkts)
			udp_recv_done(w, c);
		maybe_finish(w, c);
		return;
	}
	if (c->state == CS_CONNECTING) {
		client_connected(w, c);
		return;
	}
	if (c->state == CS_WAIT_ACK) {
		client_read_ack(w, c);
		return;
	}
	if (e & EPOLLERR) {
		if (c->p->send_mode == S_ZEROCOPY && c->sending && zc_reap(w, c) < 0)
			return;
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			conn_fail(w, c, "connection error: %s%s", strerror(err),
				  err == ECONNRESET || err == EPIPE ? " (the peer was killed or aborted?)" : "");
			return;
		}
	}
	if ((e & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) && !c->eof) {
		if (c->p->proto == P_TCP)
			tcp_recv(w, c);
		else
			udp_ctl_read(w, c);
	}
	if (c->state == CS_RUNNING && (e & EPOLLOUT) && c->sending && !c->send_stopped)
		tcp_send(w, c, BUDGET, c->p->io);
	maybe_finish(w, c);
}

/* From the last 2 ms before a start until its first sends, a thread runs
 * SCHED_FIFO (where allowed): woken at the start it then preempts whatever
 * else runs on its CPU -- another program, or a bulk sender -- instead of
 * waiting for the scheduler's next turn (measured: up to 0.9 ms late on a
 * busy 2-CPU machine without it, against ~0.1 ms with).  It drops back to
 * SCHED_OTHER right after its first sends, a few microseconds per
 * connection. */
static void rt_start(struct worker *w, int on)
{
	struct sched_param sp = { .sched_priority = on ? 1 : 0 };

	if (!G.rt_start || w->rt == on)
		return;
	if (pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &sp) == 0)
		w->rt = on;
	else if (on)
		G.rt_refused = 1;
}

static void precise_sleep_until(int64_t t)
{
	struct timespec ts = { .tv_sec = t / NS, .tv_nsec = t % NS };

	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[MAX_EVENTS];
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);     /* the main thread takes the signals */
	prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);       /* wake at the start time, not 50 us later */
	worker_buffers(w, w->side == SIDE_CLIENT && G.conns ? G.conns[0].p->io : MAX_IO);
	if (w->side == SIDE_CLIENT) {
		for (int i = 0; i < w->n; i++)
			client_open(w, w->c[i]);
		if (w->n == 0) {
			w->ready = w->done = 1;
			notify(G.notify_fd);
			return NULL;
		}
	}
	for (;;) {
		int64_t now = now_ns();

		if (w->side == SIDE_CLIENT && G.abort_all) {
			abort_conns(w, "stopped: another connection failed, or the client was stopped");
			break;
		}
		if (w->side == SIDE_SERVER && w->poked) {
			/* the accept thread handed over connections, failed a session, or stops us */
			w->poked = 0;
			take_inbox(w);
			if (G.stop) {
				abort_conns(w, "the server stopped before the end of the test");
				compact(w);
				break;
			}
			abort_conns(w, "the session failed");
		}
		if (now >= w->next_timer) {
			int was_running = w->nrunning;

			timers(w, now);
			/* the start: every connection of this thread has made its first
			 * send; let the other threads woken on this CPU (other clients
			 * of the same point, in a lab) make theirs before going on */
			if (!was_running && w->nrunning) {
				rt_start(w, 0);
				sched_yield();
			}
		}
		if (w->side == SIDE_SERVER)
			compact(w);
		if (w->side == SIDE_CLIENT && w->nfinished == w->n)
			break;
		now = now_ns();
		int64_t wait = w->next_timer == INT64_MAX ? NS : w->next_timer - now;

		if (wait < 0)
			wait = 0;
		if (wait > NS)
			wait = NS;
		if (w->nrunning == 0 && wait > 0 && wait <= PRECISE_NS && w->next_timer != INT64_MAX) {
			/* nothing runs on this thread yet: sleep to the start itself, to the nanosecond */
			rt_start(w, 1);
			precise_sleep_until(w->next_timer);
			continue;
		}
		if (w->nrunning == 0 && wait > PRECISE_NS && w->next_timer != INT64_MAX)
			wait -= PRECISE_NS;
		struct timespec ts = { .tv_sec = wait / NS, .tv_nsec = wait % NS };
		int n = epoll_pwait2(w->epfd, evs, MAX_EVENTS, &ts, NULL);

		if (n < 0 && errno != EINTR)
			die(EX_ERR, "epoll_pwait2: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 0) {
				drain_fd(w->evfd);
				w->poked = 1;
				continue;
			}
			dispatch(w, &evs[i]);
		}
		wo_flush(w);
	}
	thread_line(w, now_ns());
	wo_flush(w);
	w->done = 1;
	notify(G.notify_fd);
	return NULL;
}
