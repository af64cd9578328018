package replay

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestParseDateTimeReadsAsApache pins what Apache's Utils.getDateTime
// answers (recorded from kafka-clients 4.1.1) for the forms whose reading
// is surprising; TestParseDateTimeAgreesWithApacheParser checks a wider
// table against the Java parser itself.
func TestParseDateTimeReadsAsApache(t *testing.T) {
	const base = 1577836800000 // 2020-01-01T00:00:00Z
	tests := []struct {
		in   string
		want int64 // epoch ms; -1: refused by Apache's parser
	}{
		{"2020-01-01T00:00:00.000", base},                    // no zone: UTC
		{"2020-01-01T00:00:00.5", base + 5},                  // one digit: 5 ms, not 500
		{"2020-01-01T00:00:00.50", base + 50},                // two digits: 50 ms
		{"2020-1-1T1:2:3.4", base + 3723004},                 // unpadded fields
		{"2020-01-01T00:00:00.000+0530", base - 5*3600000},   // X reads +05, "30" ignored
		{"2020-01-01T00:00:00.000+05:30", base - 19800000},   // XXX
		{"2020-01-01T00:00:00.000+05", base - 5*3600000},     // X
		{"2020-01-01T00:00:00.000+05:3", base - 5*3600000},   // XXX fails, X reads +05
		{"2020-01-01T00:00:00.000+05:60", base - 5*3600000},  // minutes > 59: XXX fails, X reads +05
		{"2020-01-01T00:00:00.000+14:01", base - 14*3600000}, // beyond +14h: XXX fails, X reads +14
		{"2020-01-01T00:00:00.000-13:00", base + 13*3600000}, //
		{"2020-01-01T00:00:00.000 +05:00", base - 5*3600000}, // spaces before a field are skipped
		{"2020-01-01T 1:00:00.000", base + 3600000},          //
		{"2020-01-01T00:00:00.000Zjunk", base},               // text after the zone is ignored
		{"2020-01-01T1E1:00:00.000", base + 10*3600000},      // DecimalFormat reads exponents
		{"2020-01-01T00:00:00.1E2", base + 100},              //
		{"4294969316-01-01T00:00:00.000", base},              // the year wraps to 32 bits: 2020
		{"1500-01-01T00:00:00.000", -14830992000000},         // Julian calendar
		{"1582-10-04T00:00:00.000", -12219379200000},         // the last Julian day
		{"1582-10-15T00:00:00.000", -12219292800000},         // the first Gregorian day
		{"0001-01-01T00:00:00.000", -62135769600000},         //
		{"292278994-08-17T07:12:55.807Z", 9223372036854775807},
		{"2020-01-01T00:00:00", -1},            // milliseconds are required
		{"2020-01-01T00:00:00.1234", -1},       // 1234 ms
		{"2020-01-01T00:00:00.000+15:00", -1},  // beyond +14h
		{"2020-01-01T00:00:00.000-14:00", -1},  // beyond -13h
		{"2020-01-01T00:00:00.000+5:00", -1},   // one-digit hours
		{"2020-02-30T00:00:00.000", -1},        //
		{"2020-01-01T24:00:00.000", -1},        //
		{"2020-01-01T00:00:60.000", -1},        //
		{"0000-01-01T00:00:00.000", -1},        //
		{"1582-10-10T00:00:00.000", -1},        // skipped by the reform
		{"2020-01-01T-0:00:00.000", -1},        // a '-' after T: no Z appended, no zone
		{"2020-01-01T00:00:00.000z", -1},       //
		{"2020-01-01 T00:00:00.000", -1},       //
		{"2020-01-01T00:00:00,000", -1},        //
		{"2020-01-01T00:00:00.000T+05:00", -1}, // the zone check looks between the first two Ts
		{"292278994-08-17T07:12:55.808Z", -1},  // beyond a long
		{"+2020-01-01T00:00:00.000", -1},       //
		{"2020-01-01", -1},                     //
		{"2020-01-01T", -1},                    //
		{"2020-01-01T00:00:00.000+05:30:00", base - 19800000},
	}
	for _, tt := range tests {
		ms, _, ok := apacheDateTime(tt.in)
		switch {
		case tt.want == -1 && ok:
			t.Errorf("%q: read as %d, Apache refuses it", tt.in, ms)
		case tt.want != -1 && !ok:
			t.Errorf("%q: refused, Apache reads %d", tt.in, tt.want)
		case ok && ms != tt.want:
			t.Errorf("%q: read as %d (%s), Apache reads %d (%s)", tt.in, ms, time.UnixMilli(ms).UTC(), tt.want, time.UnixMilli(tt.want).UTC())
		}
	}
}

