package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// ServiceHealth is one service's outbox and dead letters.
type ServiceHealth struct {
	Name string
	// Backlog counts unpublished rows the relay still works on (not parked).
	Backlog int64
	// OldestUnpublished is the age of the oldest of them; nil when none.
	OldestUnpublished *time.Duration
	Parked            int64
	DeadLetters       int64 // not replayed yet
	OpenFindings      int64 // payment-svc only
	HasFindings       bool
}

// GroupTopic is one consumer group on one topic: broker offsets and lag,
// and what the group applied (its processed_events) in the last hour.
type GroupTopic struct {
	Group, Topic  string
	Committed     int64
	End           int64
	Lag           int64
	LagErr        string
	AppliedHour   int64
	AppliedMinute int64
	Members       int
	State         string
}

// OverviewData is the overview page.
type OverviewData struct {
	Services   []ServiceHealth
	Groups     []GroupTopic
	BrokerErr  string
	SagaCounts []StatusCount
	Published  template.HTML // events the relay published per minute, by service
	Applied    template.HTML // events applied per minute, by group
}

// StatusCount is how many orders are in a status.
type StatusCount struct {
	Status string
	Count  int64
}

func (s *Server) overview(r *http.Request) (any, error) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	now := s.cfg.Now().UTC().Truncate(time.Minute)
	labels, since := minuteLabels(now, 60)
	var d OverviewData
	svcs := s.services()
	d.Services = make([]ServiceHealth, len(svcs))
	published := make([]Series, len(svcs))
	applied := make([][]Series, len(svcs))
	groups := make([][]GroupTopic, len(svcs))
	g, gctx := errgroup.WithContext(ctx)
	for i, sv := range svcs {
		g.Go(func() error {
			h, err := serviceHealth(gctx, sv, sv.Name == s.cfg.Payments.Name)
			d.Services[i] = h
			return err
		})
		g.Go(func() error {
			// published_at has an index (the cleanup's); created_at has none.
			v, err := perMinute(gctx, sv.Pool, `select date_trunc('minute', published_at), '', count(*) from outbox
				where published_at >= $1 group by 1`, since, len(labels))
			if err != nil {
				return fmt.Errorf("%s: outbox per minute: %w", sv.Name, err)
			}
			published[i] = Series{Name: sv.Name, Values: v[""]}
			if published[i].Values == nil {
				published[i].Values = make([]float64, len(labels))
			}
			return nil
		})
		g.Go(func() error {
			v, err := perMinute(gctx, sv.Pool, `select date_trunc('minute', processed_at), consumer_group, count(*) from processed_events
				where processed_at >= $1 group by 1, 2`, since, len(labels))
			if err != nil {
				return fmt.Errorf("%s: processed per minute: %w", sv.Name, err)
			}
			for name, vals := range v {
				applied[i] = append(applied[i], Series{Name: name, Values: vals})
			}
			gts, err := appliedByGroup(gctx, sv.Pool, now)
			groups[i] = gts
			return err
		})
	}
	g.Go(func() error {
		var err error
		d.SagaCounts, err = orderStatusCounts(gctx, s.cfg.Orders.Pool)
		return err
	})
	if err := g.Wait(); err != nil {
		return d, err
	}
	var all []GroupTopic
	var appliedSeries []Series
	for i := range svcs {
		all = append(all, groups[i]...)
		appliedSeries = append(appliedSeries, applied[i]...)
	}
	sort.Slice(appliedSeries, func(i, j int) bool { return appliedSeries[i].Name < appliedSeries[j].Name })
	d.Groups, d.BrokerErr = s.withLag(ctx, all)
	d.Published = LineChart("events published per minute, last hour", labels, published)
	d.Applied = LineChart("events applied per minute, last hour", labels, appliedSeries)
	return d, nil
}

// minuteLabels are the last n minutes up to now, and the first of them.
func minuteLabels(now time.Time, n int) ([]string, time.Time) {
	since := now.Add(-time.Duration(n-1) * time.Minute)
	labels := make([]string, n)
	for i := range labels {
		labels[i] = since.Add(time.Duration(i) * time.Minute).Format("15:04")
	}
	return labels, since
}

// perMinute runs a query returning (minute, series, count) rows and lays
// the counts out per minute from since.
func perMinute(ctx context.Context, pool *pgxpool.Pool, query string, since time.Time, n int) (map[string][]float64, error) {
	rows, err := pool.Query(ctx, query, since)
	if err != nil {
		return nil, err
	}
	out := map[string][]float64{}
	var minute time.Time
	var name string
	var count int64
	_, err = pgx.ForEachRow(rows, []any{&minute, &name, &count}, func() error {
		i := int(minute.Sub(since) / time.Minute)
		if i < 0 || i >= n {
			return nil
		}
		if out[name] == nil {
			out[name] = make([]float64, n)
		}
		out[name][i] += float64(count)
		return nil
	})
	return out, err
}

