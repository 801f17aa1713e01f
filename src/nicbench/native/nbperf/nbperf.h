// SPDX-License-Identifier: GPL-2.0
/* nbperf: nicbench's multi-threaded TCP/UDP traffic engine -- shared declarations.
 *
 * Times are int64 nanoseconds of CLOCK_REALTIME ("ns") unless named otherwise:
 * both ends stamp with the wall clock so that intervals of different hosts
 * line up (to the clocks' agreement).
 */
#ifndef NBPERF_H
#define NBPERF_H

#define _GNU_SOURCE
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define NBPERF_VERSION "1.1.0"
#define PROTO_VERSION 1

#define MAX_IO (4u << 20)        /* TCP read/write size limit, bytes */
#define MAX_UDP_IO 65507u        /* largest UDP payload over IPv4 */
#define UDP_HDR 32u              /* our header at the front of each datagram */
#define MAX_THREADS 256
#define MAX_CONNS 100000
#define MAX_AHEAD_NS (60ll * 1000000000ll)     /* --start at most this far ahead */
#define MAX_DURATION_S 86400.0
#define UDP_BATCH 64             /* datagrams per sendmmsg/recvmmsg */
#define UDP_DRAIN_NS (200ll * 1000000ll)       /* stragglers after the sender's totals */
#define HELLO_TIMEOUT_NS (5ll * 1000000000ll)  /* server: a connection must say hello by then */
#define LAST_RESORT_S 5          /* SIGALRM this long after the hard deadline: _exit */
#define NS 1000000000ll

/* exit codes */
enum { EX_OK = 0, EX_ERR = 1, EX_USAGE = 2, EX_STOPPED = 3 };

enum proto { P_TCP = 0, P_UDP = 1 };
enum dir { D_TX = 0, D_RX = 1, D_BIDIR = 2 };            /* tx: client -> server */
enum sendmode { S_SEND = 0, S_SENDMSG = 1, S_ZEROCOPY = 2, S_SENDFILE = 3 };
enum recvmode { R_COPY = 0, R_TRUNC = 1 };
enum side { SIDE_CLIENT = 0, SIDE_SERVER = 1 };

/* ------------------------------------------------------------ wire format
 * Every connection opens with a 256-byte hello from the client and a 128-byte
 * ack from the server (fields big-endian at fixed offsets, see wire.c).  The
 * first connection of a client process is its control connection; it carries
 * the test's parameters and, at the end, the client's per-connection totals
 * (DONE) and the server's (RESULT).  Data connections name the session and
 * their index.  Magics differ per message so a peer speaking anything else is
 * caught on its first bytes. */
#define HELLO_LEN 256
#define ACK_LEN 128
#define SUMHDR_LEN 128           /* DONE / RESULT header */
#define REC_LEN 48               /* per-connection record in DONE / RESULT */
#define FIN_LEN 32               /* UDP flow: the sender's totals on the flow's TCP connection */
#define MAGIC_LEN 8
extern const uint8_t MAGIC_HELLO[MAGIC_LEN], MAGIC_ACK[MAGIC_LEN], MAGIC_DONE[MAGIC_LEN],
	MAGIC_RESULT[MAGIC_LEN], MAGIC_FIN[MAGIC_LEN];
#define UDP_MAGIC 0x4e425544u    /* "NBUD" */

enum { K_CONTROL = 1, K_DATA = 2 };

/* ------------------------------------------------------------ flags between threads
 * What one thread tells another without a lock is a C11 atomic.  A flag
 * that makes the other thread act (stop, abort, ready, done) is set with
 * release and read with acquire: what the setter wrote before it -- the
 * first error, a connection's clock offset -- is what the reader sees.
 * Counters read only to be reported are relaxed. */
static inline void flag_set(atomic_bool *f)
{
	atomic_store_explicit(f, true, memory_order_release);
}

static inline bool flag_is(atomic_bool *f)
{
	return atomic_load_explicit(f, memory_order_acquire);
}

