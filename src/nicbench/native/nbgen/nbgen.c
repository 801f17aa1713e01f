// SPDX-License-Identifier: GPL-2.0
/* nbgen: nicbench's packet generator and receiver counter, on XDP.
 *
 *   nbgen tx --dev IF --frame HEX [--frame HEX ...] --duration S
 *            [--threads N] [--cpus 0,1] [--rate PPS] [--interval S]
 *   nbgen rx --dev IF --duration S [--port P] [--pass]
 *            [--xdp auto|native|generic] [--interval S]
 *   nbgen version
 *
 * tx sends the given Ethernet frames (header .. payload, no FCS) with XDP
 * "live frames": BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (kernel >= 5.18)
 * runs nb_tx on each frame in a kernel page pool and its XDP_TX verdict
 * transmits it on --dev through the driver's XDP transmit path -- no socket,
 * no skb, no qdisc.  One thread per frame (or --threads), each pinned to a CPU
 * when --cpus is given, sends its own frame (nicbench varies the UDP source
 * port per thread so a multi-queue receiver spreads them).
 *
 * rx attaches nb_rx to --dev through a BPF link: the kernel detaches it when
 * the link's file descriptor closes, so the program cannot outlive this
 * process on any exit path, SIGKILL included.
 *
 * Output: JSON lines on stdout, one per --interval with cumulative counts,
 * and a last line with "event": "end".  Errors: one line on stderr starting
 * "nbgen: ", exit 2 (usage), 3 (privileges), 4 (not supported), 1 (other).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nbgen.skel.h"

#define NBGEN_VERSION "1.0.0"
#define MAX_THREADS 64
#define MAX_FRAME 9216
#define LIVE_BATCH 64          /* frames per batch inside one run (kernel max 256) */

enum { EX_OK = 0, EX_ERR = 1, EX_USAGE = 2, EX_PERM = 3, EX_UNSUPP = 4 };

enum { C_MATCHED = 0, C_OTHER = 1, C_SENT = 2, C_PACED = 3 };   /* as in nbgen.bpf.c */

struct counter {
	uint64_t packets;
	uint64_t bytes;
};

static volatile sig_atomic_t stop_now;

