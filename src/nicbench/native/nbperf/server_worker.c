// SPDX-License-Identifier: GPL-2.0
/* nbperf worker threads, server side: the data connections the accept
 * thread hands over (socket options, the UDP socket, the ack), and dropping
 * the finished ones. */
#include "nbperf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

/* A data connection the accept thread handed over (hello already read):
 * socket options, the UDP socket if any, then the ack. */
void server_setup(struct worker *w, struct conn *c)
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

		if (getsockname(c->fd, (struct sockaddr *)&local, &ll) ||
		    getpeername(c->fd, (struct sockaddr *)&peer, &pl)) {
			snprintf(why, sizeof(why), "cannot read the connection's addresses: %s", strerror(errno));
			goto refuse;
		}
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
		/* the kernel's receive stamps: without them jitter would be the reader's */
		if (setsockopt(c->ufd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one))) {
			snprintf(why, sizeof(why), "UDP socket: SO_TIMESTAMPNS refused: %s", strerror(errno));
			goto refuse;
		}
		if (getsockname(c->ufd, (struct sockaddr *)&local, &ll)) {
			snprintf(why, sizeof(why), "cannot read the UDP socket's port: %s", strerror(errno));
			goto refuse;
		}
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
	snprintf(a.msg, sizeof(a.msg), "%.*s", (int)sizeof(a.msg) - 1, why);    /* the ack has room for 95 */
	a.server_ns = now_ns();
	ack_encode(b, &a);
	if (send(c->fd, b, ACK_LEN, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the failure below is what counts */
	}
	c->state = CS_READY;
	conn_fail(w, c, "%s", why);
}

void take_inbox(struct worker *w)
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
void compact(struct worker *w)
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