/* One test, as the client's command line describes it (both ends use it). */
struct params {
	char test[32];
	uint64_t session;            /* random per client process */
	uint32_t conns;
	uint8_t proto, dir, send_mode, recv_mode, nodelay;
	uint32_t io, sndbuf, rcvbuf, mss, busy_poll;
	char cc[16];
	int64_t start_ns, duration_ns, interval_ns, grace_ns;
	uint64_t rate_bps;           /* UDP: payload bits/s per flow and direction, 0 = unpaced */
};

struct hello {
	uint32_t kind;
	uint32_t conn_index;
	uint16_t udp_port;           /* data, UDP: the client's UDP port */
	int64_t sent_ns;             /* client's clock when sent */
	struct params p;
};

struct ack {
	uint32_t status;             /* 0 ok, 1 refused (msg says why) */
	uint32_t thread;
	int64_t server_ns;           /* server's clock when sent */
	uint16_t udp_port;
	char msg[96];
};

struct rec {                     /* one connection's totals, as one end saw them */
	uint64_t tx_bytes, rx_bytes, tx_packets, rx_packets;
	uint32_t status;             /* 0 ok, 1 failed, 2 never connected */
};

void hello_encode(uint8_t *b, const struct hello *h);
void hello_decode(const uint8_t *b, struct hello *h);
uint32_t hello_version(const uint8_t *b);
void ack_encode(uint8_t *b, const struct ack *a);
void ack_decode(const uint8_t *b, struct ack *a);
void sumhdr_encode(uint8_t *b, const uint8_t *magic, uint32_t status, uint32_t n, const char *msg);
void sumhdr_decode(const uint8_t *b, uint32_t *status, uint32_t *n, char *msg, size_t msgsz);
void rec_encode(uint8_t *b, const struct rec *r);
void rec_decode(const uint8_t *b, struct rec *r);
void fin_encode(uint8_t *b, uint64_t packets, uint64_t bytes);
void fin_decode(const uint8_t *b, uint64_t *packets, uint64_t *bytes);
/* 0 while the first n bytes of b match magic; -1 once they differ */
int magic_prefix_ok(const uint8_t *b, size_t n, const uint8_t *magic);
const char *params_check(const struct params *p);   /* NULL or why the values are unusable */

/* ------------------------------------------------------------ connections */
enum cstate {
	CS_CONNECTING,               /* client: connect() in progress */
	CS_WAIT_ACK,                 /* client: hello sent */
	CS_NEW,                      /* server: hello read by the accept thread, not acked yet */
	CS_READY,                    /* handshake done, waiting for the start time */
	CS_RUNNING,
	CS_FINISHED,
};

struct session;
struct worker;

struct conn {
	int fd;                      /* TCP: the data connection; UDP: the flow's TCP connection */
	int ufd;                     /* UDP socket, or -1 */
	uint32_t index;              /* connection index within its client process */
	enum cstate state;
	struct worker *w;
	const struct params *p;
	struct session *sess;        /* server only */
	char peer[64];
	uint16_t peer_udp_port;      /* server: the client's UDP port from its hello */

	int sending, receiving;      /* what this end does on this connection */
	int send_stopped;            /* reached the end time (or aborted) */
	int wr_closed;               /* shutdown(SHUT_WR) done (after the UDP fin record) */
	int eof;                     /* the peer's FIN seen on fd */
	int recv_done;               /* UDP: the peer's totals seen and stragglers waited for */
	int zc_blocked;              /* MSG_ZEROCOPY ran out of option memory: wait for completions */
	int failed;
	uint32_t events;             /* epoll mask of fd */
	uint32_t uevents;            /* epoll mask of ufd */

	int64_t end_ns, deadline_ns, next_report_ns, t0_ns;
	uint64_t tx_bytes, rx_bytes, tx_pkts, rx_pkts;
	uint64_t tx_mark, rx_mark, txp_mark, rxp_mark, lost_mark, ooo_mark;
	uint32_t retrans_mark;
	uint64_t kin_mark;           /* TCP: tcpi_bytes_received at the last report (control bytes at first) */
	int64_t first_tx_ns, first_rx_ns, last_rx_ns, finish_ns;

