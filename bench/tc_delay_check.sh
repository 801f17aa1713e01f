#!/usr/bin/env bash
# Can this kernel add a fixed delay to a link without netem?  Prints the
# evidence and a verdict (root; needs iproute2's tc, clang and libbpf headers
# for the EDT test).
#
# 1. the kernel config: which qdiscs/actions exist at all (/proc/config.gz);
# 2. tc itself: every qdisc that could hold packets back (netem, fq, etf,
#    taprio, ...) on a scratch veth;
# 3. EDT: a tc-bpf program on clsact egress sets every packet's departure
#    time (skb->tstamp) 5 ms ahead; only sch_fq (and sch_etf) honour it.
#    Ping RTT with it under each qdisc this kernel has (noqueue, htb, tbf,
#    pfifo) shows whether any of them waits.
# Ping traffic holds /tmp/nicbench-load.lock.  Namespaces: ${PREFIX}tca/tcb.
set -euo pipefail
PREFIX=${PREFIX:-nbD-} NET=${NET:-10.204.0}
A=${PREFIX}tca B=${PREFIX}tcb
work=$(mktemp -d)
cleanup() {
  for ns in $A $B; do
    for p in $(ip netns pids $ns 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del $ns 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
cleanup; work=$(mktemp -d)
ip netns add $A; ip netns add $B
ip link add eth0 netns $A type veth peer name eth0 netns $B
ip -n $A addr add $NET.9/24 dev eth0; ip -n $B addr add $NET.10/24 dev eth0
for ns in $A $B; do ip -n $ns link set lo up; ip -n $ns link set eth0 up; done

echo "== 1. kernel $(uname -r): scheduler / classifier / action options"
if [ -r /proc/config.gz ]; then
  zcat /proc/config.gz | grep -E "^(# )?CONFIG_NET_(SCH|ACT)_(NETEM|FQ|ETF|TAPRIO|CAKE|FQ_CODEL|BPF|PLUG|GATE|HTB|TBF|INGRESS|FIFO)\b" \
    | sed 's/^# \(.*\) is not set/\1=n/'
  zcat /proc/config.gz | grep -E "^CONFIG_NET_CLS_BPF=|^CONFIG_IFB="
else
  echo "(no /proc/config.gz)"
fi

echo "== 2. tc qdisc replace dev eth0 root <kind> ..."
for q in "netem delay 5ms" "fq" "fq_codel" "etf clockid CLOCK_TAI delta 100000 skip_sock_check" \
         "taprio" "cake" "plug" "htb default 1" "tbf rate 10gbit burst 64k latency 100ms" "pfifo"; do
  if out=$(ip netns exec $A tc qdisc replace dev eth0 root $q 2>&1); then r=ok; else r="$out"; fi
  printf '   %-58s %s\n' "$q" "$r"
done
ip netns exec $A tc qdisc del dev eth0 root 2>/dev/null || true

echo "== 3. EDT (skb->tstamp = now + 5 ms from tc-bpf on clsact egress), ping RTT"
cat > "$work/edt.bpf.c" <<'EOF'
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
SEC("tc")
int edt_delay(struct __sk_buff *skb)
{
    /* departure time 5 ms from now, on the monotonic clock sch_fq uses */
    bpf_skb_set_tstamp(skb, bpf_ktime_get_ns() + 5000000ULL, BPF_SKB_TSTAMP_DELIVERY_MONO);
    return TC_ACT_OK;
}
char _license[] SEC("license") = "GPL";
EOF
clang -O2 -g -target bpf -I/usr/include/"$(uname -m)"-linux-gnu -c "$work/edt.bpf.c" -o "$work/edt.o"
ping_rtt() { ip netns exec $A ping -n -q -c 20 -i 0.01 $NET.10 | tail -1; }
export -f ping_rtt; export A NET work
flock /tmp/nicbench-load.lock bash -c '
  set -e
  echo "   no program, noqueue:            $(ping_rtt)"
  ip netns exec $A tc qdisc add dev eth0 clsact
  ip netns exec $A tc filter add dev eth0 egress bpf direct-action obj "$work/edt.o" sec tc
  for q in "" "htb default 1" "tbf rate 10gbit burst 64k latency 100ms" "pfifo"; do
    [ -n "$q" ] && ip netns exec $A tc qdisc replace dev eth0 root $q
    printf "   EDT +5 ms, root %-16s %s\n" "$(ip netns exec $A tc qdisc show dev eth0 root | cut -d" " -f2):" "$(ping_rtt)"
  done' | tee "$work/edt.txt"
# ping's summary: rtt min/avg/max/mdev = a/b/c/d ms; delayed if any EDT avg >= 4 ms
delayed=$(awk -F'/' '/EDT/ {split($0, a, "= "); split(a[2], v, "/"); if (v[2] + 0 >= 4.0) print "yes"}' "$work/edt.txt")
if [ -n "$delayed" ]; then
  echo "== verdict: a qdisc here honours skb->tstamp: a fixed delay can be added with tc-bpf EDT"
else
  echo "== verdict: no qdisc here waits for skb->tstamp (EDT needs sch_fq or sch_etf) and no"
  echo "   delay qdisc or action exists: a fixed kernel-side delay cannot be added on this kernel."
fi
