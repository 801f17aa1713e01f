#!/bin/sh
# nicbench host sampler: reads a host's counters at a fixed interval, stamps
# every read with the host's own clock and streams framed records on stdout.
# POSIX sh + awk, so it runs on any Linux or FreeBSD host without Python.
#
#   sh hostsampler.sh INTERVAL SECONDS [ITEM...]
#
# INTERVAL  seconds between reads (a decimal: 0.25)
# SECONDS   hard limit on its run time: it stops by itself at this deadline
# ITEM      cpu | softirqs | interrupts | net | net:IFNAME | snmp | pid:PID
#           (pid:PID follows PID and its descendants, 4 levels deep)
#
# It also stops when its stdin reaches end of file; a stdin line "pid PID"
# adds a process to follow, "unpid PID" drops one, "read" reads everything
# at once (a tick out of turn, numbered like the others).  The record format and
# its parser are in nicbench/sampling/hostrecords.py.
#
# Linux: every read is awk reading /proc (no process spawned per read); the
# pacing costs one sleep(1) per interval.  FreeBSD: sysctl and netstat, all
# in one sh per interval.
set -u
LC_ALL=C
export LC_ALL
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

die() { printf '@@nbs error %s\n' "$*"; exit 2; }

[ $# -ge 2 ] || die "usage: hostsampler.sh INTERVAL SECONDS [ITEM...]"
iv=$1
secs=$2
shift 2
case $iv in '' | . | *[!0-9.]* | *.*.*) die "interval is not a decimal number: $iv" ;; esac
case $secs in '' | *[!0-9]*) die "seconds is not a whole number: $secs" ;; esac
items=
for it in "$@"; do
	case $it in
	cpu | softirqs | interrupts | net | snmp) ;;
	net:*)
		case ${it#net:} in '' | *[!A-Za-z0-9_.:-]*) die "not an interface name: ${it#net:}" ;; esac ;;
	pid:*)
		case ${it#pid:} in '' | *[!0-9]*) die "not a PID: ${it#pid:}" ;; esac ;;
	*) die "unknown item: $it" ;;
	esac
	items="$items $it"
done
# a sleep that cannot take fractions (POSIX only asks for whole seconds)
# would end the ticker at once: say so instead of sampling nothing
sleep 0.01 2>/dev/null || die "sleep does not take fractional seconds here"

os=$(uname -s)
d=$(mktemp -d "${TMPDIR:-/tmp}/nicbench-smp.XXXXXX") || die "mktemp failed"
apid=
tpid=
fpid=
stop() {
	# kill what is still running and reap it (its CPU time is then counted
	# in this shell's children, which is how its cost is measured)
	for p in $apid $tpid $fpid; do kill "$p" 2>/dev/null; done
	wait
	rm -rf "$d"
}
trap 'stop; exit 143' HUP INT TERM
mkfifo "$d/p" || die "mkfifo failed"
# mawk (Debian's awk) fills its whole input buffer before it looks at a line
# when reading a pipe: the ticks would sit there unseen; -W interactive
# makes it read line by line.  Other awks read what has arrived.
set --
case $(awk -W version 2>&1 </dev/null) in *mawk*) set -- -W interactive ;; esac

