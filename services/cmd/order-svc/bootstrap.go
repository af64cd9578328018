package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/order/orderstore"
)

// bootstrapKey makes the key in path usable with every scope, for local
// runs, the demo and tests: a missing file is created (mode 0600) with a
// new key; an existing one is read. The key is registered by its hash
// like any other, so `order-svc keys revoke` ends it for good.
func bootstrapKey(ctx context.Context, store *orderstore.Store, path string, log *slog.Logger) error {
	key := apikey.New()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, err = f.WriteString(key + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--api-key-file %s: %w", path, err)
		}
	case errors.Is(err, fs.ErrExist):
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--api-key-file: %w", err)
		}
		key = strings.TrimSpace(string(b))
	default:
		return fmt.Errorf("--api-key-file: %w", err)
	}
	k, err := store.EnsureKey(ctx, key, "bootstrap: "+path, apikey.Scopes)
	if err != nil {
		return fmt.Errorf("--api-key-file %s: %w", path, err)
	}
	if k.RevokedAt != nil {
		log.Warn("the key of --api-key-file was revoked: requests presenting it get 401", "file", path, "key_id", k.ID)
		return nil
	}
	log.Info("API key of --api-key-file accepted", "file", path, "key_id", k.ID, "scopes", k.Scopes)
	return nil
}
