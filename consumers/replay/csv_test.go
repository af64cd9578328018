package replay

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteCSVQuotesAsApacheDoes(t *testing.T) {
	plans := Plans{
		{Group: "g", Rows: []Row{{Topic: "orders", Partition: 0, New: 5}, {Topic: "a-much-longer-topic-name-x", Partition: 1, New: 7}}},
		{Group: `we,ird "g"`, Rows: []Row{{Topic: "t.1", Partition: 2, New: 0}}},
	}
	var one, many bytes.Buffer
	if err := plans[:1].WriteCSV(&one, true); err != nil {
		t.Fatal(err)
	}
	if want := "orders,0,5\n\"a-much-longer-topic-name-x\",1,7\n"; one.String() != want {
		t.Errorf("one group:\n%s\nwant\n%s", one.String(), want)
	}
	if err := plans.WriteCSV(&many, false); err != nil {
		t.Fatal(err)
	}
	want := "g,orders,0,5\ng,\"a-much-longer-topic-name-x\",1,7\n\"we,ird \"\"g\"\"\",t.1,2,0\n"
	if many.String() != want {
		t.Errorf("several groups:\n%s\nwant\n%s", many.String(), want)
	}
	// What replay writes, replay reads back.
	got, err := ReadCSV(strings.NewReader(many.String()), []string{"g", `we,ird "g"`})
	if err != nil {
		t.Fatal(err)
	}
	if got[`we,ird "g"`][TopicPartition{"t.1", 2}] != 0 || got["g"][TopicPartition{"a-much-longer-topic-name-x", 1}] != 7 || len(got["g"]) != 2 {
		t.Errorf("read back: %v", got)
	}
	for v, quoted := range map[string]bool{"abc": false, "a.b-c_D9": false, "a b": true, "a+b": true, `a\b`: true, strings.Repeat("x", 24): false, strings.Repeat("x", 25): true} {
		if got := csvQuote(v) != v; got != quoted {
			t.Errorf("csvQuote(%q) quoted %v, want %v", v, got, quoted)
		}
	}
}

func TestReadCSVDecidesTheFormatAsApache(t *testing.T) {
	// One group and three columns: the lines are that group's.
	got, err := ReadCSV(strings.NewReader("t,0,5\nt,1,6\n"), []string{"g"})
	if err != nil || got["g"][TopicPartition{"t", 1}] != 6 || len(got) != 1 {
		t.Errorf("three columns: %v %v", got, err)
	}
	// One group and four columns: the group column decides.
	got, err = ReadCSV(strings.NewReader("g,t,0,5\nh,t,0,6\n"), []string{"g"})
	if err != nil || got["g"][TopicPartition{"t", 0}] != 5 || got["h"][TopicPartition{"t", 0}] != 6 {
		t.Errorf("four columns, one group: %v %v", got, err)
	}
	// Several groups: every line needs the group column.
	for _, tc := range []struct{ in, err string }{
		{"t,0,5\n", "want group,topic,partition,offset"},
		{"g,t,x,5\n", `partition "x" is not an integer`},
		{"g,t,0,five\n", `offset "five" is not an integer`},
		{"g,t,0,-1\n", "invalid negative offset"},
		{"g,\"t,0,5\n", "read the reset plan"},
	} {
		if _, err := ReadCSV(strings.NewReader(tc.in), []string{"g", "h"}); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
		}
	}
}
