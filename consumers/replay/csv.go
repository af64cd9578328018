package replay

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Plans are the reset plans of several groups, in the order of the groups.
type Plans []Plan

// WriteCSV writes plans in the CSV of Apache's --export: "topic,partition,
// offset" for a single group (single is how many --group the user gave,
// as Apache decides), "group,topic,partition,offset" otherwise; no header.
func (ps Plans) WriteCSV(w io.Writer, single bool) error {
	var b strings.Builder
	for _, p := range ps {
		for _, r := range p.Rows {
			if !single {
				b.WriteString(csvQuote(p.Group) + ",")
			}
			fmt.Fprintf(&b, "%s,%d,%d\n", csvQuote(r.Topic), r.Partition, r.New)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// csvQuote quotes a value where Apache's CSV writer (Jackson's, with its
// loose check) does, so an export is the same bytes as Apache's: values
// longer than 24 characters, or holding a character below '-' (a blank, a
// comma, a quote…) or a backslash.
func csvQuote(v string) string {
	need := len(v) > 24
	for i := 0; i < len(v) && !need; i++ {
		need = v[i] < '-' || v[i] == '\\'
	}
	if !need {
		return v
	}
	return `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
}

// FileOffsets are the offsets a --from-file CSV asks for, by group.
type FileOffsets map[string]map[TopicPartition]int64

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ReadCSV reads a plan exported by Apache's tool or by replay --export.
// As Apache decides: when a single group is given and the first line has
// three columns, every line is "topic,partition,offset" for that group;
// otherwise every line is "group,topic,partition,offset". A line that
// does not fit is an error naming the line.
func ReadCSV(r io.Reader, groups []string) (FileOffsets, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read the reset plan: %w", err)
	}
	noGroup := len(groups) == 1 && len(recs) > 0 && len(recs[0]) == 3 && validRow(recs[0])
	out := FileOffsets{}
	for i, rec := range recs {
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		group := ""
		if noGroup {
			if len(rec) != 3 {
				return nil, fmt.Errorf("reset plan line %d: want topic,partition,offset, got %d columns", i+1, len(rec))
			}
			group = groups[0]
		} else {
			if len(rec) != 4 {
				return nil, fmt.Errorf("reset plan line %d: want group,topic,partition,offset, got %d columns", i+1, len(rec))
			}
			group, rec = rec[0], rec[1:]
		}
		p, err := strconv.ParseInt(rec[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("reset plan line %d: partition %q is not an integer", i+1, rec[1])
		}
		o, err := strconv.ParseInt(rec[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reset plan line %d: offset %q is not an integer", i+1, rec[2])
		}
		if o < 0 {
			return nil, fmt.Errorf("reset plan line %d: invalid negative offset %d", i+1, o)
		}
		if out[group] == nil {
			out[group] = map[TopicPartition]int64{}
		}
		out[group][TopicPartition{rec[0], int32(p)}] = o
	}
	return out, nil
}

func validRow(rec []string) bool {
	_, err1 := strconv.ParseInt(rec[1], 10, 32)
	_, err2 := strconv.ParseInt(rec[2], 10, 64)
	return err1 == nil && err2 == nil
}

// Groups returns the groups the file names, sorted.
func (f FileOffsets) Groups() []string {
	out := make([]string, 0, len(f))
	for g := range f {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