	uint64_t zc_sends, zc_done, zc_copied;

	/* UDP */
	uint64_t seq;                /* next sequence number to send */
	int64_t udp_next_ns;         /* paced: when the next datagram is due */
	uint64_t max_seq_plus1;      /* highest sequence seen + 1 */
	uint64_t ooo;                /* datagrams older than one already seen */
	uint64_t bad;                /* datagrams without our header */
	double jitter_ns;            /* RFC 3550 interarrival jitter */
	int64_t prev_transit;
	int have_transit;
	int got_fin;
	uint64_t peer_tx_pkts, peer_tx_bytes;
	int64_t fin_ns;

	uint8_t hbuf[HELLO_LEN];     /* handshake / fin record being read */
	uint32_t hlen;
	int64_t hello_sent_ns;
	int64_t clock_offset_ns, clock_rtt_ns;     /* client: server clock - ours, from the ack */
	char err[200];
};

/* ------------------------------------------------------------ server sessions */
struct session {
	struct session *next;
	struct params p;
	char peer[64];
	int ctl_fd;
	int state;                   /* SS_ACTIVE, SS_OK, SS_FAILED */
	int64_t deadline_ns;
	int64_t started_ns;
	/* guarded by G.lock */
	uint32_t connected, finished;
	uint8_t *seen;               /* per connection index: a data connection arrived */
	struct rec *res;             /* per connection: what this server counted */
	char err[400];
	atomic_bool aborted;         /* workers close this session's connections (flag_set/flag_is) */
	/* control connection input: DONE header + records */
	uint8_t *dbuf;
	size_t dlen, dneed;
	int got_done;
	uint32_t done_status;
	struct rec *client_recs;
};
enum { SS_ACTIVE, SS_OK, SS_FAILED };

/* ------------------------------------------------------------ workers */
struct worker {
	int index, cpu;
	pthread_t tid;
	int epfd, evfd;
	int side;
	struct conn **c;
	int n, cap;
	pthread_mutex_t inlock;      /* server: connections handed over by the accept thread */
	struct conn **inbox;
	int nin, capin;
	uint8_t *sbuf, *rbuf;        /* MAX_IO each, shared by this thread's connections */
	int memfd;                   /* sendfile source, made on first use */
	size_t memfd_size;
	int64_t next_timer;
	atomic_int nready, nfinished;    /* client: written by this thread only; relaxed, the main thread reports them */
	int nrunning;                /* connections past their start, as of the last timer scan */
	atomic_bool ready, done;     /* client: all connections ready / finished (flag_set/flag_is) */
	int poked;                   /* server: the eventfd fired: look at the inbox and aborts */
	int rt;                      /* running SCHED_FIFO around a start */
	char *out;                   /* output being built, flushed in one write */
	size_t outlen, outcap;
	struct mmsghdr *mm;
	struct iovec *iov;
	uint8_t *hdrs, *cmsgs;
	double utime, stime;         /* last RUSAGE_THREAD */
};

/* ------------------------------------------------------------ process-wide */
struct global {
	int side;
	pthread_mutex_t lock;        /* output, first error, sessions */
	atomic_bool abort_all;       /* client: stop every connection now (flag_set/flag_is) */
	atomic_bool stop;            /* server: leave (flag_set/flag_is) */
	int notify_fd;               /* eventfd: workers -> main thread */
	int nworkers;
	struct worker *w;
	char first_error[400];
	int rt_start;                /* raise threads to SCHED_FIFO around the start (default) */
	atomic_bool rt_refused;      /* ... and the kernel said no (no CAP_SYS_NICE); relaxed, read after the join */
	/* client: where the connections go */
	struct sockaddr_storage srv, bind_addr;
	socklen_t srv_len, bind_len;
	struct conn *conns;
};
extern struct global G;

