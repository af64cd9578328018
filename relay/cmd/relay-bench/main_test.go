package main

import (
	"slices"
	"testing"
)

func TestParseRatesReadsAListAndRefusesWhatIsNotARate(t *testing.T) {
	got, err := parseRates(" 500, 1000,,")
	if err != nil || !slices.Equal(got, []int{500, 1000}) {
		t.Fatalf("parseRates = %v, %v; want [500 1000]", got, err)
	}
	if got, err := parseRates(""); err != nil || len(got) != 0 {
		t.Fatalf("an empty list gave %v, %v", got, err)
	}
	for _, bad := range []string{"0", "-5", "fast", "500,1k"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("parseRates(%q) was accepted", bad)
		}
	}
}
