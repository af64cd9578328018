package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/concordhq/concord/relay/outbox"
)

// ParkedRows are one service's parked outbox rows.
type ParkedRows struct {
	Service string
	Rows    []outbox.ParkedRow
}

func (s *Server) outboxPage(r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	svcs := s.services()
	out := make([]ParkedRows, len(svcs))
	g, gctx := errgroup.WithContext(ctx)
	for i, sv := range svcs {
		g.Go(func() error {
			rows, err := outbox.Parked(gctx, sv.Pool)
			out[i] = ParkedRows{Service: sv.Name, Rows: rows}
			if err != nil {
				return fmt.Errorf("%s: %w", sv.Name, err)
			}
			return nil
		})
	}
	return out, g.Wait()
}

// formID reads a positive integer id from the path.
func pathID(r *http.Request, name string) (int64, error) {
	v := r.PathValue(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%s: %q is not a positive integer", name, v)
	}
	return n, nil
}

// outboxRetry is `relay outbox retry ID`.
func (s *Server) outboxRetry(r *http.Request, _ string) (AuditEntry, string, error) {
	sv, id, err := s.outboxTarget(r)
	if err != nil {
		return AuditEntry{}, "", err
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if err := outbox.Retry(r.Context(), sv.Pool, id); err != nil {
		return AuditEntry{}, "", outboxError(sv, id, err)
	}
	return AuditEntry{Service: sv.Name, Target: strconv.FormatInt(id, 10), Reason: reason},
		fmt.Sprintf("%s outbox row %d released for retry", sv.Name, id), nil
}

// outboxSkip is `relay outbox skip ID --reason R`.
func (s *Server) outboxSkip(r *http.Request, actor string) (AuditEntry, string, error) {
	sv, id, err := s.outboxTarget(r)
	if err != nil {
		return AuditEntry{}, "", err
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		return AuditEntry{}, "", badRequest("reason: say why outbox row %d is skipped (it is stored with the row)", id)
	}
	// The row keeps who skipped it, as `relay outbox skip` users write it.
	if err := outbox.Skip(r.Context(), sv.Pool, id, reason+" (by "+actor+" in the console)"); err != nil {
		return AuditEntry{}, "", outboxError(sv, id, err)
	}
	return AuditEntry{Service: sv.Name, Target: strconv.FormatInt(id, 10), Reason: reason},
		fmt.Sprintf("%s outbox row %d skipped; the rows behind it will be published", sv.Name, id), nil
}

func (s *Server) outboxTarget(r *http.Request) (Service, int64, error) {
	sv, err := s.service(r.PathValue("service"))
	if err != nil {
		return sv, 0, err
	}
	id, err := pathID(r, "id")
	return sv, id, err
}

func outboxError(sv Service, id int64, err error) error {
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		return notFound("%s has no outbox row %d; nothing was changed", sv.Name, id)
	case errors.Is(err, outbox.ErrNotParked):
		return conflict("%s outbox row %d is not parked any more (another operator retried or skipped it, or it was published); nothing was changed", sv.Name, id)
	case errors.Is(err, outbox.ErrReasonRequired):
		return badRequest("reason: say why outbox row %d is skipped", id)
	case errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return err
}
