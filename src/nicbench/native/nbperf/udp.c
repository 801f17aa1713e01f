// SPDX-License-Identifier: GPL-2.0
/* nbperf worker threads: a UDP flow's datagrams -- paced or unpaced sends
 * (sendmmsg), receives (recvmmsg, kernel stamps, loss, reordering, RFC 3550
 * jitter), and the sender's totals on the flow's TCP connection. */
#include "nbperf.h"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

void udp_send(struct worker *w, struct conn *c, int64_t now)
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

void udp_recv_done(struct worker *w, struct conn *c)
{
	c->recv_done = 1;
	if (ep_set(w, c, 1, 0))
		return;
	if (!c->sending)
		shut_wr(w, c);
}

void udp_recv(struct worker *w, struct conn *c)
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
void udp_ctl_read(struct worker *w, struct conn *c)
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
