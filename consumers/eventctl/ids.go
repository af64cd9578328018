package eventctl

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/avro"
)

// ParseAvroIDs reads --avro-ids: TYPE/vN=ID pairs, comma-separated, e.g.
// account.debited/v1=7.
func ParseAvroIDs(cat *schemas.Catalog, s string) (map[string]int, error) {
	out := map[string]int{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		tv, id, ok := strings.Cut(pair, "=")
		typ, v, ok2 := strings.Cut(tv, "/v")
		n, err1 := strconv.Atoi(v)
		i, err2 := strconv.Atoi(id)
		if !ok || !ok2 || err1 != nil || err2 != nil || i < 0 {
			return nil, fmt.Errorf("--avro-ids %q: want TYPE/vN=ID, e.g. account.debited/v1=7", pair)
		}
		e, err := cat.Lookup(typ)
		if err != nil {
			return nil, fmt.Errorf("--avro-ids %q: %w", pair, err)
		}
		if e.Encoding != schemas.EncodingAvro {
			return nil, fmt.Errorf("--avro-ids %q: %s is not Avro-encoded", pair, typ)
		}
		if !slices.Contains(e.Versions, n) {
			return nil, fmt.Errorf("--avro-ids %q: %s has no version %d (known: %v)", pair, typ, n, e.Versions)
		}
		out[tv] = i
	}
	return out, nil
}

// RegistryIDs finds the registry's id of every Avro schema of the catalog
// by content (Avro's parsing canonical form), whatever subject it was
// registered under.
func RegistryIDs(ctx context.Context, cl *sr.Client, cat *schemas.Catalog) (map[string]int, error) {
	all, err := cl.AllSchemas(ctx)
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	byCanon := map[string]int{}
	for _, s := range all {
		if s.Type != sr.TypeAvro {
			continue
		}
		if c, err := goavro.NewCodec(s.Schema.Schema); err == nil {
			byCanon[c.CanonicalSchema()] = s.ID
		}
	}
	out := map[string]int{}
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		if e.Encoding != schemas.EncodingAvro {
			continue
		}
		for _, v := range e.Versions {
			b, err := fs.ReadFile(cat.Files(), path.Join("events", typ, "v"+strconv.Itoa(v)+".avsc"))
			if err != nil {
				return nil, err
			}
			c, err := goavro.NewCodec(string(b))
			if err != nil {
				return nil, err
			}
			if id, ok := byCanon[c.CanonicalSchema()]; ok {
				out[typ+"/v"+strconv.Itoa(v)] = id
			}
		}
	}
	return out, nil
}

// NewSerde builds the Avro serde of the catalog with the given ids. A
// version without an id gets a negative one, which no record carries: its
// records fail to decode naming the id they carry, and producing it fails.
func NewSerde(cat *schemas.Catalog, ids map[string]int) (*avro.Serde, error) {
	unknown := 0
	return avro.New(cat, func(typ string, v int) (int, error) {
		if id, ok := ids[typ+"/v"+strconv.Itoa(v)]; ok {
			return id, nil
		}
		unknown--
		return unknown, nil
	})
}