/* util.c */
int64_t now_ns(void);
int64_t mono_ns(void);
void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int parse_size(const char *s, uint64_t *out);       /* 128K = 131072 */
int parse_rate(const char *s, uint64_t *out);       /* 1G = 1e9 */
int parse_seconds(const char *s, double *out);
int parse_abs_time(const char *s, int64_t *out_ns); /* epoch seconds, or +S from now */
int parse_cpus(const char *s, int *cpus, int max);
int default_cpus(int *cpus, int max);
int cpu_not_allowed(const int *cpus, int n);
void release_fd(int fd);
void notify(int fd);
void drain_fd(int fd);
void out_write(const char *s, size_t n);
void out_start(void);
void out_drain(void);
void wo_printf(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wo_flush(struct worker *w);
double tv_s(long sec, long usec);
const char *rt_start_word(void);
const char *dir_name(int d);
const char *proto_name(int p);
const char *send_name(int s);
const char *recv_name(int r);
void json_str(char *dst, size_t n, const char *s);  /* escaped, with quotes */
void sanitize(char *s);
int raise_nofile(uint64_t need, uint64_t *soft, uint64_t *hard);
int set_nonblock(int fd);
void addr_str(const struct sockaddr_storage *ss, char *buf, size_t n);
int apply_sock_opts(int fd, const struct params *p, int will_send, int tcp, char *why, size_t whysz);
void hard_deadline_alarm(int64_t deadline_ns);

/* worker.c: the worker threads (what client.c and server.c call) */
void worker_init(struct worker *w, int index, int cpu, int side);
void *worker_main(void *arg);
int worker_start(struct worker *w);
void worker_add(struct worker *w, struct conn *c);
void worker_handoff(struct worker *w, struct conn *c);
void conn_init(struct conn *c, const struct params *p, uint32_t index, int side);

/* ------------------------------------------------------------ inside the worker threads
 * Called only by a worker thread, on its own connections. */
#define BUDGET 16                /* I/O calls per connection per wakeup: fair among a thread's connections */

/* worker.c: epoll registration, the end of a connection */
int worker_memfd(struct worker *w, size_t size);
int send_ready(struct worker *w, struct conn *c, char *why, size_t n);
int ep_set(struct worker *w, struct conn *c, int udp, uint32_t ev);     /* -1: the connection failed */
void ep_add(struct worker *w, struct conn *c, int udp, uint32_t ev);
void conn_finish(struct worker *w, struct conn *c, const char *status, int reset);
void conn_fail(struct worker *w, struct conn *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void maybe_finish(struct worker *w, struct conn *c);
void shut_wr(struct worker *w, struct conn *c);
void stop_sending(struct worker *w, struct conn *c);

/* report.c: the JSON lines of a worker */
void thread_line(struct worker *w, int64_t t);
void report_interval(struct worker *w, struct conn *c, int64_t t1);
void conn_end_line(struct worker *w, struct conn *c, const char *status);

/* tcp.c: a TCP connection's data (and the peer's FIN on a UDP flow's connection) */
void on_eof(struct worker *w, struct conn *c);
void tcp_recv(struct worker *w, struct conn *c);
int zc_reap(struct worker *w, struct conn *c);
void tcp_send(struct worker *w, struct conn *c, int budget, size_t io);

/* udp.c: a UDP flow's datagrams and the totals on its TCP connection */
void udp_send(struct worker *w, struct conn *c, int64_t now);
void udp_recv_done(struct worker *w, struct conn *c);
void udp_recv(struct worker *w, struct conn *c);
void udp_ctl_read(struct worker *w, struct conn *c);

/* client_worker.c: a client's data connection until it is ready */
void client_open(struct worker *w, struct conn *c);
void client_connected(struct worker *w, struct conn *c);
void client_read_ack(struct worker *w, struct conn *c);

/* server_worker.c: a server's data connections, from the accept thread's hand-over */
void server_setup(struct worker *w, struct conn *c);
void take_inbox(struct worker *w);
void compact(struct worker *w);

/* client.c / server.c */
int cmd_client(int argc, char **argv);
int cmd_server(int argc, char **argv);
void session_conn_done(struct conn *c);              /* server.c: a data connection finished */

#endif
