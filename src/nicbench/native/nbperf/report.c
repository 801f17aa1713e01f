// SPDX-License-Identifier: GPL-2.0
/* nbperf worker threads: the JSON lines they print about their connections
 * -- interval reports, the per-thread CPU line, each connection's end line. */
#include "nbperf.h"

#include <linux/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#define TS(ns) (long long)((ns) / NS), (long long)(((ns) % NS) / 1000)   /* "%lld.%06lld" */

static const char *side_name(int side)
{
	return side == SIDE_SERVER ? "server" : "client";
}

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

void thread_line(struct worker *w, int64_t t)
{
	struct rusage ru;

	/* it cannot fail with these arguments; if it did, the last reading stands */
	if (getrusage(RUSAGE_THREAD, &ru) == 0) {
		w->utime = tv_s(ru.ru_utime.tv_sec, ru.ru_utime.tv_usec);
		w->stime = tv_s(ru.ru_stime.tv_sec, ru.ru_stime.tv_usec);
	}
	wo_printf(w, "{\"event\":\"thread\",\"side\":\"%s\",\"thread\":%d,\"cpu\":%d,\"t\":%lld.%06lld,"
		  "\"utime\":%.6f,\"stime\":%.6f,\"conns\":%d}\n", side_name(w->side), w->index, w->cpu, TS(t),
		  w->utime, w->stime, w->n);
}

void report_interval(struct worker *w, struct conn *c, int64_t t1)
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

void conn_end_line(struct worker *w, struct conn *c, const char *status)
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
