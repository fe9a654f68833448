package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookledger/hookledger/invoice"
)

// headLogInterval is how often serve logs the chain head. An anchor bounds
// what can be deleted unnoticed to what was written after it: five minutes of
// webhooks, against a line every five minutes in the journal.
const headLogInterval = 5 * time.Minute

// logHead logs every chain's end (ledger, receipts, closes, credits) as anchors, one
// line that `verify --anchors` reads as it is.
func logHead(ctx context.Context, log *slog.Logger, db invoice.AnchorSource) {
	as, err := invoice.LoadAnchors(ctx, db)
	if err != nil {
		log.Error("chain head", "error", err.Error())
		return
	}
	args := make([]any, 0, 2*len(as))
	for _, a := range as {
		args = append(args, a.Chain, a.String())
	}
	log.Info("chain head", args...)
}

// startHeadLog logs the head now and every headLogInterval until stop, which
// logs it a last time: call stop after the writer has closed, so the line
// covers the last batch.
func startHeadLog(ctx context.Context, log *slog.Logger, db invoice.AnchorSource) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	logHead(ctx, log, db)
	go func() {
		defer close(done)
		t := time.NewTicker(headLogInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				logHead(ctx, log, db)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		logHead(context.Background(), log, db)
	}
}
