package publisher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/infra/backoff"
	"github.com/concordhq/concord/relay/outbox"
)

// listen holds a LISTEN session on outbox.NotifyChannel and wakes, on
// every notification, the worker of the shard it names (wakeFor).
// Notifications are only a hint: while the session is down (database
// restart) the workers fall back to their poll, and after reconnecting
// they are all woken once in case a notification was missed.
func (r *Relay) listen(ctx context.Context) {
	retry := backoff.Loop{First: r.cfg.BackoffMin, Max: 5 * time.Second}
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := retry.Failed()
		r.log.Warn("outbox listener disconnected; polling until it is back", "err", err, "retry_in", wait)
		r.sleep(ctx, -1, wait)
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	cfg := r.cfg.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "concord-relay-listener"
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "listen "+outbox.NotifyChannel); err != nil {
		return err
	}
	r.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		r.wakeFor(n.Payload)
	}
}
