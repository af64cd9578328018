package publisher_test

import (
	"testing"

	"github.com/concordhq/concord/infra/testkit"
)

// The WAL relay's tests create replication slots on a private server of
// this package's own (walPool): see testkit.PackagePostgresURL.
func TestMain(m *testing.M) { testkit.MainWithPrivatePostgres(m) }
