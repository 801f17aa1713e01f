// SPDX-License-Identifier: GPL-2.0
/* nbperf worker threads: a TCP connection's data -- receiving, sending (send,
 * sendmsg, MSG_ZEROCOPY and its completions, sendfile) and the peer's FIN
 * (also that of a UDP flow's TCP connection). */
#include "nbperf.h"

#include <errno.h>
#include <linux/errqueue.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>

void on_eof(struct worker *w, struct conn *c)
{
	c->eof = 1;
	if (c->p->proto == P_UDP) {
		/* nothing more comes on the flow's TCP connection, and once both
		 * sides are shut down EPOLLHUP would fire on every wait */
		if (epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL)) {
			conn_fail(w, c, "epoll_ctl: %s", strerror(errno));
			return;
		}
		c->events = 0;
	} else if (ep_set(w, c, 0, c->events & ~(uint32_t)(EPOLLIN | EPOLLRDHUP))) {
		return;
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

void tcp_recv(struct worker *w, struct conn *c)
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

int zc_reap(struct worker *w, struct conn *c)
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
		if (!c->send_stopped && ep_set(w, c, 0, c->events | EPOLLOUT))
			return -1;
	}
	return got;
}

void tcp_send(struct worker *w, struct conn *c, int budget, size_t io)
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