func serviceHealth(ctx context.Context, sv Service, findings bool) (ServiceHealth, error) {
	h := ServiceHealth{Name: sv.Name, HasFindings: findings}
	var oldest *time.Duration
	err := sv.Pool.QueryRow(ctx, `select count(*) filter (where parked_at is null),
			now() - min(created_at) filter (where parked_at is null),
			count(*) filter (where parked_at is not null)
		from outbox where published_at is null and skipped_at is null`).Scan(&h.Backlog, &oldest, &h.Parked)
	if err != nil {
		return h, fmt.Errorf("%s: outbox backlog: %w", sv.Name, err)
	}
	h.OldestUnpublished = oldest
	if err := sv.Pool.QueryRow(ctx, `select count(*) from dead_letters where replayed_at is null`).Scan(&h.DeadLetters); err != nil {
		return h, fmt.Errorf("%s: dead letters: %w", sv.Name, err)
	}
	if findings {
		if err := sv.Pool.QueryRow(ctx, `select count(*) from reconciliation_findings where resolved_at is null`).Scan(&h.OpenFindings); err != nil {
			return h, fmt.Errorf("%s: open findings: %w", sv.Name, err)
		}
	}
	return h, nil
}

// appliedByGroup counts each group's applied events per topic in the last
// hour (processed_at has a BRIN index, so this reads only recent pages),
// and names every group that ever applied one (a loose index scan of the
// primary key), so an idle group still shows with its lag.
func appliedByGroup(ctx context.Context, pool *pgxpool.Pool, now time.Time) ([]GroupTopic, error) {
	rows, err := pool.Query(ctx, `select consumer_group, topic, count(*),
			count(*) filter (where processed_at >= $2)
		from processed_events where processed_at >= $1 group by 1, 2`, now.Add(-time.Hour), now.Add(-time.Minute))
	if err != nil {
		return nil, fmt.Errorf("applied per group: %w", err)
	}
	var out []GroupTopic
	seen := map[string]bool{}
	var gt GroupTopic
	_, err = pgx.ForEachRow(rows, []any{&gt.Group, &gt.Topic, &gt.AppliedHour, &gt.AppliedMinute}, func() error {
		out = append(out, gt)
		seen[gt.Group] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("applied per group: %w", err)
	}
	rows, err = pool.Query(ctx, `with recursive g(name) as (
			(select consumer_group from processed_events order by consumer_group limit 1)
			union all
			select (select p.consumer_group from processed_events p where p.consumer_group > g.name
			        order by p.consumer_group limit 1) from g where g.name is not null)
		select name from g where name is not null`)
	if err != nil {
		return nil, fmt.Errorf("consumer groups: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("consumer groups: %w", err)
	}
	for _, n := range names {
		if !seen[n] {
			out = append(out, GroupTopic{Group: n})
		}
	}
	return out, nil
}

// withLag adds the broker's view (committed offsets, end offsets, lag,
// members) to the groups the databases name. A broker that does not answer
// leaves the database figures and says why.
func (s *Server) withLag(ctx context.Context, gts []GroupTopic) ([]GroupTopic, string) {
	type key struct{ group, topic string }
	byKey := map[key]GroupTopic{}
	var names []string
	seen := map[string]bool{}
	for _, gt := range gts {
		if !seen[gt.Group] {
			seen[gt.Group] = true
			names = append(names, gt.Group)
		}
		if gt.Topic != "" {
			byKey[key{gt.Group, gt.Topic}] = gt
		}
	}
	var brokerErr string
	if s.cfg.Admin != nil && len(names) > 0 {
		lags, err := s.cfg.Admin.Lag(ctx, names...)
		if err != nil {
			brokerErr = "broker: " + err.Error()
		}
		for _, l := range lags {
			if l.Error() != nil {
				brokerErr = fmt.Sprintf("broker: group %s: %v", l.Group, l.Error())
				continue
			}
			for topic, parts := range l.Lag {
				k := key{l.Group, topic}
				gt := byKey[k]
				gt.Group, gt.Topic = l.Group, topic
				gt.Members, gt.State = len(l.Members), l.State
				for _, pl := range parts {
					if pl.Err != nil {
						gt.LagErr = pl.Err.Error()
						continue
					}
					if pl.Commit.At >= 0 {
						gt.Committed += pl.Commit.At
					}
					gt.End += pl.End.Offset
					gt.Lag += pl.Lag
				}
				byKey[k] = gt
			}
		}
	}
	out := make([]GroupTopic, 0, len(byKey))
	for _, gt := range byKey {
		out = append(out, gt)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Topic < out[j].Topic
	})
	return out, brokerErr
}

func orderStatusCounts(ctx context.Context, pool *pgxpool.Pool) ([]StatusCount, error) {
	rows, err := pool.Query(ctx, `select status || coalesce(' (' || reason || ')', ''), count(*) from orders group by 1 order by 1`)
	if err != nil {
		return nil, fmt.Errorf("orders by status: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatusCount, error) {
		var c StatusCount
		err := r.Scan(&c.Status, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("orders by status: %w", err)
	}
	return out, nil
}
