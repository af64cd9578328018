package replay

import "github.com/twmb/franz-go/pkg/kerr"

// kerrGroupIDNotFound is what newer brokers answer for a group that never
// existed; Apache's tool treats it like the Dead state.
var kerrGroupIDNotFound = kerr.GroupIDNotFound
