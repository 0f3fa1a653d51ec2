package main

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"

	commonv1 "fairshoe.invalid/gen/fairshoe/common/v1"
	mathv1 "fairshoe.invalid/gen/fairshoe/math/v1"
	roundv1 "fairshoe.invalid/gen/fairshoe/round/v1"
	walletv1 "fairshoe.invalid/gen/fairshoe/wallet/v1"
)

// after a failed call, so that a server refusing everything is not hammered in a hot loop
const backoff = 10 * time.Millisecond

// a round whose Act fails this many times in a row (each followed by a GetRound) is abandoned
const actAttempts = 3

var (
	stand = &roundv1.PlayerAction{Kind: &roundv1.PlayerAction_Stand_{
		Stand: &roundv1.PlayerAction_Stand{}}}
	hit = &roundv1.PlayerAction{Kind: &roundv1.PlayerAction_Hit_{
		Hit: &roundv1.PlayerAction_Hit{}}}
	zero             = int64(0)
	declineInsurance = &roundv1.PlayerAction{Kind: &roundv1.PlayerAction_Insurance_{
		Insurance: &roundv1.PlayerAction_Insurance{AmountMinor: &zero}}}
	declineEvenMoney = &roundv1.PlayerAction{Kind: &roundv1.PlayerAction_EvenMoney_{
		EvenMoney: &roundv1.PlayerAction_EvenMoney{Accept: false}}}
)

// decide is bench_service.py's strategy: decline insurance and even money; hit below 12, else
// stand.
func decide(view *roundv1.RoundView) *roundv1.PlayerAction {
	switch view.GetTurn().GetDecision() {
	case roundv1.Decision_DECISION_INSURANCE:
		return declineInsurance
	case roundv1.Decision_DECISION_EVEN_MONEY:
		return declineEvenMoney
	}
	for _, hand := range view.GetHands() {
		if hand.GetHandId() == view.GetTurn().GetHandId() && hand.GetTotal() < 12 {
			return hit
		}
	}
	return stand
}

// books is one player's money as the player saw it over the whole run (warm-up included), for
// comparison with the server's balance.
type books struct {
	Player    string `json:"player_id"`
	Deposited int64  `json:"deposited_minor"`
	Staked    int64  `json:"staked_minor"`
	Returned  int64  `json:"returned_minor"`
	// the balance_after_minor of the last round view seen (null before any)
	Balance   *int64 `json:"balance_minor"`
	Rounds    int    `json:"rounds"`    // settled (finished or void)
	Void      int    `json:"void"`      // of those, void
	Abandoned int    `json:"abandoned"` // left open after failed calls
}

// player is one goroutine's player of complete rounds.
type player struct {
	books
	index  int
	seq    int
	rounds roundv1.RoundServiceClient
	wallet walletv1.WalletServiceClient
	o      options
	clock  *clock
	tally  *tally
	errs   *errorLog
}

func newPlayer(i int, conn *grpc.ClientConn, o options, c *clock, t *tally,
	errs *errorLog) *player {
	return &player{books: books{Player: o.runID + "-p" + strconv.Itoa(i)}, index: i,
		rounds: roundv1.NewRoundServiceClient(conn), wallet: walletv1.NewWalletServiceClient(conn),
		o: o, clock: c, tally: t, errs: errs}
}

func (p *player) requestID() string {
	p.seq++
	return p.o.runID + "-" + strconv.Itoa(p.index) + "-" + strconv.Itoa(p.seq)
}

func (p *player) more() bool {
	if p.o.rounds > 0 {
		return p.Rounds+p.Abandoned < p.o.rounds
	}
	return p.clock.running(time.Now())
}

func (p *player) play(ctx context.Context) {
	if !p.fund(ctx) {
		return
	}
	for turn := p.index; ctx.Err() == nil && p.more(); turn++ {
		p.round(ctx, p.o.games[turn%len(p.o.games)])
	}
}

func (p *player) fund(ctx context.Context) bool {
	account := &walletv1.Account{PlayerId: p.Player, Currency: "EUR",
		Mode: commonv1.Mode_MODE_REAL}
	request := &walletv1.DepositRequest{Account: account, AmountMinor: p.o.deposit,
		RequestId: p.requestID()}
	call, cancel := context.WithTimeout(ctx, p.o.timeout)
	defer cancel()
	started := time.Now()
	if _, err := p.wallet.Deposit(call, request); err != nil {
		p.errs.add(ctx, "Deposit", err)
		return false
	}
	p.tally.record("Deposit", started, p.clock)
	p.Deposited += p.o.deposit
	return true
}

