package shippingcarrier_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/concordhq/concord/services/shipping"
	"github.com/concordhq/concord/services/shipping/carriersim"
	"github.com/concordhq/concord/services/shipping/shippingcarrier"
)

func parcel(postal string) shipping.Parcel {
	return shipping.Parcel{OrderID: "o1", Address: shipping.Address{Line1: "1 Main St", City: "Berlin", PostalCode: postal, Country: "DE"},
		Items: []shipping.Item{{SKU: "SKU-1", Quantity: 1}}}
}

func TestClientSortsTheCarriersAnswers(t *testing.T) {
	sim, err := carriersim.New(carriersim.Config{Seed: 1, Faults: carriersim.DefaultFaults(), APIKey: "ck"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sim)
	defer hs.Close()
	defer sim.Drain()
	c, err := shippingcarrier.New(shippingcarrier.Config{BaseURL: hs.URL + "/", APIKey: "ck", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	sh, err := c.Create(ctx, "k1", "saga-1", parcel("10115"))
	if err != nil || sh.ID == "" || sh.Status != shippingcarrier.StatusCreated || sh.TrackingNumber == "" {
		t.Fatalf("create: %+v %v", sh, err)
	}
	again, err := c.Create(ctx, "k1", "saga-1", parcel("10115"))
	if err != nil || again.ID != sh.ID {
		t.Fatalf("same key again: %+v %v", again, err)
	}
	if _, err := c.Create(ctx, "k1", "saga-1", parcel("10117")); !errors.Is(err, shippingcarrier.ErrRefused) {
		t.Fatalf("same key, other parcel: %v", err)
	}
	got, found, err := c.Lookup(ctx, "k1")
	if err != nil || !found || got.ID != sh.ID {
		t.Fatalf("lookup: %+v %v %v", got, found, err)
	}
	if _, found, err := c.Lookup(ctx, "nope"); err != nil || found {
		t.Fatalf("lookup of an unused key: %v %v", found, err)
	}
	var dec *shippingcarrier.DeclinedError
	if _, err := c.Create(ctx, "k2", "saga-2", parcel("00000")); !errors.As(err, &dec) || dec.Code != carriersim.CodeUnsupportedPostalCode {
		t.Fatalf("decline: %v", err)
	}
	if _, err := sim.SetFaults(map[string]string{"5xx-next": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "k3", "saga-3", parcel("10115")); !errors.Is(err, shippingcarrier.ErrUnavailable) {
		t.Fatalf("503: %v", err)
	}
	if _, err := sim.SetFaults(map[string]string{"hang-next": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "k4", "saga-4", parcel("10115")); !errors.Is(err, shippingcarrier.ErrUnavailable) {
		t.Fatalf("withheld answer: %v", err)
	}
	if _, found, _ := c.Lookup(ctx, "k4"); !found {
		t.Fatal("the withheld create is not found by its key")
	}
	cs, err := c.Cancel(ctx, sh.ID)
	if err != nil || cs.Status != shippingcarrier.StatusCancelled {
		t.Fatalf("cancel: %+v %v", cs, err)
	}
	if _, err := c.Cancel(ctx, "shp_nope"); !errors.Is(err, shippingcarrier.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	k4, _, _ := c.Lookup(ctx, "k4")
	if err := sim.Ship(k4.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, k4.ID); !errors.Is(err, shippingcarrier.ErrShipped) {
		t.Fatalf("cancel shipped: %v", err)
	}
	if g, err := c.Get(ctx, k4.ID); err != nil || g.Status != shippingcarrier.StatusShipped {
		t.Fatalf("get: %+v %v", g, err)
	}
	bad, _ := shippingcarrier.New(shippingcarrier.Config{BaseURL: hs.URL, APIKey: "wrong"})
	if _, err := bad.Get(ctx, k4.ID); !errors.Is(err, shippingcarrier.ErrRefused) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := shippingcarrier.New(shippingcarrier.Config{BaseURL: "localhost:1"}); err == nil {
		t.Fatal("a URL without scheme was accepted")
	}
}