static void on_signal(int sig)
{
	(void)sig;
	stop_now = 1;
}

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("nbgen: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static double now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's warnings go to stderr only with NBGEN_DEBUG set: nicbench
	 * shows the tail of stderr in its errors, and wants our line there. */
	(void)level;
	if (getenv("NBGEN_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

static int exit_code_for(int err)
{
	err = err < 0 ? -err : err;
	return (err == EPERM || err == EACCES) ? EX_PERM :
	       (err == EOPNOTSUPP || err == ENOTSUP || err == EINVAL) ? EX_UNSUPP : EX_ERR;
}

static void load_or_die(struct nbgen_bpf *skel)
{
	int err = nbgen_bpf__load(skel);

	if (err) {
		if (err == -EPERM || err == -EACCES)
			die(EX_PERM, "loading XDP programs was refused (%s): it needs CAP_BPF, CAP_PERFMON and "
			    "CAP_NET_ADMIN -- run as root", strerror(-err));
		die(exit_code_for(err), "the kernel refused the XDP programs: %s", strerror(-err));
	}
}

static void sum_counter(int map_fd, uint32_t key, struct counter *out, uint64_t *per_cpu, int ncpu)
{
	struct counter vals[ncpu];

	memset(out, 0, sizeof(*out));
	if (bpf_map_lookup_elem(map_fd, &key, vals))
		return;
	for (int i = 0; i < ncpu; i++) {
		out->packets += vals[i].packets;
		out->bytes += vals[i].bytes;
		if (per_cpu)
			per_cpu[i] = vals[i].packets;
	}
}

static unsigned ifindex_of(const char *dev)
{
	unsigned idx = if_nametoindex(dev);

	if (!idx)
		die(EX_USAGE, "interface %s does not exist here (%s)", dev, strerror(errno));
	return idx;
}

/* ------------------------------------------------------------------ tx */

struct tx_thread {
	pthread_t tid;
	int cpu;                 /* -1: not pinned */
	int prog_fd;
	unsigned ifindex;
	unsigned char *frame;
	unsigned len;
	volatile int done;
	int pin_failed;
	double cpu_s;
	int err;                 /* -errno of a failed run (EINTR, our stop signal, is not one) */
};

static volatile sig_atomic_t tx_stop;

static void on_stop_thread(int sig)
{
	(void)sig;
	tx_stop = 1;
}

/* One BPF_PROG_RUN call per thread, as long as the kernel allows (repeat is
 * 32 bits), ended by a signal: a call costs ~25 ms to set up and tear down,
 * so short calls would mostly measure that. */
static void *tx_body(void *arg)
{
	struct tx_thread *t = arg;
	struct xdp_md ctx = { .data_end = t->len, .ingress_ifindex = t->ifindex };

	if (t->cpu >= 0) {
		cpu_set_t set;
		int err;

		CPU_ZERO(&set);
		CPU_SET(t->cpu, &set);
		err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (err) {
			/* a thread elsewhere than asked would share a CPU (and, paced,
			 * its pacing slot) with another: fail rather than mismeasure */
			t->err = -err;
			t->pin_failed = 1;
			t->done = 1;
			return NULL;
		}
	}
	while (!tx_stop && !stop_now) {
		LIBBPF_OPTS(bpf_test_run_opts, opts,
			    .data_in = t->frame, .data_size_in = t->len,
			    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
			    .repeat = UINT32_MAX, .batch_size = LIVE_BATCH,
			    .flags = BPF_F_TEST_XDP_LIVE_FRAMES);

		if (bpf_prog_test_run_opts(t->prog_fd, &opts)) {
			if (errno != EINTR)
				t->err = -errno;
			break;
		}
	}
	t->cpu_s = thread_cpu_s();
	t->done = 1;
	return NULL;
}

static int parse_hex(const char *hex, unsigned char *out, unsigned max)
{
	size_t n = strlen(hex);

	if (n % 2 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = v;
	}
	return n / 2;
}

static int parse_cpus(const char *s, int *cpus, int max)
{
	int n = 0;
	char *copy = strdup(s), *save = NULL;

	for (char *tok = strtok_r(copy, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);

		if (*end || v < 0 || v >= CPU_SETSIZE) {
			free(copy);
			return -1;
		}
		cpus[n++] = v;
	}
	free(copy);
	return n;
}

static void sleep_until(uint64_t t_ns)
{
	struct timespec ts = { .tv_sec = t_ns / 1000000000ull, .tv_nsec = t_ns % 1000000000ull };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !stop_now)
		;
}

static int cmd_tx(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, 0, 'd' }, { "frame", required_argument, 0, 'f' },
		{ "duration", required_argument, 0, 't' }, { "threads", required_argument, 0, 'n' },
		{ "cpus", required_argument, 0, 'c' }, { "rate", required_argument, 0, 'r' },
		{ "interval", required_argument, 0, 'i' }, { 0 } };
	const char *dev = NULL;
	char *frames_hex[MAX_THREADS];
	int nframes = 0, nthreads = 0, cpus[MAX_THREADS], ncpus = 0, opt;
	double duration = 0, rate = 0, interval = 1.0;
	struct tx_thread th[MAX_THREADS];
	struct nbgen_bpf *skel;
	int ncpu = libbpf_num_possible_cpus();
	double t_start, t_end;
	struct counter sent, paced;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'f':
			if (nframes == MAX_THREADS)
				die(EX_USAGE, "at most %d frames", MAX_THREADS);
			frames_hex[nframes++] = optarg;
			break;
		case 't': duration = atof(optarg); break;
		case 'n': nthreads = atoi(optarg); break;
		case 'c':
			ncpus = parse_cpus(optarg, cpus, MAX_THREADS);
			if (ncpus <= 0)
				die(EX_USAGE, "--cpus %s: want a list of CPU numbers like 0,1", optarg);
			break;
		case 'r': rate = atof(optarg); break;
		case 'i': interval = atof(optarg); break;
		default: die(EX_USAGE, "usage: nbgen tx --dev IF --frame HEX --duration S [--threads N] "
			     "[--cpus LIST] [--rate PPS] [--interval S]");
		}
	}
	if (!dev || !nframes || duration <= 0 || interval <= 0 || rate < 0)
		die(EX_USAGE, "tx needs --dev, at least one --frame and a --duration > 0");
	if (!nthreads)
		nthreads = nframes;
	if (nthreads < 1 || nthreads > MAX_THREADS)
		die(EX_USAGE, "--threads %d: between 1 and %d", nthreads, MAX_THREADS);
	if (rate > 0 && !ncpus) {
		/* pacing is per CPU: a rate needs each thread on a CPU of its own */
		int online = sysconf(_SC_NPROCESSORS_ONLN);

		if (nthreads > online)
			die(EX_USAGE, "--rate with %d threads needs %d CPUs (this host has %d)", nthreads, nthreads,
			    online);
		for (int i = 0; i < nthreads; i++)
			cpus[i] = i;
		ncpus = nthreads;
	}
	if (rate > 0 && ncpus < nthreads)
		die(EX_USAGE, "--rate: give each of the %d threads its own CPU in --cpus", nthreads);
	if (rate > 0)
		for (int i = 0; i < nthreads; i++)
			for (int j = 0; j < i; j++)
				if (cpus[i] == cpus[j])
					die(EX_USAGE, "--rate paces per CPU: threads %d and %d both on CPU %d", j, i, cpus[i]);

	unsigned ifindex = ifindex_of(dev);

	libbpf_set_print(libbpf_quiet);
	skel = nbgen_bpf__open();
	if (!skel)
		die(EX_ERR, "cannot open the embedded BPF object: %s", strerror(errno));
	if (rate > 0) {
		double gap = 1e9 * nthreads / rate;

		skel->rodata->gap_ns = (uint64_t)gap;
		skel->rodata->gap_frac = (uint64_t)((gap - (uint64_t)gap) * 65536);
	}
	skel->rodata->burst_ns = skel->rodata->gap_ns * LIVE_BATCH;
	load_or_die(skel);
	memset(th, 0, sizeof(th));
	for (int i = 0; i < nthreads; i++) {
		th[i].frame = malloc(MAX_FRAME);
		int len = parse_hex(frames_hex[i % nframes], th[i].frame, MAX_FRAME);

		if (len < 60)
			die(EX_USAGE, "--frame %d: want 60..%d bytes as hex (a 64-byte frame is 60 without its FCS)",
			    i % nframes + 1, MAX_FRAME);
		th[i].len = len;
		th[i].cpu = ncpus ? cpus[i % ncpus] : -1;
		th[i].prog_fd = bpf_program__fd(skel->progs.nb_tx);
		th[i].ifindex = ifindex;
	}
	struct sigaction sa = { .sa_handler = on_stop_thread };   /* no SA_RESTART: the run returns EINTR */

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	int map_fd = bpf_map__fd(skel->maps.counters);
	uint64_t start_ns = now_mono_ns(), end_ns = start_ns + (uint64_t)(duration * 1e9), next = start_ns;

	t_start = now_real();
	printf("{\"event\": \"start\", \"t\": %.6f, \"dev\": \"%s\", \"ifindex\": %u, \"threads\": %d, "
	       "\"rate\": %.0f, \"frame_bytes\": %u}\n", t_start, dev, ifindex, nthreads, rate, th[0].len);
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i].tid, NULL, tx_body, &th[i]))
			die(EX_ERR, "cannot start thread %d", i);
	/* the main thread reports at interval boundaries, then stops the senders */
	for (;;) {
		next += (uint64_t)(interval * 1e9);
		if (next > end_ns)
			next = end_ns;
		sleep_until(next);
		int alive = 0;

		for (int i = 0; i < nthreads; i++)
			alive += !th[i].done;
		if (next >= end_ns || stop_now || alive < nthreads)
			break;
		sum_counter(map_fd, C_SENT, &sent, NULL, ncpu);
		printf("{\"t\": %.6f, \"sent\": %llu}\n", now_real(), (unsigned long long)sent.packets);
	}
	/* a signal that lands between a thread's check and its syscall is lost:
	 * repeat it until every sender has returned */
	for (int left = nthreads; left;) {
		left = 0;
		for (int i = 0; i < nthreads; i++) {
			if (!th[i].done) {
				pthread_kill(th[i].tid, SIGUSR1);
				left++;
			}
		}
		if (left)
			usleep(2000);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i].tid, NULL);
	t_end = now_real();

	uint64_t per_cpu[ncpu];

	sum_counter(map_fd, C_SENT, &sent, per_cpu, ncpu);
	sum_counter(map_fd, C_PACED, &paced, NULL, ncpu);
	printf("{\"event\": \"end\", \"t_start\": %.6f, \"t_end\": %.6f, \"sent\": %llu, \"sent_bytes\": %llu, "
	       "\"paced_out\": %llu, \"stopped\": %s, \"per_cpu\": [", t_start, t_end,
	       (unsigned long long)sent.packets, (unsigned long long)sent.bytes, (unsigned long long)paced.packets,
	       stop_now ? "true" : "false");
	for (int i = 0; i < ncpu; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)per_cpu[i]);
	printf("], \"threads\": [");
	for (int i = 0; i < nthreads; i++)
		printf("%s{\"cpu\": %d, \"cpu_s\": %.6f, \"frame_bytes\": %u}", i ? ", " : "", th[i].cpu, th[i].cpu_s,
		       th[i].len);
	printf("]}\n");
	fflush(stdout);
	for (int i = 0; i < nthreads; i++) {
		if (th[i].err) {
			int e = -th[i].err;

			if (th[i].pin_failed)
				die(EX_USAGE, "cannot run thread %d on CPU %d (%s): is that CPU online and allowed?", i,
				    th[i].cpu, strerror(e));
			if (e == EINVAL)
				die(EX_UNSUPP, "the kernel refused a live-frames run of %u bytes on %s (%s): it needs "
				    "kernel >= 5.18 and a frame that fits one page with XDP headroom", th[i].len, dev,
				    strerror(e));
			die(exit_code_for(e), "live-frames run on %s failed: %s", dev, strerror(e));
		}
	}
	nbgen_bpf__destroy(skel);
	return EX_OK;
}

