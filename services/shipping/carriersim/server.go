// Package carriersim is a stateful stand-in for a parcel carrier's label
// API: create a shipment (idempotent on an Idempotency-Key header), cancel
// it before it ships, read it by id and list shipments by idempotency key,
// so a client that lost an answer can find out what happened. It
// misbehaves on purpose when its Faults say so: 503s before execution,
// answers withheld after execution, declined addresses.
//
// State is in memory only: a restarted simulator has forgotten every
// shipment.
//
//	POST /v1/shipments              create; Idempotency-Key header required
//	GET  /v1/shipments/{id}         one shipment
//	GET  /v1/shipments?idempotency_key=K   {"data": [...]}: the shipment the key created, if any
//	POST /v1/shipments/{id}/cancel  cancel; idempotent, 409 once shipped, 404 unknown
//
// Errors are {"error": {"type", "code", "param", "message"}} with a 4xx
// naming the offending field, or a 503 api_error for injected faults.
package carriersim

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Shipment statuses.
const (
	StatusCreated   = "created"   // label bought, not yet handed over
	StatusShipped   = "shipped"   // in the carrier's hands: no longer cancellable
	StatusCancelled = "cancelled" // label voided
)

// Error types and codes of the carrier's error object.
const (
	ErrTypeInvalidRequest = "invalid_request_error"
	ErrTypeDeclined       = "shipment_declined"
	ErrTypeIdempotency    = "idempotency_error"
	ErrTypeAPI            = "api_error"

	CodeUndeliverableAddress  = "undeliverable_address"
	CodeUnsupportedPostalCode = "unsupported_postal_code"
	CodeKeyReused             = "idempotency_key_reused"
	CodeAlreadyShipped        = "shipment_already_shipped"
	CodeResourceMissing       = "resource_missing"
	CodeParameterMissing      = "parameter_missing"
	CodeParameterInvalid      = "parameter_invalid"
)

// maxBody bounds a request body; a shipment request is a few hundred bytes.
const maxBody = 64 << 10

