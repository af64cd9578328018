package orderstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/order/apikey"
)

// ErrUnknownKey: no key has that value, or it was revoked.
var ErrUnknownKey = errors.New("unknown or revoked API key")

// ErrNoSuchKey: no key has that id.
var ErrNoSuchKey = errors.New("no such API key")

// StoredKey is a key as operators list it.
type StoredKey struct {
	apikey.Key
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// CreateKey stores a new random key with the given name, scopes and
// customer restriction ("" for none) and returns it: the only time the
// key itself is seen, since only its hash is stored.
func (s *Store) CreateKey(ctx context.Context, name string, scopes []apikey.Scope, customerID string) (string, StoredKey, error) {
	if err := apikey.Check(name, scopes, customerID); err != nil {
		return "", StoredKey{}, err
	}
	key := apikey.New()
	k := StoredKey{Key: apikey.Key{Name: name, Scopes: scopes, CustomerID: customerID}}
	err := s.Pool.QueryRow(ctx, `insert into api_keys (name, key_hash, scopes, customer_id) values ($1, $2, $3, nullif($4, ''))
		returning id, created_at`, name, apikey.Hash(key), scopeStrings(scopes), customerID).Scan(&k.ID, &k.CreatedAt)
	if err != nil {
		return "", StoredKey{}, fmt.Errorf("store API key: %w", err)
	}
	return key, k, nil
}

// Authenticate returns the key whose value key is, unless it was
// revoked: ErrUnknownKey then, and for anything that is not a key.
func (s *Store) Authenticate(ctx context.Context, key string) (apikey.Key, error) {
	if !apikey.WellFormed(key) {
		return apikey.Key{}, ErrUnknownKey
	}
	var k apikey.Key
	var scopes []string
	err := s.Pool.QueryRow(ctx, `select id, name, scopes, coalesce(customer_id, '') from api_keys
		where key_hash = $1 and revoked_at is null`, apikey.Hash(key)).Scan(&k.ID, &k.Name, &scopes, &k.CustomerID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return apikey.Key{}, ErrUnknownKey
	case err != nil:
		return apikey.Key{}, fmt.Errorf("look up API key: %w", err)
	}
	k.Scopes = make([]apikey.Scope, len(scopes))
	for i, sc := range scopes {
		k.Scopes[i] = apikey.Scope(sc)
	}
	return k, nil
}

// Keys lists the keys, oldest first; revoked ones too when all is set.
func (s *Store) Keys(ctx context.Context, all bool) ([]StoredKey, error) {
	rows, err := s.Pool.Query(ctx, `select id, name, scopes, coalesce(customer_id, ''), created_at, revoked_at from api_keys
		where $1 or revoked_at is null order by id`, all)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredKey, error) {
		var k StoredKey
		var scopes []string
		err := r.Scan(&k.ID, &k.Name, &scopes, &k.CustomerID, &k.CreatedAt, &k.RevokedAt)
		for _, sc := range scopes {
			k.Scopes = append(k.Scopes, apikey.Scope(sc))
		}
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return keys, nil
}

// RevokeKey revokes the key id at once: its next request is refused.
// Revoking a revoked key changes nothing and is no error.
func (s *Store) RevokeKey(ctx context.Context, id int64) error {
	tag, err := s.Pool.Exec(ctx, `update api_keys set revoked_at = coalesce(revoked_at, now()) where id = $1`, id)
	if err != nil {
		return fmt.Errorf("revoke API key %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("API key %d: %w", id, ErrNoSuchKey)
	}
	return nil
}

func scopeStrings(scopes []apikey.Scope) []string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return s
}

// EnsureKey stores key (which the caller made, see apikey.New) with name
// and scopes unless it is stored already, and returns it as stored. A key
// revoked before stays revoked: EnsureKey never brings one back.
func (s *Store) EnsureKey(ctx context.Context, key, name string, scopes []apikey.Scope) (StoredKey, error) {
	if !apikey.WellFormed(key) {
		return StoredKey{}, fmt.Errorf("not an API key: want %s and %d characters of base64url", apikey.Prefix, apikey.Len-len(apikey.Prefix))
	}
	if err := apikey.Check(name, scopes, ""); err != nil {
		return StoredKey{}, err
	}
	if _, err := s.Pool.Exec(ctx, `insert into api_keys (name, key_hash, scopes) values ($1, $2, $3) on conflict (key_hash) do nothing`,
		name, apikey.Hash(key), scopeStrings(scopes)); err != nil {
		return StoredKey{}, fmt.Errorf("store API key: %w", err)
	}
	var k StoredKey
	var sc []string
	err := s.Pool.QueryRow(ctx, `select id, name, scopes, coalesce(customer_id, ''), created_at, revoked_at from api_keys where key_hash = $1`,
		apikey.Hash(key)).Scan(&k.ID, &k.Name, &sc, &k.CustomerID, &k.CreatedAt, &k.RevokedAt)
	for _, x := range sc {
		k.Scopes = append(k.Scopes, apikey.Scope(x))
	}
	if err != nil {
		return StoredKey{}, fmt.Errorf("read API key: %w", err)
	}
	return k, nil
}
