// Package grantstest gives a test's deployment of services their own Kafka
// principals (grants.Connections), deleted when the test ends.
package grantstest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/grants"
)

// Connections provisions the services' principals under prefix on base's
// cluster through adm (a super user's) and returns each service's
// connection; base itself for every service when the cluster has no SASL.
func Connections(t testing.TB, adm *kadm.Client, base kit.KafkaConfig, prefix string) func(service string) kit.KafkaConfig {
	t.Helper()
	of, revoke, err := grants.Connections(t.Context(), adm, base, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := revoke(ctx); err != nil {
			t.Errorf("delete the services' Kafka principals: %v", err)
		}
	})
	return of
}
