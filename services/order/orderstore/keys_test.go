package orderstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/order/orderstore"
)

// A revoked key is refused at once, and registering its value again (the
// bootstrap key file of a restarted order-svc) does not bring it back.
func TestARevokedKeyStaysRevoked(t *testing.T) {
	ctx := context.Background()
	pool := testkit.NewPool(t, orderstore.Migrate)
	s := &orderstore.Store{Pool: pool}
	key := apikey.New()
	k, err := s.EnsureKey(ctx, key, "bootstrap", apikey.Scopes)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.EnsureKey(ctx, key, "bootstrap", apikey.Scopes); err != nil || again.ID != k.ID {
		t.Fatalf("the same key registered again: %+v, %v; want key %d", again, err, k.ID)
	}
	if got, err := s.Authenticate(ctx, key); err != nil || got.ID != k.ID || !got.Allows(apikey.OrdersWrite) {
		t.Fatalf("Authenticate = %+v, %v; want key %d with every scope", got, err, k.ID)
	}
	if err := s.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, key); !errors.Is(err, orderstore.ErrUnknownKey) {
		t.Fatalf("a revoked key authenticates: %v", err)
	}
	if again, err := s.EnsureKey(ctx, key, "bootstrap", apikey.Scopes); err != nil || again.RevokedAt == nil {
		t.Fatalf("the revoked key registered again: %+v, %v; want it still revoked", again, err)
	}
	if _, err := s.Authenticate(ctx, key); !errors.Is(err, orderstore.ErrUnknownKey) {
		t.Fatalf("a revoked key registered again authenticates: %v", err)
	}
	if err := s.RevokeKey(ctx, k.ID+1000); !errors.Is(err, orderstore.ErrNoSuchKey) {
		t.Fatalf("revoking a key that does not exist: %v; want ErrNoSuchKey", err)
	}
	if _, err := s.EnsureKey(ctx, "hunter2", "bootstrap", apikey.Scopes); err == nil {
		t.Fatal("a value that is no key was registered")
	}
}
