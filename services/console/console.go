// Package console is the operations web UI: where an order is and what
// happened to it, the outbox and dead letters of every service, the
// reconciler's findings, and the sagas at a glance. It reads the services'
// databases and the broker; it writes nothing of theirs itself — every
// action calls the package the matching CLI calls (relay/outbox,
// consumers/replay, reconcilerstore) and is written to the console's own
// audit table.
//
// Pages are server-rendered html/template with embedded assets and charts
// drawn as SVG on the server: a page is complete when its HTML arrives.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Service is one saga participant's database: its outbox, its consumer
// groups' processed_events and dead_letters, and its business tables.
type Service struct {
	Name string // order-svc, inventory-svc, payment-svc
	Pool *pgxpool.Pool
}

// Config is what the console reads and acts on.
type Config struct {
	Orders    Service // orders, order_history
	Inventory Service // reservations
	Payments  Service // payments, transitions, webhooks, the reconciler's tables
	// Audit is the console's own database (console_audit).
	Audit *pgxpool.Pool
	// Admin reads consumer-group offsets and lag; Producer re-publishes
	// dead letters.
	Admin    *kadm.Client
	Producer *kgo.Client
	// Sagas are the saga views; nil means the choreographed orders only.
	Sagas    []SagaSource
	Users    Users
	Sessions Sessions
	Log      *slog.Logger
	// Registerer gets the console's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock (tests move it to expire sessions); nil is time.Now.
	Now func() time.Time
}

// Server serves the console.
type Server struct {
	cfg     Config
	pages   map[string]*template.Template
	mux     *http.ServeMux
	metrics *metrics
}

// New builds the console's handler.
func New(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Sessions.Key) < 32 {
		return nil, errors.New("console: the session key needs at least 32 bytes")
	}
	if cfg.Sessions.TTL <= 0 {
		cfg.Sessions.TTL = 8 * time.Hour
	}
	if cfg.Sagas == nil {
		cfg.Sagas = []SagaSource{ChoreographedSagas{Pool: cfg.Orders.Pool}}
	}
	s := &Server{cfg: cfg, pages: map[string]*template.Template{}, mux: http.NewServeMux(), metrics: newMetrics(cfg.Registerer)}
	funcs := template.FuncMap{
		"ts":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
		"tsp":      func(t *time.Time) string { return fmtTimePtr(t) },
		"dur":      FormatDuration,
		"durp":     func(d *time.Duration) string { return fmtDurPtr(d) },
		"dash":     dash,
		"pathesc":  url.PathEscape,
		"queryesc": url.QueryEscape,
	}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if page == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFiles, n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		s.pages[page] = t
	}
	assets, err := fs.Sub(assetFiles, "assets")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.page("GET /{$}", "overview", s.overview)
	s.page("GET /sagas", "sagas", s.sagas)
	s.page("GET /timeline", "timeline", s.timeline)
	s.page("GET /outbox", "outbox", s.outboxPage)
	s.page("GET /dead-letters", "deadletters", s.deadLettersPage)
	s.page("GET /reconciliation", "reconciliation", s.reconciliationPage)
	s.page("GET /reconciliation/findings/{id}", "finding", s.findingPage)
	s.page("GET /audit", "audit", s.auditPage)
	s.action("POST /outbox/{service}/{id}/retry", ActionOutboxRetry, s.outboxRetry)
	s.action("POST /outbox/{service}/{id}/skip", ActionOutboxSkip, s.outboxSkip)
	s.action("POST /dead-letters/{service}/replay", ActionDLQReplay, s.deadLetterReplay)
	s.action("POST /reconciliation/findings/{id}/resolve", ActionFindingResolve, s.findingResolve)
	return s, nil
}

// ServeHTTP serves the console.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
	s.mux.ServeHTTP(w, r)
}

// view is what every page template gets.
type view struct {
	Page    string
	User    string
	Role    Role
	CanAct  bool
	CSRF    string
	Flash   string
	Error   string
	Status  int
	Elapsed string
	Data    any
}

// pageError is an answer other than the page: a status and a message the
// operator can act on.
type pageError struct {
	Status int
	Msg    string
}

func (e pageError) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return pageError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return pageError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return pageError{http.StatusConflict, fmt.Sprintf(format, args...)}
}

// page registers a read-only page: it needs a session, and its data comes
// from load.
func (s *Server) page(pattern, name string, load func(r *http.Request) (any, error)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ss, err := s.session(r)
		if err != nil {
			q := url.Values{"next": {r.URL.RequestURI()}}
			if errors.Is(err, ErrSessionExpired) {
				q.Set("expired", "1")
			}
			http.Redirect(w, r, "/login?"+q.Encode(), http.StatusSeeOther)
			return
		}
		v := s.newView(name, ss, r)
		data, err := load(r)
		if err != nil {
			v.Status, v.Error = s.errorStatus(r, err)
		}
		v.Data = data
		s.render(w, name, v, start)
	})
}

func (s *Server) newView(name string, ss Session, r *http.Request) view {
	return view{Page: name, User: ss.User, Role: ss.Role, CanAct: ss.Role == RoleOperator,
		CSRF: s.cfg.Sessions.CSRF(ss), Flash: r.URL.Query().Get("done"), Status: http.StatusOK}
}

