// SPDX-License-Identifier: GPL-2.0
/* nbperf worker threads: one pinned thread drives many connections through
 * one epoll set -- the start at an absolute time, timers (interval reports,
 * UDP pacing and drains), dispatching epoll events, the end of each
 * connection, and the hard deadline.  The rest of a worker's work is in
 * files of their own: client_worker.c (a client's connect and handshake),
 * server_worker.c (a server's hand-over and ack), tcp.c and udp.c (the
 * data), report.c (the JSON lines).
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

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define TAG_UDP 1ull
#define MAX_EVENTS 128
#define FIRST_SEND 1024u       /* bytes: each connection's first write */
#define PRECISE_NS (2ll * 1000000ll)   /* sleep the last 2 ms before a start with clock_nanosleep */

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
	atomic_init(&w->nready, 0);
	atomic_init(&w->nfinished, 0);
	atomic_init(&w->ready, false);
	atomic_init(&w->done, false);
	int rc = pthread_mutex_init(&w->inlock, NULL);

	if (rc)
		die(EX_ERR, "pthread_mutex_init: %s", strerror(rc));
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->epfd < 0 || w->evfd < 0)
		die(EX_ERR, "cannot create epoll/eventfd: %s", strerror(errno));
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = 0 };

	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &e))
		die(EX_ERR, "epoll_ctl: %s", strerror(errno));
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
int worker_memfd(struct worker *w, size_t size)
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
int send_ready(struct worker *w, struct conn *c, char *why, size_t n)
{
	if (c->sending && c->p->proto == P_TCP && c->p->send_mode == S_SENDFILE &&
	    worker_memfd(w, c->p->io) < 0) {
		snprintf(why, n, "cannot make sendfile's memory file: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* -1 when epoll refused: the connection has failed then (conn_fail). */
int ep_set(struct worker *w, struct conn *c, int udp, uint32_t ev)
{
	uint32_t *cur = udp ? &c->uevents : &c->events;
	int fd = udp ? c->ufd : c->fd;
	struct epoll_event e = { .events = ev, .data.u64 = (uint64_t)(uintptr_t)c | (udp ? TAG_UDP : 0) };

	if (fd < 0 || *cur == ev)
		return 0;
	if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, fd, &e)) {
		conn_fail(w, c, "epoll_ctl: %s", strerror(errno));
		return -1;
	}
	*cur = ev;
	return 0;
}

void ep_add(struct worker *w, struct conn *c, int udp, uint32_t ev)
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

/* w's thread, pinned to its CPU: 0, or the error number (pthread_create's,
 * or the attribute's that pins it). */
int worker_start(struct worker *w)
{
	pthread_attr_t attr;
	cpu_set_t set;
	int rc = pthread_attr_init(&attr);

	if (rc)
		return rc;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	rc = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	if (!rc)
		rc = pthread_create(&w->tid, &attr, worker_main, w);
	(void)pthread_attr_destroy(&attr);       /* glibc: always 0 */
	return rc;
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

/* ------------------------------------------------------------ ending */

static void close_fds(struct worker *w, struct conn *c, int reset)
{
	if (c->fd >= 0) {
		if (reset) {
			/* an abrupt end: RST tells the peer at once, and nothing lingers */
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };

			/* refused, the close is an orderly one: the peer still learns of the end */
			(void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		/* ENOENT for a UDP flow's connection on_eof took out already; the
		 * close takes it out of the epoll set anyway */
		(void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		release_fd(c->fd);
		c->fd = -1;
	}
	if (c->ufd >= 0) {
		(void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
		release_fd(c->ufd);
		c->ufd = -1;
	}
}

void conn_finish(struct worker *w, struct conn *c, const char *status, int reset)
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
	} else if (atomic_fetch_add_explicit(&w->nfinished, 1, memory_order_relaxed) + 1 == w->n) {
		flag_set(&w->done);
		notify(G.notify_fd);
	}
}

void conn_fail(struct worker *w, struct conn *c, const char *fmt, ...)
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
		flag_set(&G.abort_all);      /* after set_error: the main thread reports that first error */
		notify(G.notify_fd);
	}
	conn_finish(w, c, "error", 1);
}

void maybe_finish(struct worker *w, struct conn *c)
{
	if (c->state != CS_RUNNING)
		return;
	if (!c->wr_closed || !c->eof || c->zc_done < c->zc_sends)
		return;
	if (c->p->proto == P_UDP && c->receiving && !c->recv_done)
		return;
	conn_finish(w, c, "ok", 0);
}

void shut_wr(struct worker *w, struct conn *c)
{
	if (c->wr_closed)
		return;
	if (shutdown(c->fd, SHUT_WR) && errno != ENOTCONN) {
		conn_fail(w, c, "shutdown failed: %s", strerror(errno));
		return;
	}
	c->wr_closed = 1;
}

void stop_sending(struct worker *w, struct conn *c)
{
	c->send_stopped = 1;
	if (c->p->proto == P_UDP) {
		uint8_t fin[FIN_LEN];

		if (ep_set(w, c, 1, c->receiving ? EPOLLIN : 0))
			return;
		fin_encode(fin, c->tx_pkts, c->tx_bytes);
		/* the flow's TCP connection is idle: 32 bytes always fit */
		if (send(c->fd, fin, FIN_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) != FIN_LEN) {
			conn_fail(w, c, "cannot send the flow's totals: %s", strerror(errno));
			return;
		}
	} else if (ep_set(w, c, 0, c->events & ~(uint32_t)EPOLLOUT)) {
		return;
	}
	shut_wr(w, c);
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

		if (c->state != CS_FINISHED && (w->side == SIDE_CLIENT || (c->sess && flag_is(&c->sess->aborted)) ||
						   flag_is(&G.stop))) {
			if (!c->err[0])
				snprintf(c->err, sizeof(c->err), "%s", why);
			conn_finish(w, c, "aborted", 1);
		}
	}
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

			if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len))
				err = errno;
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

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len))
			err = errno;
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
		atomic_store_explicit(&G.rt_refused, true, memory_order_relaxed);
}

