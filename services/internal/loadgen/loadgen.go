// Package loadgen drives orders into the order API at a fixed rate (or as
// fast as a bounded number of clients allows) and, on request, follows each
// order to its terminal state to measure order-to-terminal latency.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Config describes a run.
type Config struct {
	OrderURL     string  // base URL of order-svc
	APIKey       string  // presented as Authorization: Bearer (scope orders:write)
	Orders       int     // how many orders
	Rate         float64 // orders per second offered; 0 = as fast as Concurrency allows
	Concurrency  int     // clients in flight (default 16)
	SKUs         int     // SKU-001 … SKU-<SKUs>
	MaxItems     int     // lines per order, 1..MaxItems (default 3)
	MaxQuantity  int     // quantity per line, 1..MaxQuantity (default 2)
	DeclineShare float64 // share of orders paid with a card the provider declines
	// OrchestratedShare is the share of orders placed with "flow":
	// "orchestrated"; the others name no flow (the service's default).
	OrchestratedShare float64
	Seed              uint64
	Client            *http.Client
}

// Result is what a run produced.
type Result struct {
	Created   []Created
	Failed    int // requests refused or lost (after retries)
	Duration  time.Duration
	FirstSent time.Time
}

// Created is one accepted order.
type Created struct {
	ID     string
	SentAt time.Time
}

// SKU names the i-th SKU (1-based).
func SKU(i int) string { return fmt.Sprintf("SKU-%03d", i) }

type item struct {
	SKU       string `json:"sku"`
	Quantity  int    `json:"quantity"`
	UnitPrice int    `json:"unit_price"`
}

// Run sends the orders and returns the accepted ones. Each request carries
// an Idempotency-Key, so a retry after a timeout never creates a second
// order.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = 3
	}
	if cfg.MaxQuantity <= 0 {
		cfg.MaxQuantity = 2
	}
	if cfg.Client == nil {
		// Keep a connection per request in flight: the default transport
		// keeps two idle connections per host, so at a few hundred orders a
		// second most requests opened (and the server accepted) a new TCP
		// connection, and the benchmark measured that churn too.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = cfg.Concurrency, cfg.Concurrency
		cfg.Client = &http.Client{Timeout: 10 * time.Second, Transport: tr}
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	bodies := make([][]byte, cfg.Orders)
	for i := range bodies {
		n := 1 + rng.IntN(cfg.MaxItems)
		items := make([]item, 0, n)
		for range n {
			items = append(items, item{SKU: SKU(1 + rng.IntN(cfg.SKUs)), Quantity: 1 + rng.IntN(cfg.MaxQuantity), UnitPrice: 100 * (1 + rng.IntN(50))})
		}
		pm := "pm_card_visa"
		if rng.Float64() < cfg.DeclineShare {
			pm = "pm_card_chargeDeclined"
		}
		body := map[string]any{"customer_id": fmt.Sprintf("cus_%04d", rng.IntN(1000)),
			"currency": "EUR", "items": items, "payment_method": pm,
			"shipping_address": map[string]string{"line1": "Hauptstr. 1", "city": "Berlin", "postal_code": "10115", "country": "DE"}}
		if cfg.OrchestratedShare > 0 && rng.Float64() < cfg.OrchestratedShare {
			body["flow"] = "orchestrated"
		}
		bodies[i], _ = json.Marshal(body)
	}
	runID := fmt.Sprintf("%x", rng.Uint64())

	var (
		mu  sync.Mutex
		res Result
		wg  sync.WaitGroup
		sem = make(chan struct{}, cfg.Concurrency)
	)
	start := time.Now()
	res.FirstSent = start
	for i := range bodies {
		if cfg.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return res, ctx.Err()
				case <-time.After(d):
				}
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return res, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sent := time.Now()
			id, err := post(ctx, cfg, bodies[i], fmt.Sprintf("loadgen-%s-%d", runID, i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Failed++
				return
			}
			res.Created = append(res.Created, Created{ID: id, SentAt: sent})
		}()
	}
	wg.Wait()
	res.Duration = time.Since(start)
	return res, nil
}

func post(ctx context.Context, cfg Config, body []byte, key string) (string, error) {
	var last error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cfg.OrderURL+"/orders", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		if cfg.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		}
		resp, err := cfg.Client.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			last = fmt.Errorf("POST /orders: %s: %s", resp.Status, b)
			continue
		}
		if resp.StatusCode >= 300 {
			return "", fmt.Errorf("POST /orders: %s: %s", resp.Status, b)
		}
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &o); err != nil || o.ID == "" {
			return "", fmt.Errorf("POST /orders: no id in %s", b)
		}
		return o.ID, nil
	}
	return "", last
}

// Percentile returns the p-th percentile (0..100) of ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}