// Address is where a shipment goes.
type Address struct {
	Name       string `json:"name,omitempty"`
	Line1      string `json:"line1"`
	Line2      string `json:"line2,omitempty"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// Item is one line of a shipment.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// CreateRequest is the body of POST /v1/shipments.
type CreateRequest struct {
	OrderID   string  `json:"order_id"`
	Reference string  `json:"reference,omitempty"`
	Address   Address `json:"address"`
	Items     []Item  `json:"items"`
}

// Shipment is the carrier's object.
type Shipment struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	Status         string    `json:"status"`
	TrackingNumber string    `json:"tracking_number"`
	IdempotencyKey string    `json:"idempotency_key"`
	OrderID        string    `json:"order_id"`
	Reference      string    `json:"reference,omitempty"`
	Address        Address   `json:"address"`
	Items          []Item    `json:"items"`
	Created        time.Time `json:"created"`
	Cancelled      time.Time `json:"cancelled,omitzero"`
}

// APIError is the carrier's error object.
type APIError struct {
	Status  int    `json:"-"`
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("carrier %d %s/%s: %s", e.Status, e.Type, e.Code, e.Message)
}

// Config configures a Server.
type Config struct {
	// APIKey, when set, is the bearer token every API request must carry.
	APIKey string
	// Seed feeds every random decision (ids and faults): same seed, same
	// requests, same answers.
	Seed uint64
	// Faults is the initial fault setting; see DefaultFaults.
	Faults Faults
	// Admin mounts the unauthenticated /__admin/ API (faults, ship,
	// stats); never expose it beyond a test network.
	Admin bool
	// Logger receives operational logs (default: discarded).
	Logger *slog.Logger
	// Now tells the time (default time.Now).
	Now func() time.Time
}

// Stats counts what the simulator did, for demos and tests.
type Stats struct {
	Requests          int64 `json:"requests"`
	Created           int64 `json:"created"`
	Declined          int64 `json:"declined"`
	Cancelled         int64 `json:"cancelled"`
	IdempotentReplays int64 `json:"idempotent_replays"`
	Injected5xx       int64 `json:"injected_5xx"`
	Hung              int64 `json:"hung"`
}

// stored is the first answer to an Idempotency-Key.
type stored struct {
	hash   [32]byte
	status int
	body   []byte
}

// Server is the simulator; it is an http.Handler.
type Server struct {
	cfg  Config
	dice dice
	log  *slog.Logger
	mux  *http.ServeMux

	drain     chan struct{} // closed by Drain: withheld answers give up
	drainOnce sync.Once

	mu        sync.Mutex // guards everything below
	faults    Faults
	stats     Stats
	byID      map[string]*Shipment
	byKey     map[string]string // idempotency key → shipment id
	answers   map[string]stored // idempotency key → first answer
	createSeq []string          // shipment ids in creation order
}

// New returns a Server; it fails if a knob is out of range.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := (&Faults{}).Apply(cfg.Faults.Values()); err != nil {
		return nil, fmt.Errorf("carriersim: %w", err)
	}
	s := &Server{cfg: cfg, dice: newDice(cfg.Seed), log: cfg.Logger, mux: http.NewServeMux(), drain: make(chan struct{}),
		faults: cfg.Faults, byID: map[string]*Shipment{}, byKey: map[string]string{}, answers: map[string]stored{}}
	s.mux.HandleFunc("POST /v1/shipments", s.api(s.create))
	s.mux.HandleFunc("GET /v1/shipments", s.api(s.list))
	s.mux.HandleFunc("GET /v1/shipments/{id}", s.api(s.get))
	s.mux.HandleFunc("POST /v1/shipments/{id}/cancel", s.api(s.cancel))
	if cfg.Admin {
		s.adminRoutes(s.mux)
	}
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Drain makes withheld answers give up (their connections are closed), so
// a shutdown is not held up by hung requests.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

// Faults returns the current fault setting.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults applies the named knobs (see Faults.Apply).
func (s *Server) SetFaults(values map[string]string) (Faults, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	if err := f.Apply(values); err != nil {
		return s.faults, err
	}
	s.faults = f
	return f, nil
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Shipments returns every shipment ever created, in creation order.
func (s *Server) Shipments() []Shipment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Shipment, 0, len(s.createSeq))
	for _, id := range s.createSeq {
		out = append(out, *s.byID[id])
	}
	return out
}

// Ship hands a created shipment over to the carrier: it can no longer be
// cancelled.
func (s *Server) Ship(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.byID[id]
	switch {
	case !ok:
		return fmt.Errorf("carriersim: ship %s: no such shipment", id)
	case sh.Status == StatusCancelled:
		return fmt.Errorf("carriersim: ship %s: it is cancelled", id)
	}
	sh.Status = StatusShipped
	return nil
}

// answer is what a handler produces; withhold asks for the hang fault to
// be considered (create and cancel, after their effect is recorded).
type answer struct {
	status   int
	body     []byte
	withhold bool
}

func jsonAnswer(status int, v any) answer {
	b, err := json.Marshal(v)
	if err != nil {
		return errAnswer(&APIError{Status: http.StatusInternalServerError, Type: ErrTypeAPI, Message: "encoding answer: " + err.Error()})
	}
	return answer{status: status, body: b}
}

func errAnswer(e *APIError) answer {
	b, _ := json.Marshal(struct {
		Error *APIError `json:"error"`
	}{e})
	return answer{status: e.Status, body: b}
}

// api wraps a handler with authentication, the latency and 5xx faults
// (before execution) and the hang fault (after it).
func (s *Server) api(h func(r *http.Request) answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.cfg.APIKey {
			writeAnswer(w, errAnswer(&APIError{Status: http.StatusUnauthorized, Type: ErrTypeInvalidRequest, Code: "api_key_invalid",
				Param: "Authorization", Message: "Authorization must be Bearer <api key>"}))
			return
		}
		s.mu.Lock()
		s.stats.Requests++
		f := s.faults
		fail := s.dice.Chance(streamServerError, f.ServerErrorRate)
		if s.faults.ServerErrorNext > 0 {
			s.faults.ServerErrorNext--
			fail = true
		}
		if fail {
			s.stats.Injected5xx++
		}
		s.mu.Unlock()
		if f.Latency > 0 {
			select {
			case <-time.After(f.Latency):
			case <-r.Context().Done():
				return
			}
		}
		if fail {
			writeAnswer(w, errAnswer(&APIError{Status: http.StatusServiceUnavailable, Type: ErrTypeAPI, Code: "carrier_unavailable",
				Message: "the carrier is temporarily unavailable; retry with the same Idempotency-Key"}))
			return
		}
		a := h(r)
		if a.withhold && s.hang() {
			s.log.Info("carriersim: answer withheld", "method", r.Method, "path", r.URL.Path, "status", a.status)
			select {
			case <-r.Context().Done():
			case <-s.drain:
			}
			panic(http.ErrAbortHandler) // close the connection without an answer
		}
		writeAnswer(w, a)
	}
}

func (s *Server) hang() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.dice.Chance(streamHang, s.faults.HangRate)
	if s.faults.HangNext > 0 {
		s.faults.HangNext--
		h = true
	}
	if h {
		s.stats.Hung++
	}
	return h
}

func writeAnswer(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

func invalid(code, param, msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: ErrTypeInvalidRequest, Code: code, Param: param, Message: msg}
}

// Validate names the first missing or malformed field of req.
func (req CreateRequest) Validate() *APIError {
	missing := func(param string) *APIError {
		return invalid(CodeParameterMissing, param, "Missing required param: "+param+".")
	}
	switch {
	case strings.TrimSpace(req.OrderID) == "":
		return missing("order_id")
	case strings.TrimSpace(req.Address.Line1) == "":
		return missing("address.line1")
	case strings.TrimSpace(req.Address.City) == "":
		return missing("address.city")
	case strings.TrimSpace(req.Address.PostalCode) == "":
		return missing("address.postal_code")
	case len(req.Address.Country) != 2 || strings.ToUpper(req.Address.Country) != req.Address.Country:
		return invalid(CodeParameterInvalid, "address.country", "address.country must be a two-letter ISO 3166 code in capitals.")
	case len(req.Items) == 0:
		return missing("items")
	}
	for i, it := range req.Items {
		if strings.TrimSpace(it.SKU) == "" {
			return missing(fmt.Sprintf("items[%d].sku", i))
		}
		if it.Quantity <= 0 {
			return invalid(CodeParameterInvalid, fmt.Sprintf("items[%d].quantity", i), "quantity must be positive.")
		}
	}
	return nil
}

func (s *Server) create(r *http.Request) answer {
	key := r.Header.Get("Idempotency-Key")
	if strings.TrimSpace(key) == "" {
		return errAnswer(invalid(CodeParameterMissing, "Idempotency-Key", "An Idempotency-Key header is required: a retry must not buy a second label."))
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errAnswer(invalid(CodeParameterInvalid, "body", "reading body: "+err.Error()))
	}
	if len(raw) > maxBody {
		return errAnswer(&APIError{Status: http.StatusRequestEntityTooLarge, Type: ErrTypeInvalidRequest, Code: CodeParameterInvalid, Param: "body",
			Message: fmt.Sprintf("body larger than %d bytes", maxBody)})
	}
	var req CreateRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return errAnswer(invalid(CodeParameterInvalid, "body", "body must be a JSON shipment request: "+err.Error()))
	}
	if e := req.Validate(); e != nil {
		return errAnswer(e)
	}
	// The key is bound to the request's meaning, not its bytes: field
	// order and whitespace do not make a retry "another request".
	canon, _ := json.Marshal(req)
	hash := sha256.Sum256(canon)

	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.answers[key]; ok {
		if prev.hash != hash {
			return errAnswer(&APIError{Status: http.StatusUnprocessableEntity, Type: ErrTypeIdempotency, Code: CodeKeyReused, Param: "Idempotency-Key",
				Message: "Keys for idempotent requests can only be used with the same parameters they were first used with."})
		}
		s.stats.IdempotentReplays++
		return answer{status: prev.status, body: prev.body, withhold: true}
	}
	var a answer
	switch {
	case s.faults.declines(req.Address.PostalCode):
		s.dice.Chance(streamDecline, 0) // keep the stream's position independent of the knob
		s.stats.Declined++
		a = errAnswer(&APIError{Status: http.StatusUnprocessableEntity, Type: ErrTypeDeclined, Code: CodeUnsupportedPostalCode,
			Param: "address.postal_code", Message: "The carrier does not deliver to postal code " + req.Address.PostalCode + "."})
	case s.dice.Chance(streamDecline, s.faults.DeclineRate):
		s.stats.Declined++
		a = errAnswer(&APIError{Status: http.StatusUnprocessableEntity, Type: ErrTypeDeclined, Code: CodeUndeliverableAddress,
			Param: "address", Message: "The address cannot be delivered to."})
	default:
		sh := &Shipment{ID: s.dice.id("shp", 20), Object: "shipment", Status: StatusCreated, IdempotencyKey: key,
			OrderID: req.OrderID, Reference: req.Reference, Address: req.Address, Items: req.Items, Created: s.cfg.Now().UTC()}
		sh.TrackingNumber = s.dice.id("TRK", 12)
		s.byID[sh.ID] = sh
		s.byKey[key] = sh.ID
		s.createSeq = append(s.createSeq, sh.ID)
		s.stats.Created++
		a = jsonAnswer(http.StatusCreated, sh)
	}
	s.answers[key] = stored{hash: hash, status: a.status, body: a.body}
	a.withhold = true
	return a
}

func (s *Server) get(r *http.Request) answer {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.byID[id]
	if !ok {
		return errAnswer(notFound(id))
	}
	return jsonAnswer(http.StatusOK, sh)
}

func notFound(id string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: ErrTypeInvalidRequest, Code: CodeResourceMissing, Param: "id", Message: "No such shipment: '" + id + "'"}
}

// list answers the shipments one idempotency key created: none or one.
func (s *Server) list(r *http.Request) answer {
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		return errAnswer(invalid(CodeParameterMissing, "idempotency_key", "Missing required param: idempotency_key."))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data := []*Shipment{}
	if id, ok := s.byKey[key]; ok {
		data = append(data, s.byID[id])
	}
	return jsonAnswer(http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) cancel(r *http.Request) answer {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	sh, ok := s.byID[id]
	if !ok {
		return errAnswer(notFound(id))
	}
	switch sh.Status {
	case StatusShipped:
		return errAnswer(&APIError{Status: http.StatusConflict, Type: ErrTypeInvalidRequest, Code: CodeAlreadyShipped, Param: "id",
			Message: "Shipment " + id + " is already in the carrier's hands and cannot be cancelled."})
	case StatusCreated:
		sh.Status, sh.Cancelled = StatusCancelled, s.cfg.Now().UTC()
		s.stats.Cancelled++
	}
	a := jsonAnswer(http.StatusOK, sh)
	a.withhold = true
	return a
}