static void precise_sleep_until(int64_t t)
{
	struct timespec ts = { .tv_sec = t / NS, .tv_nsec = t % NS };

	/* any other error (there is none for a valid absolute time) leaves the
	 * rest of the wait to epoll */
	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event evs[MAX_EVENTS];
	sigset_t all;
	int rc;

	sigfillset(&all);
	rc = pthread_sigmask(SIG_BLOCK, &all, NULL);     /* the main thread takes the signals */
	if (rc)
		die(EX_ERR, "pthread_sigmask: %s", strerror(rc));
	/* wake at the start time, not 50 us later; refused (it is not, for a
	 * positive slack), only the start's precision would suffer */
	(void)prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
	worker_buffers(w, w->side == SIDE_CLIENT && G.conns ? G.conns[0].p->io : MAX_IO);
	if (w->side == SIDE_CLIENT) {
		for (int i = 0; i < w->n; i++)
			client_open(w, w->c[i]);
		if (w->n == 0) {
			flag_set(&w->ready);
			flag_set(&w->done);
			notify(G.notify_fd);
			return NULL;
		}
	}
	for (;;) {
		int64_t now = now_ns();

		if (w->side == SIDE_CLIENT && flag_is(&G.abort_all)) {
			abort_conns(w, "stopped: another connection failed, or the client was stopped");
			break;
		}
		if (w->side == SIDE_SERVER && w->poked) {
			/* the accept thread handed over connections, failed a session, or stops us */
			w->poked = 0;
			take_inbox(w);
			if (flag_is(&G.stop)) {
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
				(void)sched_yield();     /* always succeeds on Linux */
			}
		}
		if (w->side == SIDE_SERVER)
			compact(w);
		if (w->side == SIDE_CLIENT && atomic_load_explicit(&w->nfinished, memory_order_relaxed) == w->n)
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
	flag_set(&w->done);
	notify(G.notify_fd);
	return NULL;
}
