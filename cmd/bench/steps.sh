#!/bin/sh
# steps.sh PROFILE CPU_NS_PER_DATAGRAM: what each step of the relay's work
# costs per datagram read, from a CPU profile of a relay child of cmd/bench
# (RELAY_BENCH_CPUPROFILE=/tmp/prof go run ./cmd/bench ... writes
# /tmp/prof.relay.PID) and the CPU per datagram cmd/bench reported for that
# child (user+sys, in ns). A step's cost is its share of the profile's
# samples (cumulative: the function and all it calls) times that figure,
# so the steps of one datagram add up to it; rows nest as the calls do
# (indented), and "rest" is what a row's parent spends outside the rows
# under it.
set -eu
prof=$1 per=$2
top=$(go tool pprof -top -cum -nodecount=100000 "$prof" 2>/dev/null)
total=$(printf '%s\n' "$top" | sed -n 's/.*Total samples = \([0-9.]*\)\(m*s\).*/\1 \2/p')
printf '%s\n' "$top" | awk -v total="$total" -v per="$per" '
function sec(s,   v) { v = s + 0; if (s ~ /ms$/) v /= 1000; return v }
BEGIN {
	split(total, t, " "); T = t[1]; if (t[2] == "ms") T /= 1000
	n = 0
	row("routineRead$",                       0, "the server loop, all of it")
	row("transport.*WriteBatch$",             1, "send: sendmmsg (kernel: loopback delivery to the receiver included)")
	row("transport.*readGRO$",                1, "receive: recvmmsg and the GRO split")
	row("Reader..MugBatch$",                  1, "mugs, four bodies at a time (Reader.MugBatch)")
	row("relay.*Relay..handle$",              1, "the decision, per datagram (Relay.handle)")
	row("scry.*Packet..ParseWithPrefix$",     2, "parse, the mug check resumed")
	row("relay.*Relay..arrived$",             2, "lane clock, once a lane an instant (Relay.arrived)")
	row("relay.*Relay..request$",             2, "a request (Relay.request)")
	row("route.*Table..PlanFor$",             3, "route plan (route.Table.PlanFor)")
	row("pit.*Table..add$",                   3, "pending table add (pit.Table.Add, AddAt)")
	row("route.*Table..Commit$",              3, "route commit (route.Table.Commit)")
	row("relay.*Relay..forward$",             3, "send on the planned lanes (Relay.forward)")
	row("relay.*Relay..page$",                2, "a page (Relay.page)")
	row("pit.*Table..TakeHeld$",              3, "pending table take (pit.Table.TakeHeld)")
	row("route.*Table..PageArrivedInto$",     3, "route table learns (route.Table.PageArrivedInto)")
	row("relay.*Relay..nextHop$",             3, "next-hop choice (Relay.nextHop)")
	row("scry.EditPageNextHop$",                3, "hop count, next-hop and new mug (Relay.editPage)")
	row("relay.*Relay..spend$",               3, "amplification budget, once a lane an instant (Relay.spend)")
}
function row(re, depth, label) { n++; R[n] = re; D[n] = depth; L[n] = label; C[n] = 0 }
{
	name = $NF
	if (name ~ /inline\)$/) name = $(NF - 1)
	for (i = 1; i <= n; i++) if (name ~ R[i] && C[i] == 0) C[i] = sec($4)
}
END {
	printf "| step | share of samples | ns per datagram |\n|---|---|---|\n"
	for (i = 1; i <= n; i++) {
		# rest: the parent row minus the rows directly under it
		ind = ""; for (j = 0; j < D[i]; j++) ind = ind "&nbsp;&nbsp;"
		printf "| %s%s | %.1f %% | %.0f |\n", ind, L[i], 100 * C[i] / T, per * C[i] / T
		k = i + 1; sub_ = 0
		while (k <= n && D[k] > D[i]) { if (D[k] == D[i] + 1) sub_ += C[k]; k++ }
		if (k > i + 1) rest[i] = C[i] - sub_
	}
	for (i = 1; i <= n; i++) if (i in rest)
		printf "| rest of: %s | %.1f %% | %.0f |\n", L[i], 100 * rest[i] / T, per * rest[i] / T
}'