func (s *Server) errorStatus(r *http.Request, err error) (int, string) {
	var pe pageError
	if errors.As(err, &pe) {
		return pe.Status, pe.Msg
	}
	s.cfg.Log.Error("console page failed", "path", r.URL.Path, "err", err)
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusServiceUnavailable, "a database or the broker did not answer in time; try again"
	}
	return http.StatusServiceUnavailable, "a database or the broker could not be read: " + err.Error()
}

func (s *Server) render(w http.ResponseWriter, name string, v view, start time.Time) {
	v.Elapsed = FormatDuration(time.Since(start))
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no such page", http.StatusNotFound)
		return
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout.html", v); err != nil {
		s.cfg.Log.Error("console render failed", "page", name, "err", err)
		http.Error(w, "the page could not be drawn", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(v.Status)
	_, _ = w.Write([]byte(b.String()))
	s.metrics.observe(name, v.Status, time.Since(start))
}

// action registers an operator action: a session, the operator role and
// the session's CSRF token come first, and nothing is read or changed
// before all three hold. do returns the audit entry of what it did and the
// message to show, or an error that changed nothing.
func (s *Server) action(pattern, name string, do func(r *http.Request, actor string) (AuditEntry, string, error)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ss, err := s.session(r)
		if err != nil {
			s.refuse(w, name, http.StatusUnauthorized, err.Error()+"; nothing was changed", start)
			return
		}
		if err := r.ParseForm(); err != nil {
			s.refuse(w, name, http.StatusBadRequest, "the form could not be read: "+err.Error(), start)
			return
		}
		v := s.newView("message", ss, r)
		if ss.Role != RoleOperator {
			v.Status, v.Error = http.StatusForbidden, fmt.Sprintf("%s is %s: only operators may act; nothing was changed", ss.User, ss.Role)
			s.metrics.action(name, "forbidden")
			s.render(w, "message", v, start)
			return
		}
		if !s.cfg.Sessions.CheckCSRF(ss, r.PostForm.Get("csrf")) {
			v.Status, v.Error = http.StatusForbidden, "the form's CSRF token is missing or not this session's: reload the page and try again; nothing was changed"
			s.metrics.action(name, "csrf")
			s.render(w, "message", v, start)
			return
		}
		entry, msg, err := do(r, ss.User)
		if err != nil {
			v.Status, v.Error = s.errorStatus(r, err)
			s.metrics.action(name, "refused")
			s.render(w, "message", v, start)
			return
		}
		entry.Actor, entry.Action = ss.User, name
		if entry.Outcome == "" {
			entry.Outcome = "done"
		}
		if err := recordAudit(r.Context(), s.cfg.Audit, entry); err != nil {
			// The action is done and cannot be taken back: say so plainly.
			s.cfg.Log.Error("console audit failed", "action", name, "target", entry.Target, "err", err)
			v.Status, v.Error = http.StatusInternalServerError, msg+" — but writing the audit row failed: "+err.Error()
			s.render(w, "message", v, start)
			return
		}
		s.metrics.action(name, "done")
		back := r.PostForm.Get("back")
		if !strings.HasPrefix(back, "/") || strings.HasPrefix(back, "//") {
			back = "/"
		}
		sep := "?"
		if strings.Contains(back, "?") {
			sep = "&"
		}
		http.Redirect(w, r, back+sep+"done="+url.QueryEscape(msg), http.StatusSeeOther)
	})
}

func (s *Server) refuse(w http.ResponseWriter, action string, status int, msg string, start time.Time) {
	s.metrics.action(action, "unauthenticated")
	s.render(w, "message", view{Page: "message", Status: status, Error: msg}, start)
}

const cookieName = "concord_console"

func (s *Server) session(r *http.Request) (Session, error) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return Session{}, ErrNoSession
	}
	return s.cfg.Sessions.Check(c.Value, s.cfg.Now())
}

type loginView struct {
	Next    string
	Message string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	v := view{Page: "login", Status: http.StatusOK, Data: loginView{Next: r.URL.Query().Get("next")}}
	if r.URL.Query().Get("expired") != "" {
		v.Error = ErrSessionExpired.Error()
	}
	s.render(w, "login", v, time.Now())
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if err := r.ParseForm(); err != nil {
		s.render(w, "login", view{Page: "login", Status: http.StatusBadRequest, Error: "the form could not be read"}, start)
		return
	}
	next := r.PostForm.Get("next")
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		next = "/"
	}
	u, ok := s.cfg.Users.Authenticate(r.PostForm.Get("user"), r.PostForm.Get("password"))
	if !ok {
		s.metrics.login("refused")
		s.render(w, "login", view{Page: "login", Status: http.StatusUnauthorized, Error: "unknown user or wrong password",
			Data: loginView{Next: next}}, start)
		return
	}
	_, cookie, err := s.cfg.Sessions.New(u, s.cfg.Now())
	if err != nil {
		s.render(w, "login", view{Page: "login", Status: http.StatusInternalServerError, Error: "could not start a session"}, start)
		return
	}
	s.metrics.login("ok")
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: cookie, Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.Sessions.TTL.Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) service(name string) (Service, error) {
	for _, sv := range s.services() {
		if sv.Name == name {
			return sv, nil
		}
	}
	return Service{}, notFound("unknown service %q (want order-svc, inventory-svc or payment-svc)", name)
}

func (s *Server) services() []Service {
	return []Service{s.cfg.Orders, s.cfg.Inventory, s.cfg.Payments}
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

func fmtDurPtr(d *time.Duration) string {
	if d == nil {
		return "—"
	}
	return FormatDuration(*d)
}
