package idempotent_test

import (
	"fmt"

	"github.com/concordhq/concord/consumers/idempotent"
)

func errStats(s idempotent.Stats) error { return fmt.Errorf("stats %+v", s) }
