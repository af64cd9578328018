package console

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestParseSearchNamesWhatItFoundOrWhyNot(t *testing.T) {
	for _, c := range []struct {
		in      string
		kind    SearchKind
		value   string
		id      int64
		wantErr string
	}{
		{in: "01A2305C-428A-7221-951F-B82F8858EA0F", kind: SearchUUID, value: "01a2305c-428a-7221-951f-b82f8858ea0f"},
		{in: "  42 ", kind: SearchPaymentID, value: "42", id: 42},
		{in: "pi_3Nabc", kind: SearchProviderPayment, value: "pi_3Nabc"},
		{in: "evt_9SSG", kind: SearchProviderEvent, value: "evt_9SSG"},
		{in: "", wantErr: "type an order id"},
		{in: "0", wantErr: "must be positive"},
		{in: "-3", wantErr: "must be positive"},
		{in: "01a2305c-428a-7221-951f", wantErr: "is not an order or event id"},
		{in: "pi_", wantErr: "is not an order or event id"},
		{in: "ch_1", wantErr: "is not an order or event id"},
		{in: "'; drop table orders; --", wantErr: "is not an order or event id"},
		{in: strings.Repeat("x", 500), wantErr: "…"},
	} {
		got, err := ParseSearch(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseSearch(%.20q) = %v, %v; want an error containing %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.Kind != c.kind || got.Value != c.value || got.ID != c.id {
			t.Errorf("ParseSearch(%q) = %+v, %v; want %s %q %d", c.in, got, err, c.kind, c.value, c.id)
		}
	}
}

func TestCausalOrderPutsEveryEventAfterItsCause(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name   string
		events []CausalEvent
		want   []int
	}{
		{"append order when unrelated", []CausalEvent{{ID: "b", Appended: at(2)}, {ID: "a", Appended: at(1)}}, []int{1, 0}},
		{"a cause whose clock ran late still comes first", []CausalEvent{
			{ID: "created", Appended: at(10)},
			{ID: "reserved", Causes: "created", Appended: at(5)}, // another database's clock, behind
			{ID: "processed", Causes: "reserved", Appended: at(20)},
		}, []int{0, 1, 2}},
		{"siblings by time after their cause", []CausalEvent{
			{ID: "confirmed", Causes: "processed", Appended: at(30)},
			{ID: "processed", Appended: at(20)},
			{ID: "committed", Causes: "processed", Appended: at(25)},
		}, []int{1, 2, 0}},
		{"a cause not among the events makes a root", []CausalEvent{{ID: "x", Causes: "elsewhere", Appended: at(3)}, {ID: "y", Appended: at(1)}}, []int{1, 0}},
		{"a causation cycle still shows every event", []CausalEvent{{ID: "p", Causes: "q", Appended: at(1)}, {ID: "q", Causes: "p", Appended: at(2)}}, []int{0, 1}},
		{"an event naming itself", []CausalEvent{{ID: "s", Causes: "s", Appended: at(1)}}, []int{0}},
	} {
		if got := CausalOrder(c.events); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: CausalOrder = %v; want %v", c.name, got, c.want)
		}
	}
}

func TestPayloadPreviewIsReadable(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{nil, "(empty value)"},
		{[]byte(`{"a":1}`), "{\n  \"a\": 1\n}"},
		{[]byte("not json"), `not JSON: "not json"`},
		{[]byte{0, 0, 0, 0, 7, 2, 4}, "Avro (Confluent framing), schema id 7, 2 bytes of data; first bytes: 0204"},
		{[]byte{0xff, 0xfe, 0x01}, "3 bytes, not text; first bytes: fffe01"},
	} {
		if got := PayloadPreview(c.in); got != c.want {
			t.Errorf("PayloadPreview(%q) = %q; want %q", c.in, got, c.want)
		}
	}
	long := PayloadPreview(bytes.Repeat([]byte("a"), 5000))
	if !strings.Contains(long, "more characters") || len(long) > 1600 {
		t.Errorf("a long payload is not cut: %d bytes", len(long))
	}
}

func TestSessionsRefuseExpiredAndTamperedCookiesAndForeignCSRF(t *testing.T) {
	s := Sessions{Key: bytes.Repeat([]byte("k"), 32), TTL: time.Hour}
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	u := User{Name: "ann", Role: RoleOperator}
	ss, cookie, err := s.New(u, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Check(cookie, now.Add(59*time.Minute))
	if err != nil || got.User != "ann" || got.Role != RoleOperator {
		t.Fatalf("Check = %+v, %v", got, err)
	}
	if _, err := s.Check(cookie, now.Add(time.Hour)); err != ErrSessionExpired {
		t.Errorf("after the TTL: %v; want ErrSessionExpired", err)
	}
	enc, sig, _ := strings.Cut(cookie, ".")
	forged := strings.Replace(enc, "A", "B", 1) + "." + sig
	if _, err := s.Check(forged, now); err != ErrBadSession {
		t.Errorf("edited cookie: %v; want ErrBadSession", err)
	}
	other := Sessions{Key: bytes.Repeat([]byte("o"), 32), TTL: time.Hour}
	if _, err := other.Check(cookie, now); err != ErrBadSession {
		t.Errorf("cookie of another key: %v; want ErrBadSession", err)
	}
	if _, err := s.Check("", now); err != ErrNoSession {
		t.Errorf("no cookie: %v", err)
	}
	if !s.CheckCSRF(ss, s.CSRF(ss)) {
		t.Error("the session's own token is refused")
	}
	ss2, _, _ := s.New(u, now)
	if s.CheckCSRF(ss, s.CSRF(ss2)) || s.CheckCSRF(ss, "") {
		t.Error("another session's token, or none, is accepted")
	}
}

func TestUsersNeedARoleAndAHash(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("correct horse"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	us, err := ParseUsers(strings.NewReader("# ops\nann operator " + string(h) + "\n\nbob read-only " + string(h) + "\n"))
	if err != nil || len(us) != 2 || us["bob"].Role != RoleReadOnly {
		t.Fatalf("ParseUsers = %v, %v", us, err)
	}
	if _, ok := us.Authenticate("ann", "correct horse"); !ok {
		t.Error("the right password is refused")
	}
	if _, ok := us.Authenticate("ann", "wrong"); ok {
		t.Error("a wrong password is accepted")
	}
	if _, ok := us.Authenticate("nobody", "correct horse"); ok {
		t.Error("an unknown user is accepted")
	}
	for in, want := range map[string]string{
		"ann admin " + string(h): `role "admin"`,
		"ann operator plaintext": "bcrypt hash",
		"ann operator":           "want \"name role bcrypt-hash\"",
		"ann operator " + string(h) + "\nann read-only " + string(h): "defined twice",
	} {
		if _, err := ParseUsers(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseUsers(%.30q) = %v; want %q", in, err, want)
		}
	}
	env, err := ParseUsersEnv("carl:operator:" + string(h))
	if err != nil || env["carl"].Role != RoleOperator {
		t.Errorf("ParseUsersEnv = %v, %v", env, err)
	}
	if _, err := ParseUsersEnv("carl:operator"); err == nil {
		t.Error("a user without a hash is accepted")
	}
	if _, err := HashPassword("short"); err == nil {
		t.Error("a 5-character password is hashed")
	}
}
