package schemas

import "embed"

// files holds the event contract: events/catalog.json and, per event type,
// v<N>.schema.json, optional v<N>.avsc and examples/*.json. It is compiled
// into every binary so producers and consumers agree without a registry.
//
//go:embed events
var files embed.FS