/* ------------------------------------------------------------------ rx */

static int attach(int prog_fd, unsigned ifindex, uint32_t flags)
{
	LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = flags);
	int fd = bpf_link_create(prog_fd, ifindex, BPF_XDP, &lo);

	return fd < 0 ? -errno : fd;
}

static int cmd_rx(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, 0, 'd' }, { "duration", required_argument, 0, 't' },
		{ "port", required_argument, 0, 'p' }, { "pass", no_argument, 0, 'P' },
		{ "xdp", required_argument, 0, 'x' }, { "interval", required_argument, 0, 'i' }, { 0 } };
	const char *dev = NULL, *mode = "auto", *used;
	double duration = 0, interval = 1.0;
	int port = 9, drop = 1, opt, link_fd;
	char why[160] = "";

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 't': duration = atof(optarg); break;
		case 'p': port = atoi(optarg); break;
		case 'P': drop = 0; break;
		case 'x': mode = optarg; break;
		case 'i': interval = atof(optarg); break;
		default: die(EX_USAGE, "usage: nbgen rx --dev IF --duration S [--port P] [--pass] "
			     "[--xdp auto|native|generic] [--interval S]");
		}
	}
	if (!dev || duration <= 0 || interval <= 0 || port < 1 || port > 65535)
		die(EX_USAGE, "rx needs --dev, a --duration > 0 and a --port in 1..65535");
	if (strcmp(mode, "auto") && strcmp(mode, "native") && strcmp(mode, "generic"))
		die(EX_USAGE, "--xdp %s: auto, native or generic", mode);

	unsigned ifindex = ifindex_of(dev);
	struct nbgen_bpf *skel;

	libbpf_set_print(libbpf_quiet);
	skel = nbgen_bpf__open();
	if (!skel)
		die(EX_ERR, "cannot open the embedded BPF object: %s", strerror(errno));
	skel->rodata->udp_port = port;
	skel->rodata->drop = drop;
	load_or_die(skel);
	int prog_fd = bpf_program__fd(skel->progs.nb_rx);
	int ncpu = libbpf_num_possible_cpus();

	if (strcmp(mode, "generic")) {
		link_fd = attach(prog_fd, ifindex, XDP_FLAGS_DRV_MODE);
		used = "native";
		if (link_fd < 0) {
			if (link_fd == -EPERM || link_fd == -EACCES)
				die(EX_PERM, "attaching XDP to %s was refused (%s): run as root", dev, strerror(-link_fd));
			if (link_fd == -EBUSY || link_fd == -EEXIST)
				die(EX_ERR, "%s already has an XDP program attached (%s): remove it first "
				    "(ip link set dev %s xdp off)", dev, strerror(-link_fd), dev);
			if (!strcmp(mode, "native"))
				die(EX_UNSUPP, "the driver of %s has no native XDP (%s): use xdp_mode = \"generic\"",
				    dev, strerror(-link_fd));
			snprintf(why, sizeof(why), "native XDP refused by the driver: %s", strerror(-link_fd));
		}
	} else {
		link_fd = -1;
	}
	if (link_fd < 0) {
		link_fd = attach(prog_fd, ifindex, XDP_FLAGS_SKB_MODE);
		used = "generic";
		if (link_fd < 0)
			die(exit_code_for(link_fd), "cannot attach XDP to %s, even in generic mode: %s", dev,
			    strerror(-link_fd));
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, on_signal);

	int map_fd = bpf_map__fd(skel->maps.counters);
	struct counter m, o;
	uint64_t per_cpu[ncpu];
	uint64_t start_ns = now_mono_ns(), end_ns = start_ns + (uint64_t)(duration * 1e9), next = start_ns;

	printf("{\"event\": \"attached\", \"t\": %.6f, \"dev\": \"%s\", \"ifindex\": %u, \"mode\": \"%s\", "
	       "\"why\": \"%s\", \"port\": %d, \"drop\": %s}\n", now_real(), dev, ifindex, used, why, port,
	       drop ? "true" : "false");
	fflush(stdout);
	while (!stop_now) {
		next += (uint64_t)(interval * 1e9);
		if (next > end_ns)
			next = end_ns;
		struct timespec ts = { .tv_sec = next / 1000000000ull, .tv_nsec = next % 1000000000ull };

		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			continue;
		if (next >= end_ns)
			break;
		sum_counter(map_fd, C_MATCHED, &m, NULL, ncpu);
		sum_counter(map_fd, C_OTHER, &o, NULL, ncpu);
		printf("{\"t\": %.6f, \"packets\": %llu, \"bytes\": %llu, \"other\": %llu}\n", now_real(),
		       (unsigned long long)m.packets, (unsigned long long)m.bytes, (unsigned long long)o.packets);
		fflush(stdout);
	}
	sum_counter(map_fd, C_MATCHED, &m, per_cpu, ncpu);
	sum_counter(map_fd, C_OTHER, &o, NULL, ncpu);
	close(link_fd);             /* detaches the program */
	printf("{\"event\": \"end\", \"t\": %.6f, \"packets\": %llu, \"bytes\": %llu, \"other\": %llu, "
	       "\"stopped\": %s, \"mode\": \"%s\", \"per_cpu\": [", now_real(), (unsigned long long)m.packets,
	       (unsigned long long)m.bytes, (unsigned long long)o.packets, stop_now ? "true" : "false", used);
	for (int i = 0; i < ncpu; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)per_cpu[i]);
	printf("]}\n");
	fflush(stdout);
	nbgen_bpf__destroy(skel);
	return EX_OK;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die(EX_USAGE, "usage: nbgen tx|rx|version ...");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "version")) {
		printf("nbgen %s (libbpf %s)\n", NBGEN_VERSION, libbpf_version_string());
		return EX_OK;
	}
	if (!strcmp(argv[1], "tx"))
		return cmd_tx(argc - 1, argv + 1);
	if (!strcmp(argv[1], "rx"))
		return cmd_rx(argc - 1, argv + 1);
	die(EX_USAGE, "unknown command %s: tx, rx or version", argv[1]);
	return EX_USAGE;
}
