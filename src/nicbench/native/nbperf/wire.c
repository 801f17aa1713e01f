// SPDX-License-Identifier: GPL-2.0
/* nbperf's wire format: fixed offsets, big-endian, so two builds on different
 * machines (or compilers) agree without relying on struct layout. */
#include "nbperf.h"

#include <endian.h>
#include <string.h>

const uint8_t MAGIC_HELLO[MAGIC_LEN] = { 'N', 'B', 'P', 'E', 'R', 'F', 0, 1 };
const uint8_t MAGIC_ACK[MAGIC_LEN] = { 'N', 'B', 'P', 'E', 'R', 'F', 0, 2 };
const uint8_t MAGIC_DONE[MAGIC_LEN] = { 'N', 'B', 'P', 'E', 'R', 'F', 0, 3 };
const uint8_t MAGIC_RESULT[MAGIC_LEN] = { 'N', 'B', 'P', 'E', 'R', 'F', 0, 4 };
const uint8_t MAGIC_FIN[MAGIC_LEN] = { 'N', 'B', 'P', 'E', 'R', 'F', 0, 5 };

static void put16(uint8_t *b, uint16_t v) { v = htobe16(v); memcpy(b, &v, 2); }
static void put32(uint8_t *b, uint32_t v) { v = htobe32(v); memcpy(b, &v, 4); }
static void put64(uint8_t *b, uint64_t v) { v = htobe64(v); memcpy(b, &v, 8); }
static uint16_t get16(const uint8_t *b) { uint16_t v; memcpy(&v, b, 2); return be16toh(v); }
static uint32_t get32(const uint8_t *b) { uint32_t v; memcpy(&v, b, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *b) { uint64_t v; memcpy(&v, b, 8); return be64toh(v); }

static void put_str(uint8_t *b, const char *s, size_t n)
{
	size_t len = strnlen(s, n - 1);

	memset(b, 0, n);
	memcpy(b, s, len);
}

static void get_str(char *dst, const uint8_t *b, size_t n)
{
	memcpy(dst, b, n);
	dst[n - 1] = 0;
}

void hello_encode(uint8_t *b, const struct hello *h)
{
	const struct params *p = &h->p;

	memset(b, 0, HELLO_LEN);
	memcpy(b, MAGIC_HELLO, MAGIC_LEN);
	put32(b + 8, PROTO_VERSION);
	put32(b + 12, h->kind);
	put64(b + 16, p->session);
	put_str(b + 24, p->test, 32);
	put32(b + 56, h->conn_index);
	put32(b + 60, p->conns);
	b[64] = p->proto;
	b[65] = p->dir;
	b[66] = p->send_mode;
	b[67] = p->recv_mode;
	b[68] = p->nodelay;
	put32(b + 72, p->io);
	put32(b + 76, p->sndbuf);
	put32(b + 80, p->rcvbuf);
	put32(b + 84, p->mss);
	put32(b + 88, p->busy_poll);
	put_str(b + 92, p->cc, 16);
	put64(b + 112, (uint64_t)p->start_ns);
	put64(b + 120, (uint64_t)p->duration_ns);
	put64(b + 128, (uint64_t)p->interval_ns);
	put64(b + 136, (uint64_t)p->grace_ns);
	put64(b + 144, p->rate_bps);
	put16(b + 152, h->udp_port);
	put64(b + 160, (uint64_t)h->sent_ns);
}

/* The caller has checked the magic; the version is checked by the server. */
void hello_decode(const uint8_t *b, struct hello *h)
{
	struct params *p = &h->p;

	memset(h, 0, sizeof(*h));
	h->kind = get32(b + 12);
	p->session = get64(b + 16);
	get_str(p->test, b + 24, 32);
	h->conn_index = get32(b + 56);
	p->conns = get32(b + 60);
	p->proto = b[64];
	p->dir = b[65];
	p->send_mode = b[66];
	p->recv_mode = b[67];
	p->nodelay = b[68];
	p->io = get32(b + 72);
	p->sndbuf = get32(b + 76);
	p->rcvbuf = get32(b + 80);
	p->mss = get32(b + 84);
	p->busy_poll = get32(b + 88);
	get_str(p->cc, b + 92, 16);
	p->start_ns = (int64_t)get64(b + 112);
	p->duration_ns = (int64_t)get64(b + 120);
	p->interval_ns = (int64_t)get64(b + 128);
	p->grace_ns = (int64_t)get64(b + 136);
	p->rate_bps = get64(b + 144);
	h->udp_port = get16(b + 152);
	h->sent_ns = (int64_t)get64(b + 160);
}

uint32_t hello_version(const uint8_t *b)
{
	return get32(b + 8);
}

void ack_encode(uint8_t *b, const struct ack *a)
{
	memset(b, 0, ACK_LEN);
	memcpy(b, MAGIC_ACK, MAGIC_LEN);
	put32(b + 8, a->status);
	put32(b + 12, a->thread);
	put64(b + 16, (uint64_t)a->server_ns);
	put16(b + 24, a->udp_port);
	put_str(b + 32, a->msg, sizeof(a->msg));
}

void ack_decode(const uint8_t *b, struct ack *a)
{
	memset(a, 0, sizeof(*a));
	a->status = get32(b + 8);
	a->thread = get32(b + 12);
	a->server_ns = (int64_t)get64(b + 16);
	a->udp_port = get16(b + 24);
	get_str(a->msg, b + 32, sizeof(a->msg));
}

void sumhdr_encode(uint8_t *b, const uint8_t *magic, uint32_t status, uint32_t n, const char *msg)
{
	memset(b, 0, SUMHDR_LEN);
	memcpy(b, magic, MAGIC_LEN);
	put32(b + 8, status);
	put32(b + 12, n);
	put_str(b + 16, msg ? msg : "", 112);
}

void sumhdr_decode(const uint8_t *b, uint32_t *status, uint32_t *n, char *msg, size_t msgsz)
{
	char tmp[112];

	*status = get32(b + 8);
	*n = get32(b + 12);
	get_str(tmp, b + 16, sizeof(tmp));
	if (msg && msgsz) {
		strncpy(msg, tmp, msgsz - 1);
		msg[msgsz - 1] = 0;
	}
}

void rec_encode(uint8_t *b, const struct rec *r)
{
	memset(b, 0, REC_LEN);
	put64(b, r->tx_bytes);
	put64(b + 8, r->rx_bytes);
	put64(b + 16, r->tx_packets);
	put64(b + 24, r->rx_packets);
	put32(b + 32, r->status);
}

void rec_decode(const uint8_t *b, struct rec *r)
{
	r->tx_bytes = get64(b);
	r->rx_bytes = get64(b + 8);
	r->tx_packets = get64(b + 16);
	r->rx_packets = get64(b + 24);
	r->status = get32(b + 32);
}

void fin_encode(uint8_t *b, uint64_t packets, uint64_t bytes)
{
	memset(b, 0, FIN_LEN);
	memcpy(b, MAGIC_FIN, MAGIC_LEN);
	put64(b + 8, packets);
	put64(b + 16, bytes);
}

void fin_decode(const uint8_t *b, uint64_t *packets, uint64_t *bytes)
{
	*packets = get64(b + 8);
	*bytes = get64(b + 16);
}

int magic_prefix_ok(const uint8_t *b, size_t n, const uint8_t *magic)
{
	return memcmp(b, magic, n < MAGIC_LEN ? n : MAGIC_LEN) ? -1 : 0;
}

/* Values a server must not accept from the wire (the client checks the same
 * on its command line, with friendlier messages). */
const char *params_check(const struct params *p)
{
	if (p->proto > P_UDP || p->dir > D_BIDIR || p->send_mode > S_SENDFILE || p->recv_mode > R_TRUNC)
		return "unknown protocol, direction or I/O mode";
	if (p->conns < 1 || p->conns > MAX_CONNS)
		return "connection count out of range";
	if (p->proto == P_TCP && (p->io < 1 || p->io > MAX_IO))
		return "io size out of range";
	if (p->proto == P_UDP && (p->io < UDP_HDR || p->io > MAX_UDP_IO))
		return "UDP datagram size out of range";
	if (p->proto == P_UDP && (p->send_mode == S_ZEROCOPY || p->send_mode == S_SENDFILE))
		return "zerocopy and sendfile are TCP only";
	if (p->duration_ns <= 0 || p->duration_ns > (int64_t)(MAX_DURATION_S * NS))
		return "duration out of range";
	if (p->interval_ns < NS / 1000 || p->grace_ns < 0 || p->grace_ns > 60 * NS)
		return "interval or grace out of range";
	return NULL;
}
