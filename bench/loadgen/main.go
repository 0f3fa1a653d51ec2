// Command loadgen drives a running `fairshoe serve` from N concurrent goroutines and prints, as
// JSON, what it did and what it cost itself: calls, errors, its own CPU seconds (getrusage),
// wall time and latency quantiles. It exists so that the benchmarks measure the server, not the
// client: the Python client spends about 0.35-0.46 ms of CPU a call, which on a 2-core machine
// caps what any server can show (bench/bench_rpc_cpu.py --client go).
//
// Two workloads, as bench/bench_service.py plays them:
//
//	rounds    each goroutine is a player (real money, funded once with Deposit) playing complete
//	          rounds of the games in turn: StartRound, then Act until the round is settled
//	          (insurance and even money declined; hit below 12, else stand);
//	evaluate  MathService.EvaluateHand(["AS", "TD"]) in a closed loop: stateless, the fixed cost
//	          of one RPC through the server's stack (the yardstick).
//
// Counting starts after -warmup and stops -seconds later; a call counts if it starts inside that
// window, and the CPU is the process's getrusage over the same window. "measuring" and
// "measured" event lines mark the window on stdout as it opens and closes, so that a caller can
// read the server's CPU over the same window; the last line is the result. With -rounds N each
// player plays exactly N rounds instead and the window is the whole run.
//
// Every failed call is counted (by method and status code, with the first messages kept) and
// reported, never retried silently: a failed Act re-reads the round (GetRound) and carries on;
// the exit status is 1 when any call failed.
//
// Built by tests/go_loadgen.py from Debian's Go packages, offline; see docs/performance.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
)

type options struct {
	address   string
	clients   int
	shared    bool
	workload  string
	warmup    time.Duration
	seconds   time.Duration
	rounds    int
	runID     string
	games     []string
	bet       int64
	deposit   int64
	timeout   time.Duration
	maxErrors int
	bdp       bool
	profile   string
	procs     int
}

func parseOptions() options {
	var o options
	var warmup, seconds float64
	var games string
	flag.StringVar(&o.address, "address", "127.0.0.1:50051", "the server's host:port (plaintext)")
	flag.IntVar(&o.clients, "clients", 4, "concurrent client goroutines")
	flag.BoolVar(&o.shared, "shared", false,
		"all goroutines share one connection (default: a connection each)")
	flag.StringVar(&o.workload, "workload", "rounds", "rounds or evaluate")
	flag.Float64Var(&warmup, "warmup", 2, "uncounted seconds first")
	flag.Float64Var(&seconds, "seconds", 10, "measured seconds")
	flag.IntVar(&o.rounds, "rounds", 0,
		"play exactly this many rounds per player (no warm-up, no clock; rounds workload only)")
	flag.StringVar(&o.runID, "run-id", fmt.Sprintf("go%d", time.Now().UnixNano()),
		"prefix of the player ids and request ids (unique per run)")
	flag.StringVar(&games, "games", "snap,double-deck,double-exposure,multi-hand",
		"comma-separated games, played in turn")
	flag.Int64Var(&o.bet, "bet", 1000, "the bet on the one hand of each round, in minor units")
	flag.Int64Var(&o.deposit, "deposit", 1_000_000_000,
		"each player's deposit before its first round, in minor units (EUR, real money)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "deadline of each call")
	flag.IntVar(&o.maxErrors, "max-errors", 1000, "stop the run after this many failed calls")
	flag.BoolVar(&o.bdp, "bdp", false, "let gRPC size its flow-control windows by bandwidth-"+
		"delay probes (default: fixed 1 MiB windows, no probe pings)")
	flag.IntVar(&o.procs, "procs", 1, "GOMAXPROCS: the threads running Go code at once (one "+
		"by default: cheaper per call than two, as no call's goroutines hand off between "+
		"threads, and enough unless the result's cores approach 1)")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the whole run to this file "+
		"(go tool pprof)")
	flag.Parse()
	o.warmup = time.Duration(warmup * float64(time.Second))
	o.seconds = time.Duration(seconds * float64(time.Second))
	o.games = strings.Split(games, ",")
	if o.clients < 1 || o.procs < 1 || (o.workload != "rounds" && o.workload != "evaluate") ||
		(o.rounds > 0 && o.workload != "rounds") || o.rounds < 0 || o.seconds <= 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -clients and -procs must be at least 1, -workload rounds or "+
			"evaluate, -seconds positive, -rounds only with -workload rounds")
		os.Exit(2)
	}
	return o
}

// dial opens one connection. Unless bdp, its flow-control windows are fixed: gRPC-Go's
// bandwidth-delay estimator otherwise pings the server after nearly every response of a closed
// loop (one probe in flight at a time, answered at once on loopback), an extra frame each way
// that both sides pay for and that a small unary call does not need.
func dial(ctx context.Context, address string, bdp bool) (*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	options := []grpc.DialOption{grpc.WithInsecure(), grpc.WithBlock()}
	if !bdp {
		options = append(options, grpc.WithInitialWindowSize(1<<20),
			grpc.WithInitialConnWindowSize(1<<20))
	}
	return grpc.DialContext(ctx, address, options...)
}

// emit writes one JSON line to stdout (unbuffered: a reader sees it at once).
func emit(value interface{}) {
	line, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(line))
}

func main() { os.Exit(run(parseOptions())) }

// run is the whole run; its exit status (deferred work done first).
func run(o options) int {
	runtime.GOMAXPROCS(o.procs)
	if o.profile != "" {
		out, err := os.Create(o.profile)
		if err != nil {
			panic(err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			panic(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	conns := make([]*grpc.ClientConn, 0, o.clients)
	for i := 0; i < o.clients && (i == 0 || !o.shared); i++ {
		conn, err := dial(ctx, o.address, o.bdp)
		if err != nil {
			emit(map[string]string{"event": "error", "message": "connect: " + err.Error()})
			return 1
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	started := time.Now()
	clock := newClock(started, o)
	errs := newErrorLog(o.maxErrors, stop)
	tallies := make([]*tally, o.clients)
	var players []*player
	var wg sync.WaitGroup
	for i := 0; i < o.clients; i++ {
		tallies[i] = newTally()
		conn := conns[i%len(conns)]
		var work func()
		if o.workload == "rounds" {
			p := newPlayer(i, conn, o, clock, tallies[i], errs)
			players = append(players, p)
			work = func() { p.play(ctx) }
		} else {
			e := newEvaluator(conn, o, clock, tallies[i], errs)
			work = func() { e.run(ctx) }
		}
		wg.Add(1)
		go func() { defer wg.Done(); work() }()
	}
	window := clock.watch(&wg)
	wg.Wait()
	cpu := window.wait()
	emit(result(o, len(conns), time.Since(started), cpu, tallies, players, errs))
	if errs.total() > 0 {
		return 1
	}
	return 0
}
