package main

import (
	"context"
	"sort"
	"sync"
	"syscall"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clock is the measured window, shared read-only by the goroutines. open: no end (-rounds), the
// window closes when the last player is done.
type clock struct {
	begin, end time.Time
	open       bool
}

func newClock(started time.Time, o options) *clock {
	if o.rounds > 0 {
		return &clock{begin: started, open: true}
	}
	begin := started.Add(o.warmup)
	return &clock{begin: begin, end: begin.Add(o.seconds)}
}

func (c *clock) running(now time.Time) bool { return c.open || now.Before(c.end) }

// counts says whether something that happened at t falls in the window.
func (c *clock) counts(t time.Time) bool { return !t.Before(c.begin) && c.running(t) }

// used is the process's CPU (getrusage: every thread, the Go runtime's included) and the wall
// time over the window.
type used struct {
	user, system, wall float64
}

func rusage() (user, system float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	seconds := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return seconds(ru.Utime), seconds(ru.Stime)
}

type window struct {
	done chan struct{}
	used used
}

// watch reads the CPU as the window opens and as it closes (or as the last goroutine ends, if
// earlier), printing the "measuring" and "measured" events at those moments.
func (c *clock) watch(wg *sync.WaitGroup) *window {
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	w := &window{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sleepUntil(c.begin, finished)
		user, system := rusage()
		opened := time.Now()
		emit(map[string]string{"event": "measuring"})
		if c.open {
			<-finished
		} else {
			sleepUntil(c.end, finished)
		}
		user2, system2 := rusage()
		w.used = used{user: user2 - user, system: system2 - system,
			wall: time.Since(opened).Seconds()}
		emit(map[string]string{"event": "measured"})
	}()
	return w
}

func (w *window) wait() used {
	<-w.done
	return w.used
}

func sleepUntil(t time.Time, finished <-chan struct{}) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-finished:
	}
}

// tally is what one goroutine saw in the window: answered calls by method, with latencies.
type tally struct {
	calls  map[string][]time.Duration
	rounds int
}

func newTally() *tally { return &tally{calls: map[string][]time.Duration{}} }

// record an answered call that started at started (counted only inside the window).
func (t *tally) record(method string, started time.Time, c *clock) {
	if c.counts(started) {
		t.calls[method] = append(t.calls[method], time.Since(started))
	}
}

// codeNames are gRPC's canonical status names, as the server and the other clients print them.
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

// how many distinct messages of failed calls the result quotes
const samples = 5

// errorLog counts every failed call of the run (warm-up included) by method, status code and
// the server's reason code, and keeps the first distinct messages. At max failures it stops the
// run.
type errorLog struct {
	mu      sync.Mutex
	byKind  map[string]int
	samples []string
	quoted  map[string]bool
	count   int
	max     int
	stop    context.CancelFunc
	stopped bool
}

func newErrorLog(max int, stop context.CancelFunc) *errorLog {
	return &errorLog{byKind: map[string]int{}, quoted: map[string]bool{}, max: max, stop: stop}
}

// add counts a failed call, unless it failed because the run was stopped (its context ended).
func (e *errorLog) add(ctx context.Context, method string, err error) {
	if ctx.Err() != nil {
		return
	}
	st := status.Convert(err)
	kind, ok := codeNames[st.Code()]
	if !ok {
		kind = st.Code().String()
	}
	for _, detail := range st.Details() { // the server's stable reason code, if it gave one
		if info, ok := detail.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			kind += " " + info.GetReason()
		}
	}
	sample := method + ": " + kind + ": " + st.Message()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count++
	e.byKind[method+" "+kind]++
	if len(e.samples) < samples && !e.quoted[sample] {
		e.quoted[sample] = true
		e.samples = append(e.samples, sample)
	}
	if e.count >= e.max && !e.stopped {
		e.stopped = true
		e.stop()
	}
}

func (e *errorLog) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count
}

type quantiles struct {
	Calls int     `json:"calls"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
}

func quantilesOf(latencies []time.Duration) quantiles {
	if len(latencies) == 0 {
		return quantiles{}
	}
	sorted := append([]time.Duration(nil), latencies...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	at := func(q float64) float64 {
		i := int(q * float64(len(sorted)))
		if i >= len(sorted) {
			i = len(sorted) - 1
		}
		return float64(sorted[i].Microseconds()) / 1000
	}
	return quantiles{Calls: len(sorted), P50: at(0.5), P99: at(0.99)}
}

// the calls that make the workload's figure: transitions (StartRound, Act) or EvaluateHand
var measured = map[string][]string{"rounds": {"StartRound", "Act"}, "evaluate": {"EvaluateHand"}}

type report struct {
	Event       string               `json:"event"`
	Workload    string               `json:"workload"`
	Clients     int                  `json:"clients"`
	Connections int                  `json:"connections"`
	Seconds     float64              `json:"seconds"`
	WallSeconds float64              `json:"wall_seconds"`
	Calls       int                  `json:"calls"`
	Latency     quantiles            `json:"latency"`
	Methods     map[string]quantiles `json:"methods"`
	Rounds      int                  `json:"rounds"`
	CPU         float64              `json:"cpu_seconds"`
	CPUUser     float64              `json:"cpu_user_seconds"`
	CPUSystem   float64              `json:"cpu_system_seconds"`
	CPUPerCall  float64              `json:"cpu_ms_per_call"`
	Cores       float64              `json:"cores"`
	Procs       int                  `json:"procs"`
	Errors      int                  `json:"errors"`
	ErrorKinds  map[string]int       `json:"errors_by_kind"`
	ErrorSample []string             `json:"error_samples"`
	Stopped     bool                 `json:"stopped_at_max_errors"`
	Players     []books              `json:"players"`
}

func result(o options, connections int, wall time.Duration, cpu used,
	tallies []*tally, players []*player, errs *errorLog) report {
	byMethod := map[string][]time.Duration{}
	rounds := 0
	for _, t := range tallies {
		for method, latencies := range t.calls {
			byMethod[method] = append(byMethod[method], latencies...)
		}
		rounds += t.rounds
	}
	var workload []time.Duration
	for _, method := range measured[o.workload] {
		workload = append(workload, byMethod[method]...)
	}
	methods := map[string]quantiles{}
	for method, latencies := range byMethod {
		methods[method] = quantilesOf(latencies)
	}
	r := report{Event: "result", Workload: o.workload, Clients: o.clients,
		Connections: connections, Seconds: cpu.wall, WallSeconds: wall.Seconds(),
		Calls: len(workload), Latency: quantilesOf(workload), Methods: methods, Rounds: rounds,
		CPU: cpu.user + cpu.system, CPUUser: cpu.user, CPUSystem: cpu.system,
		Procs: o.procs, Players: []books{}}
	if cpu.wall > 0 {
		r.Cores = r.CPU / cpu.wall
	}
	if r.Calls > 0 {
		r.CPUPerCall = r.CPU * 1000 / float64(r.Calls)
	}
	errs.mu.Lock()
	r.Errors, r.ErrorKinds, r.ErrorSample, r.Stopped = errs.count, errs.byKind, errs.samples,
		errs.stopped
	errs.mu.Unlock()
	if r.ErrorSample == nil {
		r.ErrorSample = []string{}
	}
	for _, p := range players {
		r.Players = append(r.Players, p.books)
	}
	return r
}
