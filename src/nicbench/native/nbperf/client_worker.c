// SPDX-License-Identifier: GPL-2.0
/* nbperf worker threads, client side: each data connection's socket(s),
 * non-blocking connect, hello and ack (the server's clock offset and UDP
 * port), until it is ready for the start. */
#include "nbperf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

void client_connected(struct worker *w, struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);
	uint8_t b[HELLO_LEN];
	struct hello h = { .kind = K_DATA, .conn_index = c->index, .p = *c->p };

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	if (err) {
		conn_fail(w, c, "cannot connect: %s", strerror(err));
		return;
	}
	if (c->ufd >= 0) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (getsockname(c->ufd, (struct sockaddr *)&ss, &sl)) {
			conn_fail(w, c, "cannot read the UDP socket's port: %s", strerror(errno));
			return;
		}
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

void client_read_ack(struct worker *w, struct conn *c)
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
	if (ep_set(w, c, 0, EPOLLIN | EPOLLRDHUP))
		return;
	if (atomic_fetch_add_explicit(&w->nready, 1, memory_order_relaxed) + 1 == w->n) {
		flag_set(&w->ready);    /* after every clock offset of this thread's connections */
		notify(G.notify_fd);
	}
}

void client_open(struct worker *w, struct conn *c)
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
		/* the kernel's receive stamps: without them jitter would be the reader's */
		if (setsockopt(c->ufd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one))) {
			conn_fail(w, c, "UDP socket: SO_TIMESTAMPNS refused: %s", strerror(errno));
			return;
		}
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
