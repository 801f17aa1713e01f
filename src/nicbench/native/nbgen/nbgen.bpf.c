// SPDX-License-Identifier: GPL-2.0
/* nicbench's XDP programs (one object, embedded in nbgen as a skeleton).
 *
 * nb_tx: run by BPF_PROG_RUN in "live frames" mode on the frame nbgen
 *   built; XDP_TX turns each run into a transmit on the ingress interface
 *   given in the run's context.  Counts per CPU what it sent.
 * nb_rx: attached to the receiver's interface; counts (per CPU) the
 *   frames of the test flow -- UDP to udp_port over IPv4 or IPv6 -- and
 *   drops them (or passes them with drop = 0).  Everything else (ARP,
 *   neighbour discovery, SSH) is passed, so the host stays reachable.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct counter {
	__u64 packets;
	__u64 bytes;     /* frame bytes the program saw: header .. payload, no FCS */
};

enum { C_MATCHED = 0, C_OTHER = 1, C_SENT = 2, C_PACED = 3, C_MAX = 4 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, struct counter);
} counters SEC(".maps");

const volatile __u16 udp_port = 9;   /* host order; set by nbgen before load */
const volatile __u32 drop = 1;
const volatile __u64 gap_ns = 0;     /* nb_tx: > 0 paces each CPU to one frame per gap */
const volatile __u64 gap_frac = 0;   /* the gap's fraction of a ns, in 1/65536 */
const volatile __u64 burst_ns = 0;   /* how far the pacing schedule may lag behind */

/* per CPU: when the next paced frame may leave, in ns and 1/65536 ns (the
 * gap is rarely a whole number of ns: 15 Mpps is 66.67 ns, and rounding it
 * would send 1 % too fast) */
struct pace_state {
	__u64 next;
	__u64 frac;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pace_state);
} pace SEC(".maps");

static __always_inline void count(__u32 key, __u64 len)
{
	struct counter *c = bpf_map_lookup_elem(&counters, &key);

	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

/* Pacing lives here, not in user space: one BPF_PROG_RUN call costs about
 * 25 ms of set-up and tear-down on this kernel (page pool, RCU), so nbgen
 * makes one long call per thread and a rate is kept frame by frame: a frame
 * whose slot has not come is dropped before transmit (counted as paced).
 * The CPU spins while pacing; the wire sees an even frame spacing. */
SEC("xdp")
int nb_tx(struct xdp_md *ctx)
{
	if (gap_ns) {
		__u32 zero = 0;
		struct pace_state *p = bpf_map_lookup_elem(&pace, &zero);
		__u64 now = bpf_ktime_get_ns();

		if (!p)
			return XDP_DROP;
		if (now < p->next) {
			count(C_PACED, 0);
			return XDP_DROP;
		}
		/* Frames leave in batches (nbgen's batch_size), so the schedule
		 * may lag by up to one batch and catch up; beyond that a stall
		 * is forgotten rather than repaid as a burst. */
		if (p->next + burst_ns < now)
			p->next = now - burst_ns;
		p->next += gap_ns;
		p->frac += gap_frac;
		if (p->frac >= 65536) {
			p->next += 1;
			p->frac -= 65536;
		}
	}
	count(C_SENT, ctx->data_end - ctx->data);
	return XDP_TX;
}

SEC("xdp")
int nb_rx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__u64 len = end - data;

	if ((void *)(eth + 1) > end)
		goto other;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl != 5)
			goto other;
		udp = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP)
			goto other;
		udp = (void *)(ip6 + 1);
	} else {
		goto other;
	}
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(udp_port))
		goto other;
	count(C_MATCHED, len);
	return drop ? XDP_DROP : XDP_PASS;
other:
	count(C_OTHER, len);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