awk "$@" -v iv="$iv" -v secs="$secs" -v items="$items" -v os="$os" -v me="$$" '
# ---- clocks ------------------------------------------------------------
# Linux: CLOCK_MONOTONIC in ns from the "now at" line of /proc/timer_list
# (readable by root; ~0.1 ms a read), else /proc/uptime (any user, 10 ms
# resolution: the kernel truncates it to hundredths).  Neither spawns a
# process; "date +%s.%N" would (measured here: ~2 ms per read from awk).
# FreeBSD: "date +%s.%N" (FreeBSD 14.1 and later) inside the one command
# each tick runs anyway; older date(1) prints no fraction: 1 s resolution.
function clk(   l, a, r) {
	if (CLK == "mono_ns") {
		r = ""
		while ((getline l < "/proc/timer_list") > 0)
			if (l ~ /^now at [0-9]+ nsecs/) { split(l, a, " "); r = a[3]; break }
		close("/proc/timer_list")
		return r
	}
	if (CLK == "uptime_s") {
		r = ""
		if ((getline l < "/proc/uptime") > 0) { split(l, a, " "); r = a[1] }
		close("/proc/uptime")
		return r
	}
	return realtime()
}
function secs_of(t) { return CLK == "mono_ns" ? t / 1e9 : t + 0 }
function realtime(   c, l) {
	c = "date +%s.%N"
	l = ""
	c | getline l
	close(c)
	if (l !~ /^[0-9]+\.[0-9]+$/) {
		c = "date +%s"
		l = ""
		c | getline l
		close(c)
	}
	return l
}
# ---- output ------------------------------------------------------------
# "src NAME N" then exactly N raw lines: no content can be taken for a frame
function slurp(f, name,   l, n, buf, r) {
	n = 0
	buf = ""
	while ((r = (getline l < f)) > 0) { buf = buf l "\n"; n++ }
	close(f)
	if (r < 0) { O = O "@@nbs gone " name "\n"; return 0 }
	O = O "@@nbs src " name " " n "\n" buf
	return 1
}
# a process and its descendants (the tool below a gate shim and its
# launchers), each once per tick
function follow(pid, depth,   f, l, a, n, i) {
	if (pid in seen) return
	seen[pid] = 1
	if (!slurp("/proc/" pid "/stat", "pid/" pid)) return
	if (!(pid in statused)) {
		statused[pid] = 1
		slurp("/proc/" pid "/status", "status/" pid)
	}
	if (depth >= 4) return
	f = "/proc/" pid "/task/" pid "/children"
	l = ""
	if ((getline l < f) > 0) {
		close(f)
		O = O "@@nbs kids " pid " " l "\n"
		n = split(l, a, " ")
		for (i = 1; i <= n; i++) follow(a[i], depth + 1)
	} else close(f)
}
function linux_tick(   i, it) {
	for (i = 1; i <= nitems; i++) {
		it = item[i]
		if (it == "cpu") slurp("/proc/stat", "stat")
		else if (it == "softirqs") slurp("/proc/softirqs", "softirqs")
		else if (it == "interrupts") slurp("/proc/interrupts", "interrupts")
		else if ((it == "net" || it ~ /^net:/) && !didnet) { slurp("/proc/net/dev", "net/dev"); didnet = 1 }
		else if (it == "snmp") { slurp("/proc/net/snmp", "net/snmp"); slurp("/proc/net/netstat", "net/netstat") }
	}
	didnet = 0
	split("", seen)
	for (p in roots) follow(p, 0)
}
# FreeBSD: one sh per tick runs every command, cut by marker lines
function bsd_cmd(   i, it, c, nets) {
	c = ""
	nets = 0
	for (i = 1; i <= nitems; i++) {
		it = item[i]
		if (it == "cpu") c = c "echo \"@@cut cp_times\"; sysctl -n kern.cp_times; "
		else if (it == "net") nets = -1
		else if (it ~ /^net:/ && nets >= 0) { nets++; ifs[nets] = substr(it, 5) }
		else if (it == "snmp") c = c "echo \"@@cut netstat-s-tcp\"; netstat -s -p tcp; "
		else if (it == "interrupts") c = c "echo \"@@cut vmstat-i\"; vmstat -i; "
	}
	if (nets < 0) c = c "echo \"@@cut netstat-ib\"; netstat -ibdn; "
	for (i = 1; i <= nets; i++) c = c "echo \"@@cut netstat-I/" ifs[i] "\"; netstat -I " ifs[i] " -bdn; "
	return c
}
# the first and last lines of the command are its stamps, taken by the same sh
function bsd_tick(   c, l, name, buf, n, out, t0) {
	c = DATE "; " BSDCMD "echo @@cut; " DATE
	name = ""
	out = ""
	t0 = ""
	while ((c | getline l) > 0) {
		if (t0 == "") { t0 = l; continue }
		if (l ~ /^@@cut/) {
			if (name != "") out = out "@@nbs src " name " " n "\n" buf
			name = substr(l, 7)
			buf = ""
			n = 0
			continue
		}
		if (name == "") { last = l; continue }
		buf = buf l "\n"
		n++
	}
	close(c)
	O = "@@nbs tick " seq " " t0 "\n" out "@@nbs tock " seq " " last "\n"
}
function offset(   c0, r, c1) {
	c0 = clk()
	r = realtime()
	c1 = clk()
	print "@@nbs offset " c0 " " r " " c1
}
function bye(why) {
	offset()
	print "@@nbs bye " why " " clk()
	fflush()
	exit 0
}
BEGIN {
	nitems = split(items, item, " ")
	for (i = 1; i <= nitems; i++) if (item[i] ~ /^pid:/) roots[substr(item[i], 5)] = 1
	if (os == "Linux") {
		CLK = "uptime_s"
		RES = "0.01"
		l = ""
		if ((getline l < "/proc/timer_list") > 0 && l != "") { CLK = "mono_ns"; RES = "1e-9" }
		close("/proc/timer_list")
		if (CLK == "mono_ns" && clk() == "") { CLK = "uptime_s"; RES = "0.01" }
	} else if (os == "FreeBSD") {
		for (p in roots) {
			print "@@nbs error per-process CPU (pid:) is not read on FreeBSD yet (no procfs): leave it out"
			exit 2
		}
		CLK = "real_s"
		DATE = "date +%s.%N"
		RES = "1e-9"
		if (realtime() !~ /\./) { DATE = "date +%s"; RES = "1" }
		BSDCMD = bsd_cmd()
	} else {
		print "@@nbs error this sampler reads Linux or FreeBSD, not " os
		exit 2
	}
	print "@@nbs hello 1 os=" os " clock=" CLK " res=" RES " interval=" iv " seconds=" secs " pid=" me
	# three pairs: the controller keeps the tightest bracket
	offset(); offset(); offset()
	if (os == "FreeBSD") {
		c = "sysctl kern.clockrate"
		while ((c | getline l) > 0) print "@@nbs once clockrate " l
		close(c)
	}
	fflush()
	start = secs_of(clk())
	seq = 0
	nt = 0
}
# one read of everything
function tick() {
	seq++
	if (os == "Linux") {
		# the tick is written in one piece: one write(2), one SSH packet
		O = "@@nbs tick " seq " " clk() "\n"
		linux_tick()
		last = clk()
		O = O "@@nbs tock " seq " " last "\n"
	} else bsd_tick()
	printf "%s", O
	fflush()
}
# a tick from the ticker
$1 == "t" {
	nt++
	tick()
	# the clock says when the deadline has passed; the count of the
	# ticks of the ticker (each at least one interval after the last) is the
	# backstop should the clock read fail
	if ((last != "" && secs_of(last) - start >= secs) || (nt - 1) * iv >= secs) bye("deadline")
	next
}
# a read asked for on stdin ("read"): the last read of a point, as its tools end
$1 == "c" && $2 == "read" { tick(); next }
$1 == "c" && $2 == "pid" && $3 ~ /^[0-9]+$/ { roots[$3] = 1; next }
$1 == "c" && $2 == "unpid" && $3 ~ /^[0-9]+$/ { delete roots[$3]; next }
$1 == "eof" { bye("stdin") }
$1 == "tdead" { bye("ticker") }
END { }
' <"$d/p" &
apid=$!
# the writers: the ticker, and what comes on stdin (fd 4: a background
# list gets /dev/null as its stdin unless told otherwise)
exec 3>"$d/p" 4<&0
# The ticker.  Where bash 5 is found (any Linux host nicbench drives: its
# start gate needs it) the wait is bash's read builtin timing out on a fifo
# nobody writes, aimed at a fixed grid (interval, 2 x interval, ...): no
# process per tick.  Elsewhere it is one sleep(1) per tick, a fork and an
# exec (measured here: 1.6 ms of CPU each, most of the sampler's cost).
# (NBS_TICKER=sleep forces the portable ticker, to measure it.)
if [ "${NBS_TICKER:-}" != sleep ] && bash -c '[ -n "${EPOCHREALTIME:-}" ]' 2>/dev/null; then
	mkfifo "$d/t" || die "mkfifo failed"
	# shellcheck disable=SC2016  # bash expands these, not this shell
	bash -c 'exec 9<>"$1"; iv=$2; next=${EPOCHREALTIME/[.,]/}
		while echo t; do
			next=$((next + iv)); now=${EPOCHREALTIME/[.,]/}; w=$((next - now))
			if ((w < 0)); then next=$now; w=0; fi
			printf -v f %06d $((w % 1000000))
			read -r -t "$((w / 1000000)).$f" -u 9 _
		done' nicbench-ticker "$d/t" "$(awk -v i="$iv" 'BEGIN { printf "%d", i * 1000000 }')" >&3 &
else
	(while :; do echo t || exit 0; sleep "$iv" || break; done; echo tdead) >&3 &
fi
tpid=$!
(while IFS= read -r l; do printf 'c %s\n' "$l" || exit 0; done; echo eof) <&4 >&3 &
fpid=$!
exec 3>&- 4<&-
wait "$apid"
rc=$?
apid=
stop
exit "$rc"
