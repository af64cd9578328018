package wake_test

import (
	"testing"
	"time"

	"github.com/concordhq/concord/infra/wake"
)

func TestWakeUpsSentWhileOneIsPendingCoalesce(t *testing.T) {
	s := wake.New()
	select {
	case <-s.C():
		t.Fatal("a new signal has a wake-up pending")
	default:
	}
	for range 3 {
		s.Now() // never blocks, though nobody receives
	}
	<-s.C()
	select {
	case <-s.C():
		t.Fatal("three wake-ups sent while one was pending woke the worker twice")
	default:
	}
}

func TestAfterWakesOnceTheDelayHasPassed(t *testing.T) {
	s := wake.New()
	start := time.Now()
	s.After(30 * time.Millisecond)
	select {
	case <-s.C():
		if waited := time.Since(start); waited < 30*time.Millisecond {
			t.Fatalf("woke after %s, before the 30ms asked", waited)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up 10s after one was asked for in 30ms")
	}
	s.After(-time.Second) // already due
	select {
	case <-s.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a wake-up already due did not come")
	}
}

func TestAtTheZeroTimeWakesNobody(t *testing.T) {
	s := wake.New()
	start := time.Now()
	s.At(time.Time{})
	s.At(start.Add(50 * time.Millisecond))
	select {
	case <-s.C():
		if waited := time.Since(start); waited < 50*time.Millisecond {
			t.Fatalf("woken after %s: the zero time woke the worker", waited)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up 10s after one was asked for in 50ms")
	}
}