// round plays one round of game to its end; a round whose calls keep failing is abandoned.
func (p *player) round(ctx context.Context, game string) {
	request := &roundv1.StartRoundRequest{PlayerId: p.Player, Game: game,
		Mode: commonv1.Mode_MODE_REAL, Currency: "EUR",
		Hands: []*roundv1.HandBet{{BetMinor: p.o.bet}}, RequestId: p.requestID()}
	call, cancel := context.WithTimeout(ctx, p.o.timeout)
	started := time.Now()
	answer, err := p.rounds.StartRound(call, request)
	cancel()
	if err != nil {
		p.errs.add(ctx, "StartRound", err)
		pause(ctx)
		return
	}
	p.tally.record("StartRound", started, p.clock)
	view := answer.GetRound()
	for failures := 0; view.GetStatus() == roundv1.RoundStatus_ROUND_STATUS_AWAITING_PLAYER; {
		act := &roundv1.ActRequest{PlayerId: p.Player, RoundId: view.GetRoundId(),
			HandId: view.GetTurn().GetHandId(), Action: decide(view),
			ExpectedVersion: view.GetVersion(), RequestId: p.requestID()}
		call, cancel := context.WithTimeout(ctx, p.o.timeout)
		started := time.Now()
		acted, err := p.rounds.Act(call, act)
		cancel()
		if err == nil {
			p.tally.record("Act", started, p.clock)
			view, failures = acted.GetRound(), 0
			continue
		}
		p.errs.add(ctx, "Act", err)
		if failures++; failures >= actAttempts || ctx.Err() != nil {
			p.Abandoned++
			return
		}
		pause(ctx)
		if view = p.reread(ctx, view.GetRoundId()); view == nil {
			p.Abandoned++
			return
		}
	}
	p.settled(view)
}

// reread fetches the round again after a failed Act (it may have been applied, or the version
// moved on); nil if that fails too.
func (p *player) reread(ctx context.Context, roundID string) *roundv1.RoundView {
	call, cancel := context.WithTimeout(ctx, p.o.timeout)
	defer cancel()
	started := time.Now()
	got, err := p.rounds.GetRound(call, &roundv1.GetRoundRequest{PlayerId: p.Player,
		RoundId: roundID})
	if err != nil {
		p.errs.add(ctx, "GetRound", err)
		return nil
	}
	p.tally.record("GetRound", started, p.clock)
	return got.GetRound()
}

func (p *player) settled(view *roundv1.RoundView) {
	p.Rounds++
	if view.GetStatus() == roundv1.RoundStatus_ROUND_STATUS_VOID {
		p.Void++
	}
	p.Staked += view.GetTotalStakedMinor()
	p.Returned += view.GetTotalReturnedMinor()
	if view.BalanceAfterMinor != nil {
		balance := view.GetBalanceAfterMinor()
		p.Balance = &balance
	}
	if now := time.Now(); p.clock.counts(now) {
		p.tally.rounds++
	}
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(backoff):
	}
}

// evaluator calls the stateless MathService.EvaluateHand in a closed loop.
type evaluator struct {
	math  mathv1.MathServiceClient
	o     options
	clock *clock
	tally *tally
	errs  *errorLog
}

func newEvaluator(conn *grpc.ClientConn, o options, c *clock, t *tally,
	errs *errorLog) *evaluator {
	return &evaluator{math: mathv1.NewMathServiceClient(conn), o: o, clock: c, tally: t,
		errs: errs}
}

func (e *evaluator) run(ctx context.Context) {
	request := &mathv1.EvaluateHandRequest{Cards: []string{"AS", "TD"}}
	for ctx.Err() == nil && e.clock.running(time.Now()) {
		call, cancel := context.WithTimeout(ctx, e.o.timeout)
		started := time.Now()
		_, err := e.math.EvaluateHand(call, request)
		cancel()
		if err != nil {
			e.errs.add(ctx, "EvaluateHand", err)
			pause(ctx)
			continue
		}
		e.tally.record("EvaluateHand", started, e.clock)
	}
}