func TestParseDateTimeExtensionAndNotes(t *testing.T) {
	// RFC 3339 that Apache's parser refuses is accepted as an extension.
	got, note, err := ParseDateTime("2026-11-29T12:00:00Z")
	if err != nil || !got.Equal(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)) || note != "" {
		t.Errorf("RFC 3339 without a fraction: %v %q %v", got, note, err)
	}
	got, _, err = ParseDateTime("2026-11-29T12:00:00.123456789+01:00")
	if err != nil || !got.Equal(time.Date(2026, 11, 29, 11, 0, 0, 123456789, time.UTC)) {
		t.Errorf("RFC 3339 with nanoseconds: %v %v", got, err)
	}
	// Where Apache's parser accepts a string, its reading wins, with a note.
	got, note, err = ParseDateTime("2026-11-29T12:00:00.5Z")
	if err != nil || got.UnixMilli()%1000 != 5 || !strings.Contains(note, "5 ms") {
		t.Errorf(".5: %v %q %v; want 5 ms and a note", got, note, err)
	}
	if _, note, _ = ParseDateTime("2026-11-29T12:00:00.000+0530"); !strings.Contains(note, `"30" after the zone +05 is ignored`) {
		t.Errorf("+0530 note: %q", note)
	}
	for _, bad := range []string{"2026-11-29", "yesterday", "2026-11-29T25:00:00.000"} {
		if _, _, err := ParseDateTime(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// dateTimeCorpus is a table of --to-datetime strings built from the parts
// where parsers differ: padding, fraction widths, zone forms, blanks,
// calendar edges.
func dateTimeCorpus() []string {
	dates := []string{"2026-11-29", "2026-1-2", "02026-011-029", "2024-02-29", "2023-02-29", "1900-02-29", "2000-02-29",
		"1500-02-29", "1582-10-04", "1582-10-05", "1582-10-15", "0001-01-01", "0-01-01", "2026-13-01", "2026-00-10", "2026-12-31"}
	clocks := []string{"00:00:00", "23:59:59", "1:2:3", "24:00:00", "12:60:00", "12:00:60", " 7:08:09", "-0:00:00", "1E1:00:00"}
	fracs := []string{"", ".", ".0", ".5", ".50", ".500", ".999", ".1000", ".0001", ".1E2", ". 5", ".-1"}
	zones := []string{"", "Z", "z", "+05", "+0530", "+05:30", "+5:30", "-05:00", "-0500", "-05", "+14:00", "+14:01",
		"+1400", "+15", "-13:00", "-13:30", "-14", "+23:59", "+24:00", " Z", "Zjunk", "+05:30:00", "+05:3", "+0", "GMT", "UTC"}
	var out []string
	for i, d := range dates {
		for j, c := range clocks {
			for k, fr := range fracs {
				// every zone with the first date, clock and fraction forms; a
				// rotating zone otherwise, to keep the table small
				if i == 0 || j == 0 && k < 4 {
					for _, z := range zones {
						out = append(out, d+"T"+c+fr+z)
					}
					continue
				}
				out = append(out, d+"T"+c+fr+zones[(i+j+k)%len(zones)])
			}
		}
	}
	return append(out, "2026-11-29", "2026-11-29T", "T00:00:00.000", "2026-11-29TT00:00:00.000", "2026-11-29t00:00:00.000",
		"2026-11-29T00:00:00.000T+05:00", "4294969316-01-01T00:00:00.000", "292278994-08-17T07:12:55.807Z",
		"292278994-08-17T07:12:55.808Z", "2026-11-29T00:00:00.000\t+01:00", "+2026-11-29T00:00:00.000")
}

// TestParseDateTimeAgreesWithApacheParser runs Apache's own parser
// (Utils.getDateTime from the kafka-clients jar) over the corpus and
// compares every answer.
func TestParseDateTimeAgreesWithApacheParser(t *testing.T) {
	cp := os.Getenv("CONCORD_KAFKA_CLASSPATH")
	if cp == "" {
		t.Fatal("CONCORD_KAFKA_CLASSPATH is not set: run the tests with `make test` (infra/local/up resolves the Kafka jars and sets it)")
	}
	corpus := dateTimeCorpus()
	cmd := exec.Command("java", "-cp", cp, "testdata/GetDateTime.java")
	cmd.Stdin = strings.NewReader(strings.Join(corpus, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("java GetDateTime: %v\n%s", err, stderr.String())
	}
	var answers []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		answers = append(answers, sc.Text())
	}
	if len(answers) != len(corpus) {
		t.Fatalf("%d answers for %d inputs", len(answers), len(corpus))
	}
	agree, accepted := 0, 0
	for i, in := range corpus {
		ms, _, ok := apacheDateTime(in)
		want, jerr := strconv.ParseInt(answers[i], 10, 64)
		switch {
		case jerr != nil && ok:
			t.Errorf("%q: read as %d, Apache: %s", in, ms, answers[i])
		case jerr == nil && !ok:
			t.Errorf("%q: refused, Apache reads %d", in, want)
		case jerr == nil && ms != want:
			t.Errorf("%q: read as %d, Apache reads %d", in, ms, want)
		default:
			agree++
			if ok {
				accepted++
			}
		}
	}
	t.Logf("--to-datetime: %d of %d strings read as Apache reads them (%d accepted by both, %d refused by both)", agree, len(corpus), accepted, agree-accepted)
}
