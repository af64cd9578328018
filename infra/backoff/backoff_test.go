package backoff

import (
	"math"
	"testing"
	"time"
)

func TestExponentialDoublesUpToTheCap(t *testing.T) {
	first, max := 100*time.Millisecond, 5*time.Second
	for _, c := range []struct {
		n    int
		want time.Duration
	}{
		{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond},
		{6, 3200 * time.Millisecond}, {7, 5 * time.Second}, {1000, 5 * time.Second},
		{math.MaxInt, 5 * time.Second}, // never overflows into a negative wait
		{0, 100 * time.Millisecond}, {-3, 100 * time.Millisecond},
	} {
		if got := Exponential(c.n, first, max); got != c.want {
			t.Errorf("Exponential(%d, %v, %v) = %v; want %v", c.n, first, max, got, c.want)
		}
	}
}

func TestExponentialCapsAFirstWaitAboveTheCap(t *testing.T) {
	if got := Exponential(1, time.Minute, time.Second); got != time.Second {
		t.Errorf("Exponential(1, 1m, 1s) = %v; want 1s", got)
	}
	// An odd cap: 2s doubled is 4s, above 3s.
	if got := Exponential(2, 2*time.Second, 3*time.Second); got != 3*time.Second {
		t.Errorf("Exponential(2, 2s, 3s) = %v; want 3s", got)
	}
	if got := Exponential(math.MaxInt, time.Duration(math.MaxInt64)/3, time.Duration(math.MaxInt64)); got != time.Duration(math.MaxInt64) {
		t.Errorf("Exponential near the largest duration = %v; want the cap", got)
	}
}

func TestEqualJitterKeepsHalfAndSpreadsTheOtherHalf(t *testing.T) {
	first, max := 100*time.Millisecond, 2*time.Second
	for _, c := range []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, 50 * time.Millisecond},
		{1, 0.999999, 100 * time.Millisecond},
		{2, 0, 100 * time.Millisecond},
		{4, 0, 400 * time.Millisecond},
		{6, 0, time.Second}, // 3.2s capped at 2s, half fixed
		{51, 0.5, 1500 * time.Millisecond},
	} {
		got := EqualJitter(Exponential(c.n, first, max), c.r)
		if d := got - c.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("EqualJitter(Exponential(%d), %.2f) = %v; want %v", c.n, c.r, got, c.want)
		}
	}
}

func TestJitteredStaysWithinHalfAndTheWhole(t *testing.T) {
	d := time.Second
	for range 1000 {
		if got := Jittered(d); got < d/2 || got >= d {
			t.Fatalf("Jittered(1s) = %v; want within [500ms, 1s)", got)
		}
	}
}

func TestLoopGrowsOnFailureAndStartsOverOnSuccess(t *testing.T) {
	l := Loop{First: 100 * time.Millisecond, Max: 300 * time.Millisecond}
	var got []time.Duration
	for range 4 {
		got = append(got, l.Failed())
	}
	l.Succeeded()
	got = append(got, l.Failed())
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 100 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits = %v; want %v", got, want)
		}
	}
}
